#!/usr/bin/env python3
"""Wait until this machine's CPUs have been idle enough for a while, then exit 0.

    python scripts/when_idle.py [--idle 0.15] [--window 180] [--after 600] [--at-most 1800]

`make test` starts its checks (lint, sanity, unit tests) with this beside its two lanes: their first
converges keep both cores busy for their first 15 minutes or so (measured: 0 % idle but for
a minute here and there), and only later do the lanes leave the cores idle while they wait on
daemons and timers (10-45 %): a minute's idle is not enough, three minutes' is.
So the checks start once AFTER seconds have passed and the share of idle CPU time over the last
WINDOW seconds (from /proc/stat, every CPU together) reaches IDLE; at AT_MOST seconds they start
whatever the machine does. No timing is asserted anywhere: the figures are in docs/testing.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque

STEP = 5  # seconds between two readings of /proc/stat


def cpu_times(stat: str) -> tuple[int, int]:
    """(idle, total) jiffies of all CPUs from the text of /proc/stat (idle counts iowait)."""
    for line in stat.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(value) for value in fields[1:]]
            return values[3] + (values[4] if len(values) > 4 else 0), sum(values)
    raise ValueError("/proc/stat has no line for all CPUs")


def idle_share(older: tuple[int, int], newer: tuple[int, int]) -> float:
    """The share of CPU time that was idle between two readings (0 when no time passed)."""
    total = newer[1] - older[1]
    return (newer[0] - older[0]) / total if total > 0 else 0.0


def ready(readings, elapsed: float, idle: float, window: float, after: float, at_most: float) -> bool:
    """Whether to start: at AT_MOST seconds, or after AFTER seconds once the READINGS (timestamped
    (seconds, (idle, total)), oldest first) span WINDOW seconds with at least IDLE of them idle."""
    if elapsed >= at_most:
        return True
    if elapsed < after or not readings:
        return False
    (first_at, first), (last_at, last) = readings[0], readings[-1]
    return last_at - first_at >= window and idle_share(first, last) >= idle


def read() -> tuple[int, int]:
    with open("/proc/stat") as handle:
        return cpu_times(handle.read())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=0.15, help="share of idle CPU time to wait for")
    parser.add_argument("--window", type=float, default=180, help="seconds it is measured over")
    parser.add_argument("--after", type=float, default=600, help="seconds to wait at least")
    parser.add_argument("--at-most", type=float, default=1800, help="seconds to wait at most")
    args = parser.parse_args(argv)
    start = time.monotonic()
    readings: deque = deque()
    while True:
        now = time.monotonic()
        readings.append((now, read()))
        while len(readings) > 2 and now - readings[1][0] >= args.window:
            readings.popleft()  # keep just over WINDOW seconds
        elapsed = now - start
        if ready(readings, elapsed, args.idle, args.window, args.after, args.at_most):
            share = idle_share(readings[0][1], readings[-1][1]) if len(readings) > 1 else 0.0
            print(f"when_idle: starting after {elapsed:.0f} s ({share:.0%} idle over the last "
                  f"{readings[-1][0] - readings[0][0]:.0f} s)", flush=True)  # fmt: skip
            return 0
        time.sleep(STEP)


if __name__ == "__main__":
    sys.exit(main())
