#!/usr/bin/env python3
"""What this machine charges for the work `make test` does most: new memory and new processes.

The suite is mostly processes that start, fork and end (Ansible's workers, a Python per module run,
`docker exec`s), so what a page of new memory costs decides what the same work costs. On a virtual
machine whose free memory goes back to its host (free page reporting, DAMON), the first touch of a
page the host took back is far dearer than that of a page the guest kept. This prints, in a few
seconds:

- cpu: a pure-Python loop (10**7 squares), in CPU-seconds: the processor's own speed;
- first touch: microseconds per 4 KiB page of memory never touched by this process (a fresh
  anonymous mapping of SIZE MiB, written once per page), wall and system time;
- again: the same at once after (the pages the kernel just freed, still the guest's);
- fork: milliseconds of system time per fork of a process holding SIZE MiB (parent and child).

    python bench/machine_state.py [--size 128] [--json]

`.ci/run` prints it before and after `make test`, so that each CI log says what state the machine
was in (docs/testing.md, "What the same work costs"). No timing is asserted: figures to read.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import resource
import time

PAGE = 4096


def cpu_loop() -> float:
    started = time.process_time()
    sum(i * i for i in range(10**7))
    return time.process_time() - started


def touch(size_mb: int) -> tuple[float, float]:
    """Microseconds per page (wall, system) to write one byte of each page of a new mapping."""
    pages = (size_mb << 20) // PAGE
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    area = mmap.mmap(-1, pages * PAGE)
    for offset in range(0, pages * PAGE, PAGE):
        area[offset] = 1
    wall, after = time.perf_counter() - wall, resource.getrusage(resource.RUSAGE_SELF)
    area.close()
    return wall * 1e6 / pages, (after.ru_stime - before.ru_stime) * 1e6 / pages


def fork_cost(size_mb: int, forks: int = 20) -> float:
    """Milliseconds of system time (parent and child together) per fork of a process holding SIZE_MB."""
    held = bytearray(size_mb << 20)
    for offset in range(0, len(held), PAGE):
        held[offset] = 1
    self_before = resource.getrusage(resource.RUSAGE_SELF).ru_stime
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_stime
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    spent = resource.getrusage(resource.RUSAGE_SELF).ru_stime - self_before
    spent += resource.getrusage(resource.RUSAGE_CHILDREN).ru_stime - children_before
    del held
    return spent * 1000 / forks


def measure(size_mb: int) -> dict:
    first_wall, first_sys = touch(size_mb)
    again_wall, again_sys = touch(size_mb)
    return {
        "cpu_loop_s": round(cpu_loop(), 3),
        "first_touch_us_per_page": round(first_wall, 2),
        "first_touch_sys_us_per_page": round(first_sys, 2),
        "again_us_per_page": round(again_wall, 2),
        "again_sys_us_per_page": round(again_sys, 2),
        "fork_ms": round(fork_cost(size_mb), 2),
        "size_mb": size_mb,
        "load_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=128, help="MiB touched and held (default 128)")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    figures = measure(args.size)
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"machine: cpu loop {figures['cpu_loop_s']} s; new memory {figures['first_touch_us_per_page']} us/page "
              f"({figures['first_touch_sys_us_per_page']} system), again {figures['again_us_per_page']} us/page; "
              f"fork of {args.size} MiB {figures['fork_ms']} ms; load {figures['load_1m']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
