"""Tables and lines meshctl prints (rich on a terminal, plain text otherwise)."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text


def console(out=None) -> Console:
    return Console(file=out or sys.stdout, highlight=False, soft_wrap=True)


def rich_table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    t = Table(title=Text(title), title_justify="left")
    for column in columns:
        t.add_column(Text(column))
    for row in rows:
        # Cells hold what nodes reported (an OS name like `Debian [/] 12`): text, never markup.
        t.add_row(*(Text(str(c)) for c in row))
    return t


def table(title: str, columns: list[str], rows: list[list[str]], out=None, live: bool | None = None) -> None:
    """A rich table on a terminal, aligned plain text otherwise."""
    out = out or sys.stdout
    if out.isatty() if live is None else live:
        console(out).print(rich_table(title, columns, rows))
        return
    click.echo(title, file=out)
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
