"""Where a run's seconds went: per play and per role, for each host, from the run's own events.

Ansible's events carry each task's ``duration`` (seconds, on its host) and the ``role`` it belongs
to, and every event its ``created`` time: a play's wall time runs from its start to the next play's
(or the run's end). ``Timing`` sums them as a run goes; ``lines`` says them as a table that ends the
run's log (and its ``-v`` output), so a slow add-node says where its seconds went.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

OWN = "(the play's own tasks)"  # a task of no role
TASK_ENDS = ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable")


def role_name(role: object) -> str:
    """A role as its README names it: ``meshctl.mesh.slurm`` and ``slurm`` are ``slurm``."""
    return str(role).rsplit(".", 1)[-1] if role else OWN


def stamp(created: object) -> float | None:
    """An event's ``created`` time (ISO 8601) as seconds, or None."""
    try:
        return datetime.fromisoformat(str(created)).timestamp()
    except ValueError:
        return None


class Timing:
    """One run's seconds: each play's wall time, and per host the time its tasks took by play and by role."""

    def __init__(self) -> None:
        self.plays: dict[str, float] = {}  # play -> wall seconds (in the order they ran)
        self.by_play: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # host -> play -> s
        self.by_role: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # host -> role -> s
        self._play: str | None = None
        self._since: float | None = None
        self.started: float | None = None
        self.ended: float | None = None

    def seen(self, kind: str, data: dict, created: object) -> None:
        when = stamp(created)
        if when is not None:
            self.started = when if self.started is None else min(self.started, when)
            self.ended = when if self.ended is None else max(self.ended, when)
        if kind in ("playbook_on_play_start", "playbook_on_stats"):
            self._close(when)
            if kind == "playbook_on_play_start":
                self._play, self._since = str(data.get("play") or "(unnamed play)"), when
                self.plays.setdefault(self._play, 0.0)
        elif kind in TASK_ENDS and data.get("host"):
            seconds = data.get("duration")
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 <= seconds < 1e6:
                host, play = str(data["host"]), str(data.get("play") or self._play or "(unnamed play)")
                self.by_play[host][play] += seconds
                self.by_role[host][role_name(data.get("role"))] += seconds

    def _close(self, when: float | None) -> None:
        if self._play is not None and self._since is not None and when is not None:
            self.plays[self._play] += max(0.0, when - self._since)
        self._play = self._since = None

    def lines(self) -> list[str]:
        """The profile as text: the run's wall time; each play's wall time and each host's task time
        in it; each role's task time per host, the largest first. [] when the run had no task."""
        hosts = sorted(self.by_role)
        if not hosts:
            return []
        total = (self.ended - self.started) if self.started is not None and self.ended is not None else 0.0
        width = max(len(name) for name in [*self.plays, *{r for h in hosts for r in self.by_role[h]}, "play"]) + 2
        head = "".join(f"{h[:14]:>15}" for h in hosts)
        out = [f"profile: the run took {total:.1f} s; seconds per play (wall, then each host's tasks) and per role "
               "(each host's tasks)", f"{'play':<{width}}{'wall':>8}{head}"]  # fmt: skip
        for play, wall in self.plays.items():
            cells = "".join(f"{self.by_play[h].get(play, 0.0):>15.1f}" for h in hosts)
            out.append(f"{play:<{width}}{wall:>8.1f}{cells}")
        out.append(f"{'role':<{width}}{'':>8}{head}")
        roles = {r for h in hosts for r in self.by_role[h]}
        for role in sorted(roles, key=lambda r: (-sum(self.by_role[h].get(r, 0.0) for h in hosts), r)):
            cells = "".join(f"{self.by_role[h].get(role, 0.0):>15.1f}" for h in hosts)
            out.append(f"{role:<{width}}{'':>8}{cells}")
        return out
