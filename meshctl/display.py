"""Tables and lines meshctl prints (rich on a terminal, plain text otherwise).

Everything printed goes through ``clean``: much of it is what nodes reported (an OS name, a GPU
model, a task's message), and a hostile node must not drive the user's terminal with it (OSC 52
writes the clipboard, other sequences retitle the window, move the cursor or hide text).
"""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from meshctl import core

_TEXT = core.mesh_text  # the one sanitizer, shared with the head's programs


def clean(text: object, multiline: bool = False) -> str:
    """``text`` safe for a terminal: escape sequences and control characters removed, tabs made spaces,
    and line breaks too unless ``multiline``. The one sanitizer for what meshctl prints
    (``plugins/module_utils/mesh_text.py``)."""
    return _TEXT.clean(text, multiline)


def dollars(value: float | None, unknown: str = "-") -> str:
    """A price per hour as a table cell: two decimals, UNKNOWN when there is none."""
    return unknown if value is None else f"{value:.2f}"


def echo(text: object = "", err: bool = False) -> None:
    """click.echo of ``clean`` text (line breaks kept)."""
    click.echo(clean(text, multiline=True), err=err)


def console(out=None) -> Console:
    return Console(file=out or sys.stdout, highlight=False, soft_wrap=True)


def rich_table(title: str | Text, columns: list[str], rows: list[list[str]]) -> Table:
    """TITLE: plain text (cleaned, never markup), or a ``Text`` built from cleaned parts with styles."""
    t = Table(title=title if isinstance(title, Text) else Text(clean(title, multiline=True)), title_justify="left")
    for column in columns:
        t.add_column(Text(clean(column)))
    for row in rows:
        # Cells hold what nodes reported (an OS name like `Debian [/] 12`): text, never markup.
        t.add_row(*(Text(clean(c)) for c in row))
    return t


def table(title: str, columns: list[str], rows: list[list[str]], out=None, live: bool | None = None) -> None:
    """A rich table on a terminal, aligned plain text otherwise."""
    out = out or sys.stdout
    if out.isatty() if live is None else live:
        console(out).print(rich_table(title, columns, rows))
        return
    click.echo(clean(title, multiline=True), file=out)
    columns, rows = [clean(c) for c in columns], [[clean(c) for c in row] for row in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(columns, *rows, strict=False)]
    for row in [columns, *rows]:
        click.echo("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip(), file=out)


def preflight_table(report) -> None:
    rows = [["ssh", f"{report.target.user}@{report.target.host}:{report.target.port}", "ok", ""]]
    for check in report.result.checks:
        mark = "ok" if check.ok else ("FAIL" if check.blocking else "warn")
        rows.append([check.name, check.value, mark, check.note if check.ok else check.hint])
    rows.append(["provider", report.provider, "ok", ""])
    table("Preflight", ["check", "value", "result", "what to do"], rows)
