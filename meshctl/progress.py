"""What a user sees of an Ansible run: live on a terminal (a table of hosts, their bars and the
task each is on), plain lines otherwise, the recap at the end; every line through display's
sanitizer. The runner (meshctl/runner.py) reads the run's events; this shows them."""

from __future__ import annotations

import difflib
import sys
import time
from collections import defaultdict

from meshctl import display

COUNTS = ("ok", "changed", "failed", "unreachable", "skipped")


def diff_lines(diff) -> list[str]:
    """Unified diff lines from a task result's ``diff`` (a dict or a list of them)."""
    lines: list[str] = []
    for item in diff if isinstance(diff, list) else [diff] if diff else []:
        if not isinstance(item, dict):
            continue
        if "prepared" in item:
            lines += str(item["prepared"]).splitlines()
            continue
        before, after = item.get("before", ""), item.get("after", "")
        if not isinstance(before, str) or not isinstance(after, str) or before == after:
            continue
        lines += difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            fromfile=str(item.get("before_header", "before")),
            tofile=str(item.get("after_header", "after")),
            lineterm="",
        )
    return lines


class Progress:
    """The reporter a command supplies for its runs: what the user sees, live on a terminal, plain
    lines otherwise (a run's results are its ``Events``')."""

    def __init__(self, out=None, live: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.live = self.out.isatty() if live is None else live
        self.expected: dict[str, int] = {}  # host -> tasks its last run of this playbook took (read_task_counts)
        self.steps: dict[str, str] = {}  # host -> the task it is on now
        self.started = time.monotonic()
        self.play = ""
        self.task = ""
        # host -> its tasks by outcome: the run's Events' counts, shown in the bars and the recap
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.verbose = False  # -v: show Ansible's own output (run_playbook sets it)
        self.log = None  # the run's log file (run_playbook opens it)
        self._rich = None
        if self.live:
            from rich.live import Live

            self._rich = Live(self._render(), console=display.console(self.out), refresh_per_second=4, transient=True)
            self._rich.start()

    def _rows(self) -> list[list[str]]:
        return [[host, *(str(self.counts[host][k]) for k in COUNTS)] for host in sorted(self.counts)]

    def done(self, host: str) -> int:
        return sum(self.counts[host][k] for k in COUNTS)

    def bar(self, host: str, width: int = 12) -> str:
        """HOST's tasks done of what its last run of the playbook took: `[#####-------] 20/48`
        (`20/?` the first time; a run that takes more than last time stays full)."""
        done, total = self.done(host), self.expected.get(host)
        if not total:
            return f"{done}/?"
        filled = min(width, round(width * done / total))
        return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total}"

    def live_rows(self) -> list[list[str]]:
        """The live table: per host its bar, its counts and the task it is on now."""
        hosts = sorted(set(self.counts) | set(self.steps))
        return [[host, self.bar(host), *(str(self.counts[host][k]) for k in COUNTS),
                 display.clean(self.steps.get(host, ""))[:60]] for host in hosts]  # fmt: skip

    def _render(self):
        from rich.text import Text

        elapsed = int(time.monotonic() - self.started)
        title = Text(display.clean(self.play) + f"  ({elapsed // 60}:{elapsed % 60:02d})")
        title.append("\n" + display.clean(self.task), style="dim")  # styled, not markup: a task's name is text
        return display.rich_table(title, ["host", "done", *COUNTS, "step"], self.live_rows())

    def _say(self, line: str) -> None:
        line = display.clean(line)  # node text: no escape sequences reach the terminal
        if self._rich is not None:
            self._rich.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.out, flush=True)

    def seen(self, kind: str, host: str, data: dict, text: str) -> None:
        """Any event: the log, Ansible's own output with -v, the play, the task, each host's step."""
        if text and self.log is not None:
            self.log.write(display.clean(text, multiline=True) + "\n")
        if text and self.verbose:  # -v: Ansible's own output, with what -v adds
            for line in text.splitlines():
                self._say(line)
        if kind == "playbook_on_play_start":
            self.play = f"PLAY {data.get('play', '')}"
            if not self.verbose:
                self._say(self.play)
        elif kind == "runner_on_start" and host:
            self.steps[host] = data.get("task", "")
        elif kind == "playbook_on_task_start":
            self.task = data.get("task", "")
            if not self.live and not self.verbose:
                self._say(f"  TASK {self.task}")

    def ok(self, host: str, data: dict, res: dict, changed: bool) -> None:
        """A task done on HOST: a debug task's message, its diff, and whether it changed the node."""
        if data.get("task_action") in ("debug", "ansible.builtin.debug") and res.get("msg"):
            self._say(f"    {host}: {res['msg']}")
        for text in diff_lines(res.get("diff")):
            self._say(text)
        if changed and not self.live and not self.verbose:
            self._say(f"    changed: {host}")

    def failed(self, key: str, failure) -> None:  # a runner.Failure: its host, task and message
        self._say(f"    {key}: {failure.host}: {failure.task}: {failure.message}")

    def refresh(self) -> None:
        if self._rich is not None:
            self._rich.update(self._render())

    def note(self, line: str) -> None:
        """Print a line of meshctl's own between the run's lines (cleaned of control characters)."""
        self._say(line)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()

    def recap(self) -> None:
        display.table("Recap", ["host", *COUNTS], self._rows(), out=self.out, live=self.live)
