"""Options shared by several commands, defined once."""

from __future__ import annotations

import click

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
