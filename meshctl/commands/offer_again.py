"""meshctl offer-again: on the head, a DOWN pool node offered to Slurm again after its cool-down."""

from __future__ import annotations

import click

from meshctl import display
from meshctl.ops import burst


@click.command("offer-again", hidden=True)
@click.argument("name")
def command(name) -> None:
    """Run by a pool node's retry timer (root, on the head; ``meshctl.ops.burst.retry_later``): NAME
    idle and powered down again once it is done powering down, while its reason is meshctl's. Not
    for people."""
    ok, said = burst.offer_again(name)
    display.echo(said, err=not ok)
    if not ok:
        raise click.exceptions.Exit(1)
