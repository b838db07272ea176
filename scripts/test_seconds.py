#!/usr/bin/env python3
"""Seconds per test file, from pytest's `--durations=0` lines in a log (stdin or files).

Usage: scripts/test_seconds.py [LOG ...]

`make test` runs the end-to-end tests with `--durations=0`: every test's setup, call and
teardown with its seconds. This sums them by file (a module fixture's setup, such as a mesh made
from nothing, counts for its file) and prints one line per file, slowest first, then the total.
Lines may carry a lane prefix (`[e2e 12:34] `, scripts/together).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

DURATION = re.compile(r"(?:^|\] )(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S+?)::")


def by_file(lines) -> dict[str, dict[str, float]]:
    """{file: {"setup": s, "call": s, "teardown": s}} from pytest's durations lines."""
    found: dict[str, dict[str, float]] = defaultdict(lambda: {"setup": 0.0, "call": 0.0, "teardown": 0.0})
    for line in lines:
        match = DURATION.search(line)
        if match:
            seconds, when, path = match.groups()
            found[path][when] += float(seconds)
    return dict(found)


def table(found: dict[str, dict[str, float]]) -> str:
    rows = sorted(found.items(), key=lambda item: -sum(item[1].values()))
    out = [f"{'seconds':>8} {'setup':>7} {'calls':>7}  file"]
    for path, parts in rows:
        out.append(f"{sum(parts.values()):8.0f} {parts['setup']:7.0f} {parts['call']:7.0f}  {path}")
    out.append(f"{sum(sum(p.values()) for p in found.values()):8.0f} in all")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    lines: list[str] = []
    for path in argv:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines += handle.readlines()
        except FileNotFoundError:
            print(f"{path}: no such log (that pytest run did not happen)")
    if not argv:
        lines = sys.stdin.readlines()
    found = by_file(lines)
    print(table(found) if found else "no pytest durations in the log")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
