#!/usr/bin/env python3
"""Run every Molecule scenario's test sequence, as `molecule test --all` does, each step timed.

Usage: scripts/molecule_all.py [--wait-for FILE --before SCENARIO [--wait-at-most SECONDS]] [SCENARIO ...]
(every folder of molecule/ with a molecule.yml when none is named)

``--wait-for FILE --before SCENARIO``: SCENARIO starts once FILE exists (another lane's word that it
ended: the Makefile's build lane, whose Slurm build the default scenario's cpu13 then finds), or after
SECONDS (default 3600) without it, said.

Every step that runs a playbook runs under Mitogen's strategy, as meshctl's own runs do
(meshctl/runner.py): one Python per node for the whole run instead of a `docker exec` and a fresh
interpreter per task (measured on the default scenario: converge 231 -> 186 s, idempotence
94 -> 57 s; the tailscale scenario's prepare 44 -> 20 s). `molecule create` runs
the scenario's prepare too. create and destroy are this project's playbooks (molecule/resources/):
the docker driver's own wait on async jobs, which Mitogen's strategy does not keep where they look.
Before each scenario, MESHCTL_TESTBED_PIP says the pip environment its group_vars give the roles:
the test images' CA bundle and, once `make wheels` has filled it, the test bed's wheel cache
(meshctl/localmesh/wheels.py). A scenario's first destroy is skipped where it would find nothing
(no container, network or named volume of its platforms, no bed files, no Molecule state saying
created: ``leftovers``). Each step prints
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


def leftovers(scenario: str, docker: str = "docker", cache: Path | None = None) -> list[str]:
    """What a run of SCENARIO may have left on this machine that its destroy removes: its platforms'
    containers, the networks and named volumes they declare, their bed files
    (meshctl.localmesh vm-files), Molecule's record of the scenario as created. None of them: the
    sequence's first destroy has nothing to do (a clean machine, or the last run destroyed it), and
    is skipped (about 8 CPU-s and 25 s a scenario)."""
    config = yaml.safe_load((REPO / "molecule" / scenario / "molecule.yml").read_text()) or {}
    platforms = config.get("platforms") or []
    names = [p["name"] for p in platforms]
    networks = sorted({n["name"] for p in platforms for key in ("networks", "docker_networks")
                       for n in p.get(key) or [] if n.get("name")})  # fmt: skip
    volumes = sorted({v.split(":", 1)[0] for p in platforms for v in p.get("volumes") or []
                      if ":" in v and not v.startswith("/")})  # fmt: skip
    found = []
    for kind, items in (("container", names), ("network", networks), ("volume", volumes)):
        for item in items:
            asked = subprocess.run([docker, kind, "inspect", item], capture_output=True, check=False)
            if asked.returncode == 0:
                found.append(f"{kind} {item}")
    try:
        from meshctl.localmesh import nodes

        found += [f"bed files {name}" for name in names if (nodes.VM_FILES / name).exists()]
    except ImportError:  # run without meshctl installed: the destroy decides
        found.append("bed files (meshctl not importable)")
    cache = cache if cache is not None else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    for state in sorted((cache / "molecule").glob(f"*/{scenario}/state.yml")):
        if (yaml.safe_load(state.read_text()) or {}).get("created"):
            found.append(f"Molecule state {state}")
    return found


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


def wait_for(path: Path, at_most: float, scenario: str, clock=time.monotonic, sleep=time.sleep) -> bool:
    """Until PATH exists (True) or AT_MOST seconds passed (False), each said."""
    started = clock()
    print(f"==> [molecule {scenario}] waits for {path}", flush=True)
    while not path.exists():
        if clock() - started >= at_most:
            print(f"==> [molecule {scenario}] {path} not there after {at_most:.0f} s: starting without it", flush=True)
            return False
        sleep(5)
    print(f"==> [molecule {scenario}] {path} there after {clock() - started:.0f} s", flush=True)
    return True


def parse(argv: list[str]) -> tuple[list[str], Path | None, str | None, float]:
    import argparse

    parser = argparse.ArgumentParser(prog="molecule_all.py")
    parser.add_argument("--wait-for", type=Path)
    parser.add_argument("--before")
    parser.add_argument("--wait-at-most", type=float, default=3600)
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args(argv)
    if (args.wait_for is None) != (args.before is None):
        parser.error("--wait-for and --before go together")
    return args.scenarios or scenarios(), args.wait_for, args.before, args.wait_at_most


def main(argv: list[str]) -> int:
    chosen, wait_file, before, at_most = parse(argv)
    strategies = mitogen_strategies()
    for scenario in chosen:
        if wait_file is not None and scenario == before:
            wait_for(wait_file, at_most, scenario)
        started = time.monotonic()
        os.environ["MESHCTL_TESTBED_PIP"] = testbed_pip()  # ready now or not: asked per scenario
        print(f"==> [molecule {scenario}] pip: {os.environ['MESHCTL_TESTBED_PIP']}", flush=True)
        steps = sequence(scenario)
        if steps[:1] == ["destroy"]:
            found = leftovers(scenario)
            print(f"==> [molecule {scenario}] left from an earlier run: {', '.join(found) or 'nothing'}", flush=True)
            steps = steps if found else steps[1:]
        for step in steps:
            if run(step, scenario, strategies) != 0:
                if step != "destroy":
                    run("destroy", scenario, strategies)
                print(f"==> molecule: scenario {scenario} failed at {step}", flush=True)
                return 1
        print(f"==> [molecule {scenario}] {time.monotonic() - started:.0f}s in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
