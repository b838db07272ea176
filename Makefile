# Two commands matter (see README.md): `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_FORCE_COLOR ?= 0
export PY_COLORS ?= 0
# Python writes the bytecode of what it imports (into the virtualenv, and the checkout's plugins'
# __pycache__, which git and both builds leave out). This machine's environment, and CI's, set
# PYTHONDONTWRITEBYTECODE=1: every ansible-playbook, every Ansible worker that loads a plugin and
# every meshctl, pytest and Molecule process then compiled what it imported from source, every
# time (ansible-playbook's own start: 1.7 CPU-s, 0.6 with bytecode; measured 2026-11-27).
unexport PYTHONDONTWRITEBYTECODE
T := scripts/timed
SUITES ?= bookworm trixie

.PHONY: demo test venv engine cache images ready wheels lint style sanity unit checks suites e2e molecule collection collection-link demo-down clean

## demo: a local mesh of Docker nodes turned into a Slurm cluster
demo: venv engine cache
	@$(T) images python -m meshctl.localmesh images --suite bookworm
	@$(T) nodes python -m meshctl.localmesh up --suite bookworm
	@$(T) cluster scripts/demo.sh

## test: lint, unit tests, end-to-end tests and every molecule scenario
# The checks (lint, sanity, unit tests) run beside the lanes, at a low priority
# (scripts/low-priority): the lanes leave part of the two cores idle while they wait on daemons and
# timers (docs/testing.md), and the checks mostly fit there instead of before them. They start once
# the lanes leave the cores idle (scripts/when_idle.py: 15 % idle over the last 3 minutes, not
# before CHECKS_AFTER seconds, at the latest CHECKS_AT_MOST): the lanes' first converges keep both
# cores busy for their first minutes, where the checks would take CPU from them even at that
# priority; started later they end beside the last lane, not after it (docs/testing.md has the
# current figures). With four lanes the cores stay busy until the lanes end (2026-12-03: no such
# idle window before 27 minutes; started then, or at 20 minutes, the checks ended 120-130 s after
# the last lane): they start at 10 minutes, after the first converges, and take their tenth of the
# cores beside the lanes.
CHECKS_AFTER := 600
CHECKS_AT_MOST := 600
test: venv engine cache images ready wheels collection
	@$(MAKE) -s suites CHECKS_BESIDE=1

# The end-to-end tests and the Molecule scenarios at once, in five lanes (docs/testing.md, "The
# lanes"): they use their own networks and container names, except the scenarios default
# and debian13 (the same names: one lane, one after the other).
# Lane e2e: the e2e files but LATE_E2E, PROVIDERS_E2E and POD_E2E, then LATE_E2E (the short
# first-run and collection files), then E2E_SCENARIOS (none). Lane molecule: MOLECULE_SCENARIOS
# (debian13, then default once the build lane ended). Lane providers: PROVIDERS_E2E (the burst file, on the rented machines' head:
# tests/e2e/rented.py, RENTED), then PROVIDERS_SCENARIOS (tailscale). Lane pods: POD_E2E
# (the power-saving file, then the pods' file, one head between them: tests/e2e/rented.py, PODS).
# The provider files wait on Slurm's power-saving timers more than they compute (their lane, the
# last to end, used about 45 % of a core in the run of 2026-12-03 morning: 950 CPU-s in 2109 s):
# in lanes of their own those waits fall beside the other lanes' work. The power-saving file moved
# from the burst file's head to the pods' one on 2026-12-03 (a fourth lane, without a head more);
# a fourth lane of test_pod.py alone, on 2026-12-01, made every lane slower on two cores (the
# default scenario's converge 5:35 against 3:12), more than it took off the longest.
# tests/unit/testbed/test_lanes.py checks every file and scenario has a lane.
# Lane build: BUILD_SCENARIOS (slurm_build: the mesh's Slurm built for Debian 13, about 450 CPU-s and
# 13 minutes of wall beside the other lanes on a fresh machine), then BUILT says it ended. The molecule lane
# runs debian13 meanwhile, then waits for BUILT before default, whose cpu13 finds the build kept on
# this machine: in default's converge the build had every other node of the scenario wait on it (21
# of the run's last 50 minutes, the molecule lane alone for its last 12: 2026-12-03 evening).
LATE_E2E := tests/e2e/test_first_run.py tests/e2e/test_collection.py
PROVIDERS_E2E := tests/e2e/test_burst.py
POD_E2E := tests/e2e/test_power_save.py tests/e2e/test_pod.py
E2E_SCENARIOS :=
MOLECULE_SCENARIOS := debian13 default
PROVIDERS_SCENARIOS := tailscale
BUILD_SCENARIOS := slurm_build
BUILT = $(CURDIR)/$(PROFILE)/build.done
# The longest the molecule lane waits for BUILT (after it, cpu13 builds itself).
BUILT_WAIT := 3600
# Every Ansible run of a lane logs to build/profile/LANE.log with Ansible's profile_tasks callback
# on; scripts/ansible_profile.py then says where the lane's minutes went (docs/testing.md). The
# variable that enables it wins over Molecule's callbacks_enabled, so it names meshctl.mesh.preload
# too (.config/molecule/config.yml; meshctl's own runs add it themselves).
PROFILE := build/profile
# Each lane first waits for the wheel cache `make wheels` fills in the background (at most
# WHEELS_WAIT seconds; after that its beds go to PyPI).
WHEELS_WAIT := 600
suites: images collection-link
	@rm -rf $(PROFILE) && mkdir -p $(PROFILE)
	@TOGETHER_FAILED=$(PROFILE)/failed.txt ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks,meshctl.mesh.preload PROFILE_TASKS_TASK_OUTPUT_LIMIT=12 scripts/together \
	  $(if $(CHECKS_BESIDE),checks 'python scripts/when_idle.py --window 180 --after $(CHECKS_AFTER) --at-most $(CHECKS_AT_MOST) && env -u ANSIBLE_CALLBACKS_ENABLED -u PROFILE_TASKS_TASK_OUTPUT_LIMIT scripts/low-priority $(MAKE) -s checks') \
	  e2e 'set -o pipefail; export ANSIBLE_LOG_PATH=$(CURDIR)/$(PROFILE)/e2e.log; \
	    python -m meshctl.localmesh wheels --wait $(WHEELS_WAIT) && pytest -q -m e2e --durations=0 \
	    $(addprefix --ignore=,$(LATE_E2E) $(PROVIDERS_E2E) $(POD_E2E)) | tee $(PROFILE)/e2e-pytest.log && pytest -q -m e2e --durations=0 $(LATE_E2E) \
	    | tee $(PROFILE)/late-pytest.log $(if $(E2E_SCENARIOS),&& python scripts/molecule_all.py $(E2E_SCENARIOS))' \
	  molecule 'set -o pipefail; export ANSIBLE_LOG_PATH=$(CURDIR)/$(PROFILE)/molecule.log; \
	    python -m meshctl.localmesh wheels --wait $(WHEELS_WAIT) && python scripts/molecule_all.py \
	    --wait-for $(BUILT) --wait-at-most $(BUILT_WAIT) --before default $(MOLECULE_SCENARIOS)' \
	  build 'set -o pipefail; export ANSIBLE_LOG_PATH=$(CURDIR)/$(PROFILE)/build.log; \
	    python scripts/molecule_all.py $(BUILD_SCENARIOS); rc=$$?; touch $(BUILT); exit $$rc' \
	  providers 'set -o pipefail; export ANSIBLE_LOG_PATH=$(CURDIR)/$(PROFILE)/providers.log; \
	    python -m meshctl.localmesh wheels --wait $(WHEELS_WAIT) && pytest -q -m e2e --durations=0 $(PROVIDERS_E2E) \
	    | tee $(PROFILE)/providers-pytest.log $(if $(PROVIDERS_SCENARIOS),&& python scripts/molecule_all.py $(PROVIDERS_SCENARIOS))' \
	  pods 'set -o pipefail; export ANSIBLE_LOG_PATH=$(CURDIR)/$(PROFILE)/pods.log; \
	    python -m meshctl.localmesh wheels --wait $(WHEELS_WAIT) && pytest -q -m e2e --durations=0 $(POD_E2E) \
	    | tee $(PROFILE)/pods-pytest.log'; \
	  rc=$$?; python scripts/ansible_profile.py $(PROFILE)/e2e.log $(PROFILE)/molecule.log $(PROFILE)/providers.log \
	    $(PROFILE)/pods.log $(PROFILE)/build.log; \
	  python scripts/test_seconds.py $(PROFILE)/e2e-pytest.log $(PROFILE)/late-pytest.log $(PROFILE)/providers-pytest.log \
	    $(PROFILE)/pods-pytest.log; \
	  python -m meshctl.localmesh cache; cat build/wheels.log 2>/dev/null; \
	  cat $(PROFILE)/failed.txt 2>/dev/null; exit $$rc

venv: $(VENV)/.installed
# Without bytecode (PIP_COMPILE=0): the virtualenv is ours, so Python writes the bytecode of what a
# program imports when it first runs (PYTHONDONTWRITEBYTECODE unexported above); pip compiling every
# module up front took 43 s of the 61 (18 s without, measured 2026-11-27 on this 2-core machine).
$(VENV)/.installed: pyproject.toml
	@$(T) venv bash -c '$(PYTHON) -m venv $(VENV) && $(VENV)/bin/pip install -q --upgrade pip && PIP_COMPILE=0 $(VENV)/bin/pip install -q -e ".[test]"'
	@touch $@

engine: venv
	@$(T) engine python -m meshctl.localmesh engine

# The nodes' Debian packages through apt-cacher-ng on this machine (meshctl/localmesh/cache.py).
cache: venv
	@$(T) cache python -m meshctl.localmesh cache

images: engine
	@$(T) images python -m meshctl.localmesh images $(addprefix --suite ,$(SUITES))

# The test beds' ready image (meshctl/localmesh/ready.py): the node image with what the roles
# install, built once per hash of the roles' package lists and requirements (docs/testing.md, "Which
# bed tests which path"). It fills the wheel cache first: its virtualenvs install from there.
ready: images
	@$(T) ready python -m meshctl.localmesh ready

# The Python packages the roles install (MLflow, the job environment, meshctl on a head), downloaded
# once per machine and served to the nodes on port 3144 (meshctl/localmesh/wheels.py). Filled in the
# background; the lanes of `suites` wait for it, a bed made before it is ready goes to PyPI.
wheels: images
	@$(T) wheels python -m meshctl.localmesh wheels --background build/wheels.log

# The roles, module and filters are the collection meshctl.mesh (galaxy.yml); a checkout finds it
# through .collections/ (ansible.cfg's collections_path), a link to this folder.
collection-link:
	@mkdir -p .collections/ansible_collections/meshctl && ln -sfn ../../.. .collections/ansible_collections/meshctl/mesh

collection: venv collection-link
	@$(T) collection ansible-galaxy collection build --force --output-path build/collection

lint: style sanity

style: venv collection-link
	@$(T) ruff bash -c 'ruff check meshctl tests plugins bench examples scripts && ruff format --check meshctl tests plugins bench examples scripts'
	@$(T) yamllint yamllint -s .
	@# Its own HOME: Molecule installs a copy of this collection into ~/.ansible/collections, which
	@# ansible-lint would read before the checkout's (a role added since that copy: "not found").
	@mkdir -p build/lint-home && $(T) ansible-lint env HOME=$(CURDIR)/build/lint-home ansible-lint --offline -q

# The collection's own gate (ansible-test sanity; tests/sanity/ignore-2.19.txt says what is deliberate).
sanity: venv
	@$(T) sanity scripts/sanity

# The unit tests in two processes, split by folder (alone: tests/unit/meshctl about 144 s, the rest
# about 107 s, 2026-12-03): in `make test` the checks end last, and their last minutes were the unit
# tests alone on one core of two (123 and 131 s after the last lane in the runs of 2026-12-03).
UNIT_APART := tests/unit/meshctl
unit: venv
	@scripts/together unit-a 'pytest -q -m "not e2e" $(UNIT_APART)' \
	  unit-b 'pytest -q -m "not e2e" --ignore=$(UNIT_APART)'

# lint and unit at once (each mostly one process, sanity mostly making its virtualenvs the first
# time: a core would idle), said as lanes.
checks: venv collection-link
	@scripts/together style '$(MAKE) -s style' sanity '$(MAKE) -s sanity' unit '$(MAKE) -s unit'

e2e: images collection-link
	@$(T) e2e pytest -q -m e2e

molecule: images collection-link
	@$(T) molecule python scripts/molecule_all.py

demo-down: venv
	python -m meshctl.localmesh down
	rm -rf .demo

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache .collections
