#!/usr/bin/env python3
"""Membership benchmark on the local mesh: what one change costs as the mesh grows.

Builds a mesh of Docker nodes (systemd, Debian 12) with the real CLI over SSH, the way a user
does: `meshctl init` with a head, then `meshctl add-node` one node at a time. It prints one table
(and `--json`): the seconds of every add-node by mesh size, how many slurmd/slurmctld on the other
nodes restarted during it (MainPID changed), a no-op `meshctl apply` at 2 and 8 nodes, and an
add-node while another node is stopped (plus `apply` in that state, which exits 7, partial), and
`meshctl status` at the same sizes and with the stopped node.

    python bench/membership.py [--sizes 2,8] [--json] [--keep]

Needs the Docker engine and the meshctl-node:bookworm image (`make engine images`). Its nodes are
bench-head, bench-n1, ... on network meshctl-bench (100.100.50.0/24); they are removed at the
end unless --keep. No timing is asserted anywhere: these are figures to read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from meshctl.localmesh import nodes  # noqa: E402

SUBNET = "100.100.50.0/24"
NETWORK = "meshctl-bench"


def sh(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check, **kw)


class Bench:
    def __init__(self, root: Path, count: int) -> None:
        self.root = root
        self.mesh = root / "mesh"
        self.key = root / "id_ed25519"
        names = ("bench-head", *(f"bench-n{i}" for i in range(1, count)))
        self.spec = nodes.LocalMesh(NETWORK, SUBNET, names)
        self.planned = nodes.plan_nodes(names, SUBNET)

    def meshctl(self, *args: str) -> tuple[float, subprocess.CompletedProcess]:
        env = {**os.environ, "MESHCTL_MESH": str(self.mesh)}
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "meshctl", *args], capture_output=True, text=True, env=env,
                              check=False)  # fmt: skip
        return time.monotonic() - start, done

    def pids(self, members: list[nodes.Node]) -> dict[str, str]:
        out = {}
        for node in members:
            units = ["slurmctld", "slurmd"] if node.name == "bench-head" else ["slurmd"]
            got = sh("docker", "exec", node.name, "systemctl", "show", "--property=MainPID", "--value", *units)
            for unit, value in zip(units, got.stdout.split(), strict=False):
                out[f"{node.name}/{unit}"] = value
        return out

    def up(self) -> None:
        nodes.down(say=lambda _m: None, spec=self.spec)
        nodes.up("bookworm", say=lambda _m: None, spec=self.spec)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        for node in self.planned:
            nodes.authorize(node.name, self.key.with_suffix(".pub").read_text())

    def init(self) -> None:
        head = self.planned[0]
        _, done = self.meshctl("init", str(self.mesh), "--head", f"root@{head.address}", "--name", head.name,
                               "--ssh-key", str(self.key), "--provider", "local")  # fmt: skip
        if done.returncode:
            raise SystemExit(f"init failed: {done.stderr}")
        # pip behind this machine's proxy; no PyTorch in the job environment (its install would
        # dominate every figure: this measures membership).
        with (self.mesh / "group_vars" / "all.yml").open("a") as handle:
            handle.write(
                "mlflow_pip_environment:\n  PIP_CERT: /etc/ssl/certs/ca-certificates.crt\nmlflow_workers: 1\n"
                "job_env_pip_environment:\n  PIP_CERT: /etc/ssl/certs/ca-certificates.crt\njob_env_torch: ''\n"
            )

    def add(self, node: nodes.Node, members: list[nodes.Node]) -> dict:
        before = self.pids(members)
        seconds, done = self.meshctl("add-node", f"root@{node.address}", "--name", node.name,
                                     "--ssh-key", str(self.key), "--provider", "local")  # fmt: skip
        after = self.pids(members)
        restarted = sorted(k for k in before if k in after and before[k] != after[k])
        if done.returncode:
            sys.stderr.write(done.stdout[-3000:] + done.stderr)
        return {"seconds": round(seconds, 1), "rc": done.returncode, "restarted": restarted,
                "profile": profile_of(self.mesh)}  # fmt: skip


def profile_of(mesh: Path) -> list[str]:
    """The profile that ends the newest run log of MESH (meshctl/timing.py): where its seconds went."""
    logs = sorted((mesh / "logs").glob("*.log"), key=lambda path: path.stat().st_mtime)
    if not logs:
        return []
    lines = logs[-1].read_text(errors="replace").splitlines()
    start = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("# profile:")), None)
    return [] if start is None else [line.removeprefix("# ") for line in lines[start:] if line.startswith("# ")]


def wait_state(name: str, wanted, limit: float) -> tuple[float, bool]:
    """Seconds until sinfo on the head shows NAME in a state `wanted` accepts, and whether it did."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        state = sh("docker", "exec", "bench-head", "sinfo", "--noheader", f"--nodes={name}", "--format=%T",
                   check=False).stdout.strip().split("\n")[0]  # fmt: skip
        if wanted(state):
            return round(time.monotonic() - start, 1), True
        time.sleep(2)
    return round(time.monotonic() - start, 1), False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,8", help="mesh sizes at which to time a no-op apply")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--keep", action="store_true", help="leave the nodes running")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    biggest = max(sizes)
    root = Path(tempfile.mkdtemp(prefix="meshctl-bench-"))
    bench = Bench(root, biggest + 2)  # one more to add into the biggest mesh, one to stop
    rows: list[dict] = []
    try:
        bench.up()
        bench.init()
        members = [bench.planned[0]]
        # The first add-node also sets up the head (init only records it).
        for node in bench.planned[1 : biggest + 1]:
            size = len(members)
            result = bench.add(node, members)
            rows.append({"what": f"add-node into a mesh of {size}", **result})
            members.append(node)
            if len(members) in sizes:
                # status twice: first with SSH connections of its own to open, then reusing them
                # (each is kept a minute), as a user who runs it again sees it.
                for command, what in (("apply", "no-op apply"), ("status", "status"), ("status", "status again")):
                    seconds, done = bench.meshctl(command)
                    rows.append({"what": f"{what}, {len(members)} nodes", "seconds": round(seconds, 2),
                                 "rc": done.returncode, "restarted": []})  # fmt: skip
        stopped = members[1]
        sh("docker", "stop", stopped.name)
        up = [m for m in members if m is not stopped]
        result = bench.add(bench.planned[biggest + 1], up)
        rows.append({"what": f"add-node into {len(members)} with {stopped.name} stopped", **result})
        members.append(bench.planned[biggest + 1])
        seconds, done = bench.meshctl("apply")
        rows.append({"what": f"apply, {len(members)} nodes, {stopped.name} stopped", "seconds": round(seconds, 1),
                     "rc": done.returncode, "restarted": []})  # fmt: skip
        # status says the stopped node is down (exit 1) after its SSH timeout, with the head's Slurm view.
        for what in ("status", "status again"):
            seconds, done = bench.meshctl("status")
            rows.append({"what": f"{what}, {len(members)} nodes, {stopped.name} stopped", "expect": (1, 7),
                         "seconds": round(seconds, 2), "rc": done.returncode, "restarted": []})  # fmt: skip
        # Slurm marks a node that stopped answering its pings as not responding ("*"); wait for
        # that, so the figure below is a return Slurm noticed, not a node it never missed.
        missed = wait_state(stopped.name, lambda state: state.endswith("*") or state.startswith("down"), 420)
        sh("docker", "start", stopped.name)
        back = wait_state(stopped.name, lambda state: state == "idle", 300)
        rows.append({"what": f"{stopped.name} started again: idle without meshctl", "seconds": back[0],
                     "rc": 0 if missed[1] and back[1] else 1, "restarted": []})  # fmt: skip
    finally:
        if not args.keep:
            nodes.down(say=lambda _m: None, spec=bench.spec)
    if args.json:
        print(json.dumps({"rows": rows}, indent=1))
    else:
        width = max(len(r["what"]) for r in rows)
        print(f"{'operation':<{width}}  seconds  exit  daemons restarted on other nodes")
        for r in rows:
            restarted = f"{len(r['restarted'])} {' '.join(r['restarted'])}".strip()
            print(f"{r['what']:<{width}}  {r['seconds']:>7}  {r['rc']:>4}  {restarted}")
        for r in rows:  # where each add-node's seconds went, as its run log says
            if r.get("profile"):
                print(f"\n{r['what']}:")
                print("\n".join(f"  {line}" for line in r["profile"]))
    return 0 if all(r["rc"] in r.get("expect", (0, 7)) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
