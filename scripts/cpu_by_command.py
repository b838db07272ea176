#!/usr/bin/env python3
"""Where a run's CPU went, by program: read a BSD process accounting file (acct v3, Linux).

Usage (as root; `apt-get install acct` gives accton):
    touch /tmp/pacct && accton /tmp/pacct; make test; accton off
    scripts/cpu_by_command.py /tmp/pacct [--top 40] [--under ansible-playboo]

Every process that ended while accounting was on is one record: its program's name (the kernel's
16-character `comm`), its parent, its CPU. Each is counted under its own name, and under the
nearest ancestor that is one of a few telling programs (--roots: a node's systemd in a container,
ansible-playbook, meshctl, pytest, molecule, ...), so that "python3" says whose python3 it was.
Processes still running when accounting stopped have no record; their children do.
"""

from __future__ import annotations

import argparse
import collections
import struct
import sys

RECORD = struct.Struct("<BBHIIIIIIf8H16s")  # acct_v3: flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime,
# (in AHZ ticks), utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t each), comm
AHZ = 100
ROOTS = ("ansible-playboo", "meshctl", "pytest", "molecule", "ansible-lint", "ruff", "yamllint", "ansible-test",
         "slurmd", "slurmctld", "slurmstepd", "mlflow", "meshctl-power", "meshctl-relaun", "dpkg-buildpacka",
         "apt-get", "pip", "sbatch", "srun", "dockerd", "containerd-shim", "docker")  # fmt: skip


def comp(value: int) -> float:
    """comp_t (13-bit mantissa, 3-bit base-8 exponent) in seconds."""
    return ((value & 0x1FFF) << (3 * (value >> 13))) / AHZ


def records(path: str):
    with open(path, "rb") as handle:
        data = handle.read()
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        if fields[1] != 3:
            continue
        _flag, _version, _tty, _exit, uid, _gid, pid, ppid, btime, etime, utime, stime, *_rest, comm = fields
        yield {"pid": pid, "ppid": ppid, "uid": uid, "btime": btime, "etime": etime / AHZ,
               "cpu": comp(utime) + comp(stime), "comm": comm.rstrip(b"\0").decode(errors="replace")}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pacct")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--under", help="only processes with an ancestor of this name")
    args = parser.parse_args()
    rows = list(records(args.pacct))
    # pids are reused over a long run: a parent is the latest process of that pid alive when the child began
    by_pid: dict[int, list[dict]] = collections.defaultdict(list)
    for row in sorted(rows, key=lambda r: r["btime"]):
        by_pid[row["pid"]].append(row)

    def parent(row):
        for candidate in reversed(by_pid.get(row["ppid"], [])):
            # began before the child and ended after it began (btime: whole seconds)
            if candidate["btime"] <= row["btime"] <= candidate["btime"] + candidate["etime"] + 1:
                return candidate
        return None

    def ancestors(row):
        seen = 0
        node = parent(row)
        while node is not None and seen < 64:
            yield node
            node, seen = parent(node), seen + 1

    total = sum(r["cpu"] for r in rows)
    own: collections.Counter = collections.Counter()
    under: collections.Counter = collections.Counter()
    pairs: collections.Counter = collections.Counter()
    counted = 0.0
    for row in rows:
        chain = [a["comm"] for a in ancestors(row)]
        if args.under and args.under not in chain:
            continue
        counted += row["cpu"]
        own[row["comm"]] += row["cpu"]
        root = next((c for c in chain if c in ROOTS), "(no telling ancestor)")
        under[root] += row["cpu"]
        pairs[(root, row["comm"])] += row["cpu"]
    scope = f"; {counted:.0f} under {args.under}" if args.under else ""
    print(f"{len(rows)} processes, {total:.0f} CPU-s in all{scope}")
    for title, counter in (("by program", own), ("by nearest telling ancestor", under), ("by both", pairs)):
        print(f"\n{title}:")
        for key, cpu in counter.most_common(args.top):
            name = " <- ".join(reversed(key)) if isinstance(key, tuple) else key
            print(f"  {cpu:8.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
