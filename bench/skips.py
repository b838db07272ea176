#!/usr/bin/env python3
"""What a skipped task costs the control machine, decided in a worker or in Ansible's main process.

Ansible forks a worker for every task on every host, skipped or not, and the worker decides the
task's `when`. The callback meshctl.mesh.preload decides it in the main process instead where it can
do so as the worker would (plugins/callback/preload.py, `skip_result`), and forks no worker for a
skip; `MESHCTL_SKIP_IN_WORKERS=1` turns that off. This runs the same playbook both ways, alternating,
and prints the control machine's CPU-seconds (the run and every process it waited for: user +
system) and the wall seconds of each run. Nothing is asserted: these are figures to read.

    python bench/skips.py [--hosts 3] [--skipped 60] [--run 5] [--rounds 2] [--json]
    python bench/skips.py --mesh DIR [--rounds 2]    # `meshctl apply` of the mesh in DIR instead

The first form needs nothing but this checkout's virtualenv (the hosts are this machine, connection
local); the second a converged mesh (`make demo`: its mesh is build/demo/mesh), whose apply changes
nothing, so both ways do the same work.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from meshctl import resources  # noqa: E402

WAYS = {"in workers": {"MESHCTL_SKIP_IN_WORKERS": "1"}, "in the main process": {}}


def playbook(folder: Path, hosts: int, skipped: int, ran: int) -> list[str]:
    """A playbook of SKIPPED tasks whose condition is false and RAN that run, on HOSTS local hosts;
    the command that runs it."""
    tasks = [{"name": f"skipped {i}", "ansible.builtin.command": "true", "when": "flag | bool"} for i in range(skipped)]
    tasks += [{"name": f"ran {i}", "ansible.builtin.set_fact": {f"fact_{i}": i}} for i in range(ran)]
    book = [{"hosts": "all", "gather_facts": False, "vars": {"flag": False}, "tasks": tasks}]
    (folder / "play.yml").write_text(yaml.safe_dump(book, sort_keys=False))
    names = ",".join(f"host{i}" for i in range(hosts)) + ","
    return [str(Path(sys.executable).parent / "ansible-playbook"), "-i", names, "-c", "local", "play.yml"]


def measure(command: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    """CPU-seconds of COMMAND and its children (user + system), and its wall seconds."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return {"cpu": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "wall": round(wall, 1)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--skipped", type=int, default=60)
    parser.add_argument("--run", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mesh", type=Path, help="a converged mesh's folder: measure its `meshctl apply` instead")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in WAYS["in workers"]}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        if args.mesh:
            command, cwd = [sys.executable, "-m", "meshctl", "apply"], args.mesh
            env["MESHCTL_MESH"] = str(args.mesh.resolve())
            what = f"meshctl apply of {args.mesh}"
        else:
            command, cwd = playbook(folder, args.hosts, args.skipped, args.run), folder
            env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(folder / "collections")),
                       ANSIBLE_CALLBACKS_ENABLED="meshctl.mesh.preload", ANSIBLE_PYTHON_INTERPRETER=sys.executable,
                       ANSIBLE_LOCAL_TEMP=str(folder / "tmp"))  # fmt: skip
            what = f"{args.skipped} skipped and {args.run} run tasks on {args.hosts} hosts"
        runs: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
        for _round in range(args.rounds):
            for way, extra in WAYS.items():
                runs[way].append(measure(command, cwd, {**env, **extra}))
    if args.json:
        print(json.dumps({"what": what, "runs": runs}))
        return 0
    print(f"{what}: the control machine's CPU-seconds (wall seconds), each run")
    for way, measured in runs.items():
        print(f"  skips decided {way:20} " + ", ".join(f"{m['cpu']:.2f} ({m['wall']:.1f})" for m in measured))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
