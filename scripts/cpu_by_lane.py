#!/usr/bin/env python3
"""Where a `make test` run's CPU goes: each lane's processes on this machine, and each container.

    python scripts/cpu_by_lane.py OUT.json [--stop-file F]    (beside `.ci/run` or `make test`)
    python scripts/cpu_by_lane.py --show OUT.json

The suite's lanes (scripts/together) keep both cores busy, so what shortens a run is less CPU
work, not more overlap: this says whose. Every second it puts each lane's shell (the
`bash -c` whose command names build/profile/LANE.log, or when_idle.py for the checks) and all its
descendants into a cgroup of its own (cgroup v1 `cpuacct`, so it needs root and that hierarchy;
a process started afterwards inherits it), and reads each Docker container's `cpuacct.usage`
(the last value seen: a container removed keeps what it had used). Every 30 s, and when the stop
file appears, it writes OUT.json: the machine's busy CPU-seconds since it started, each lane's
(the Ansible controllers, pytest, meshctl, ssh) and each container's by name (containers of the
same name in two scenarios add up), and the engine's daemons' (dockerd, containerd). What is in
none of these is the kernel's threads and whatever else ran. docs/testing.md ("Where the time
goes") names it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
LANES = {"e2e": "profile/e2e.log", "molecule": "profile/molecule.log", "providers": "profile/providers.log",
         "pods": "profile/pods.log", "build": "profile/build.log", "checks": "when_idle.py"}  # fmt: skip
ENGINE = ("dockerd", "containerd")  # the engine's daemons: their CPU, apart from the containers'


def engine_seconds() -> float:
    """CPU-seconds the engine's daemons (ENGINE) have used since they started."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if stat[stat.index("(") + 1 : stat.rindex(")")] in ENGINE:
            fields = stat.rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def busy_ticks() -> int:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # all but idle and iowait


def processes() -> dict[int, tuple[int, str]]:
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        found[int(entry)] = (ppid, command)
    return found


def container_name(cid: str, names: dict[str, str]) -> str:
    if cid not in names:
        try:
            config = json.loads(Path(f"/var/lib/docker/containers/{cid}/config.v2.json").read_text())
            names[cid] = config["Name"].strip("/")
        except (OSError, ValueError, KeyError):
            return cid[:12]
    return names[cid]


def sample(out: Path, stop: Path) -> None:
    for lane in LANES:
        (CPUACCT / f"lane_{lane}").mkdir(exist_ok=True)
    lane_usage = {lane: CPUACCT / f"lane_{lane}" / "cpuacct.usage" for lane in LANES}
    at_start = {lane: int(path.read_text()) for lane, path in lane_usage.items()}  # a cgroup kept from before
    start_ticks, start, engine_start = busy_ticks(), time.monotonic(), engine_seconds()
    moved: dict[str, set[int]] = {lane: set() for lane in LANES}
    usage: dict[str, int] = {}
    names: dict[str, str] = {}
    written = 0.0
    while True:
        stopping = stop.exists()
        found = processes()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _command) in found.items():
            children.setdefault(ppid, []).append(pid)
        for lane, mark in LANES.items():
            todo = [pid for pid, (_p, command) in found.items() if command.startswith("bash -c") and mark in command]
            while todo:
                pid = todo.pop()
                todo.extend(children.get(pid, []))
                if pid in moved[lane]:
                    continue
                with contextlib.suppress(OSError):  # gone already
                    (CPUACCT / f"lane_{lane}" / "cgroup.procs").write_text(str(pid))
                moved[lane].add(pid)
        docker = CPUACCT / "docker"
        for group in docker.iterdir() if docker.is_dir() else ():
            if group.is_dir() and len(group.name) == 64:
                try:
                    usage[group.name] = max(usage.get(group.name, 0), int((group / "cpuacct.usage").read_text()))
                except (OSError, ValueError):
                    continue
                container_name(group.name, names)
        if stopping or time.monotonic() - written > 30:
            containers: dict[str, float] = {}
            for cid, nanoseconds in usage.items():
                name = names.get(cid, cid[:12])
                containers[name] = containers.get(name, 0.0) + nanoseconds / 1e9
            lanes = {lane: (int(path.read_text()) - at_start[lane]) / 1e9 for lane, path in lane_usage.items()}
            report = {"seconds": round(time.monotonic() - start),
                      "machine_busy_cpu_s": (busy_ticks() - start_ticks) / os.sysconf("SC_CLK_TCK"),
                      "lanes": lanes, "engine": engine_seconds() - engine_start,
                      "containers": containers}  # fmt: skip
            out.write_text(json.dumps(report, indent=1))
            written = time.monotonic()
        if stopping:
            return
        time.sleep(1)


def show(path: Path) -> None:
    report = json.loads(path.read_text())
    busy, lanes, containers = report["machine_busy_cpu_s"], report["lanes"], report["containers"]
    print(f"{report['seconds']} s, the machine busy {busy:.0f} CPU-s")
    for lane, seconds in sorted(lanes.items(), key=lambda item: -item[1]):
        print(f"{seconds:8.0f}  lane {lane} (this machine's processes)")
    for name, seconds in sorted(containers.items(), key=lambda item: -item[1]):
        print(f"{seconds:8.0f}  container {name}")
    engine = report.get("engine", 0.0)
    print(f"{engine:8.0f}  the engine's daemons ({', '.join(ENGINE)})")
    rest = busy - sum(lanes.values()) - sum(containers.values()) - engine
    print(f"{rest:8.0f}  none of these (the kernel, the rest)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--stop-file", type=Path, default=Path("/tmp/cpu_by_lane.stop"))
    parser.add_argument("--show", action="store_true", help="print OUT.json's figures")
    args = parser.parse_args()
    if args.show:
        show(args.out)
    else:
        args.stop_file.unlink(missing_ok=True)
        sample(args.out, args.stop_file)


if __name__ == "__main__":
    main()
