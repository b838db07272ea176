"""meshctl relaunch-node: on the head, launch again the Lambda nodes Slurm asked for (role power_save)."""

from __future__ import annotations

from pathlib import Path

import click

from meshctl import display
from meshctl.ops import relaunch_node
from meshctl.options import mesh_option, quiet_verbose_option


@click.command("relaunch-node", hidden=True)
@quiet_verbose_option
@click.option("--spool", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="One empty file per node to launch again (written by meshctl-power resume).")  # fmt: skip
@click.option("--state", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="<node>.json: the terminated instance's type, region and name (meshctl-power suspend).")  # fmt: skip
@click.option("--key", "key_file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The head's SSH key (its .pub beside it is registered at Lambda).")  # fmt: skip
@click.option("--authorized", type=click.Path(file_okay=False, path_type=Path),
              help="<node>.pub: the control machine's key, authorized on the new instance.")  # fmt: skip
@click.option("--cooldown", type=click.IntRange(0, 86400), default=300, show_default=True,
              help="Seconds a pool node that could not be rented stays DOWN before Slurm may resume it.")  # fmt: skip
@click.option("--reap", is_flag=True, help="Only terminate what a rent cut short left (the service's ExecStopPost).")
@mesh_option
def command(spool, state, key_file, authorized, cooldown, reap, mesh_dir) -> None:
    """Run by the head's relaunch service (root): each node asked for is launched again (a burst pool's:
    rented) and set up, or marked DOWN with the reason. Not for people: a job for the node does it."""
    warn = lambda line: display.echo(line, err=True)  # noqa: E731
    if reap:
        relaunch_node.reap(mesh_dir, spool, cooldown, say=display.echo, warn=warn)
        return
    if relaunch_node.serve(mesh_dir, spool, state, key_file, authorized, cooldown, say=display.echo, warn=warn):
        raise click.exceptions.Exit(1)
