#!/usr/bin/env python3
"""Run every Molecule scenario's test sequence, as `molecule test --all` does, each step timed.

Usage: scripts/molecule_all.py [SCENARIO ...]   (every folder of molecule/ with a molecule.yml)

Every step that runs a playbook runs under Mitogen's strategy, as meshctl's own runs do
(meshctl/runner.py): one Python per node for the whole run instead of a `docker exec` and a fresh
interpreter per task (measured on the default scenario: converge 231 -> 186 s, idempotence
94 -> 57 s; the tailscale scenario's prepare 44 -> 20 s). `molecule create` runs
the scenario's prepare too. create and destroy are this project's playbooks (molecule/resources/):
the docker driver's own wait on async jobs, which Mitogen's strategy does not keep where they look.
Before each scenario, MESHCTL_TESTBED_PIP says the pip environment its group_vars give the roles:
the test images' CA bundle and, once `make wheels` has filled it, the test bed's wheel cache
(meshctl/localmesh/wheels.py). Each step prints
`==> [molecule SCENARIO STEP] Ns`; a failed step stops the run (after `destroy`, as `molecule test` does), exit 1.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MITOGEN_STEPS = ("create", "prepare", "converge", "idempotence", "verify", "cleanup", "destroy")
DEFAULT_SEQUENCE = ["destroy", "syntax", "create", "prepare", "converge", "idempotence", "verify", "cleanup", "destroy"]


def scenarios() -> list[str]:
    return sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))


def sequence(scenario: str) -> list[str]:
    config = yaml.safe_load((REPO / "molecule" / scenario / "molecule.yml").read_text()) or {}
    return list((config.get("scenario") or {}).get("test_sequence") or DEFAULT_SEQUENCE)


def mitogen_strategies() -> str | None:
    try:
        import ansible_mitogen
    except ImportError:
        return None
    return str(Path(ansible_mitogen.__file__).parent / "plugins" / "strategy")


def step_env(step: str, strategies: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if step in MITOGEN_STEPS and strategies:
        env.update(ANSIBLE_STRATEGY_PLUGINS=strategies, ANSIBLE_STRATEGY="mitogen_linear")
    return env


def children_cpu() -> float:
    """CPU seconds of the processes this one started and waited for (molecule, Ansible, its workers)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(step: str, scenario: str, strategies: str | None) -> int:
    started, cpu = time.monotonic(), children_cpu()
    print(f"==> [molecule {scenario} {step}]", flush=True)
    done = subprocess.run(["molecule", step, "-s", scenario], env=step_env(step, strategies), check=False)
    print(f"==> [molecule {scenario} {step}] {time.monotonic() - started:.0f}s (exit {done.returncode}), "
          f"{children_cpu() - cpu:.0f} CPU-s on this machine", flush=True)  # fmt: skip
    return done.returncode


def testbed_pip() -> str:
    """The pip environment of the scenarios' group_vars (JSON): see meshctl/localmesh/wheels.py."""
    try:
        from meshctl.localmesh import wheels
    except ImportError:  # run without meshctl installed: the CA bundle alone
        return json.dumps({"PIP_CERT": "/etc/ssl/certs/ca-certificates.crt", "PIP_COMPILE": "0"})
    return json.dumps(wheels.bed_pip_environment())


def main(argv: list[str]) -> int:
    chosen = argv or scenarios()
    strategies = mitogen_strategies()
    for scenario in chosen:
        started = time.monotonic()
        os.environ["MESHCTL_TESTBED_PIP"] = testbed_pip()  # ready now or not: asked per scenario
        print(f"==> [molecule {scenario}] pip: {os.environ['MESHCTL_TESTBED_PIP']}", flush=True)
        for step in sequence(scenario):
            if run(step, scenario, strategies) != 0:
                if step != "destroy":
                    run("destroy", scenario, strategies)
                print(f"==> molecule: scenario {scenario} failed at {step}", flush=True)
                return 1
        print(f"==> [molecule {scenario}] {time.monotonic() - started:.0f}s in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
