#!/usr/bin/env python3
"""Where the suite's Ansible minutes go: read Ansible's log (ANSIBLE_LOG_PATH) of many runs.

Usage: scripts/ansible_profile.py LOG [LOG ...] [--top N]

`make test` points every Ansible run of a lane (Molecule's and the ones meshctl starts in the
end-to-end tests) at one log per lane, with Ansible's own `ansible.posix.profile_tasks` callback on
(its per-task lines are in the same log). Each log line carries a time and the process (`p=PID`)
that wrote it, so a task's time is the time to the next task line of the same run. Runs that
used a `free` strategy (meshctl's default) report a task when its first host starts it: the
figures are a task's wall time in that run, not a host's.

Prints the runs, then the time by kind (package installs and downloads, waits on daemons, the
roles' other tasks, the tests' own steps), by role and the slowest tasks summed over all runs.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) p=(\d+) .*?\| (.*)\Z")
ENTRY = re.compile(r"^(PLAY|TASK|RUNNING HANDLER) \[(.*)\] \**\s*\Z")
RECAP = re.compile(r"^PLAY RECAP ")
INSTALL = re.compile(r"\b(install|download|fetch|pip|apt|build)", re.I)
WAIT = re.compile(r"\b(wait|until|poll|sleep|settle|answer|come back|idle)", re.I)


@dataclass(frozen=True)
class Step:
    run: str  # the ansible-playbook process
    kind: str  # PLAY, TASK, RUNNING HANDLER
    name: str
    seconds: float

    @property
    def role(self) -> str:
        """The role a task belongs to ('' for a playbook's own task), without the collection."""
        if " : " not in self.name:
            return ""
        return self.name.split(" : ", 1)[0].rsplit(".", 1)[-1]

    @property
    def category(self) -> str:
        task = self.name.split(" : ", 1)[-1]
        if INSTALL.search(task):
            return "install and download"
        if WAIT.search(task):
            return "wait on daemons and timers"
        return "roles' other tasks" if self.role else "the tests' own steps (prepare, verify)"


def steps(lines) -> list[Step]:
    """Each task and handler of each run with its seconds (to the next entry of the same run)."""
    last: dict[str, tuple[datetime, str, str]] = {}
    found: list[Step] = []
    for line in lines:
        match = LINE.match(line.rstrip("\n"))
        if not match:
            continue
        stamp, run, text = match.groups()
        entry, recap = ENTRY.match(text), RECAP.match(text)
        if not entry and not recap:
            continue
        when = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
        if run in last:
            then, kind, name = last.pop(run)
            if kind != "PLAY":
                found.append(Step(run, kind, name, (when - then).total_seconds()))
        if entry:
            last[run] = (when, entry.group(1), entry.group(2))
    return found


def totals(found: list[Step], key) -> list[tuple[str, float, int]]:
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for step in found:
        seconds[key(step)] += step.seconds
        count[key(step)] += 1
    return sorted(((k, seconds[k], count[k]) for k in seconds), key=lambda row: -row[1])


def report(found: list[Step], top: int = 15) -> str:
    out = []
    runs = {step.run for step in found}
    whole = sum(step.seconds for step in found)
    out.append(f"{len(runs)} Ansible runs, {len(found)} task runs, {whole:.0f} s of task time in all")
    for title, key, limit in (
        ("by kind", lambda s: s.category, None),
        ("by role", lambda s: s.role or "(playbooks' own tasks)", top),
        ("slowest tasks, summed over the runs", lambda s: s.name, top),
    ):
        out.append(f"\n{title}:")
        for name, seconds, count in totals(found, key)[:limit]:
            share = 100 * seconds / whole if whole else 0
            out.append(f"  {seconds:8.0f} s {share:5.1f} %  {count:5d}x  {name[:100]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    for path in args.logs:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                found = steps(handle)
        except FileNotFoundError:
            print(f"{path}: no such log (no Ansible run wrote it)")
            continue
        print(f"== {path}")
        print(report(found, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
