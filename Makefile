# Two commands matter (see README.md): `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_FORCE_COLOR ?= 0
export PY_COLORS ?= 0
T := scripts/timed
SUITES ?= bookworm trixie

.PHONY: demo test venv engine images lint unit suites e2e molecule collection collection-link demo-down clean

## demo: a local mesh of Docker nodes turned into a Slurm cluster
demo: venv engine
	@$(T) images python -m meshctl.localmesh images --suite bookworm
	@$(T) nodes python -m meshctl.localmesh up --suite bookworm
	@$(T) cluster scripts/demo.sh

## test: lint, unit tests, end-to-end tests and every molecule scenario
test: venv engine images lint unit collection suites

# The end-to-end tests and the Molecule scenarios at once: both mostly wait on daemons and timers
# (idle times, heartbeats, requeues), and use their own networks and container names. LATE_E2E run
# after Molecule, beside the other e2e tests, so both lanes take about as long (docs/testing.md).
LATE_E2E := tests/e2e/test_relaunch.py
suites: images collection-link
	@scripts/together \
	  e2e 'pytest -q -m e2e --durations=12 $(addprefix --ignore=,$(LATE_E2E))' \
	  molecule 'molecule test --all && pytest -q -m e2e --durations=3 $(LATE_E2E)'

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	@$(T) venv bash -c '$(PYTHON) -m venv $(VENV) && $(VENV)/bin/pip install -q --upgrade pip && $(VENV)/bin/pip install -q -e ".[test]"'
	@touch $@

engine: venv
	@$(T) engine python -m meshctl.localmesh engine

images: engine
	@$(T) images python -m meshctl.localmesh images $(addprefix --suite ,$(SUITES))

# The roles, module and filters are the collection meshctl.mesh (galaxy.yml); a checkout finds it
# through .collections/ (ansible.cfg's collections_path), a link to this folder.
collection-link:
	@mkdir -p .collections/ansible_collections/meshctl && ln -sfn ../../.. .collections/ansible_collections/meshctl/mesh

collection: venv collection-link
	@$(T) collection ansible-galaxy collection build --force --output-path build/collection

lint: venv collection-link
	@$(T) ruff bash -c 'ruff check meshctl tests plugins bench examples && ruff format --check meshctl tests plugins bench examples'
	@$(T) yamllint yamllint -s .
	@$(T) ansible-lint ansible-lint --offline -q

unit: venv
	@$(T) pytest pytest -q -m "not e2e"

e2e: images collection-link
	@$(T) e2e pytest -q -m e2e

molecule: images collection-link
	@$(T) molecule molecule test --all

demo-down: venv
	python -m meshctl.localmesh down
	rm -rf .demo

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache .collections
