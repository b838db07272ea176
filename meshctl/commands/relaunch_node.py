"""meshctl relaunch-node: on the head, launch again the Lambda nodes Slurm asked for (role power_save)."""

from __future__ import annotations

from pathlib import Path

import click

from meshctl import display
from meshctl.errors import MeshctlError
from meshctl.mesh import Mesh
from meshctl.model import check_name
from meshctl.ops import relaunch
from meshctl.options import mesh_option


@click.command("relaunch-node", hidden=True)
@click.option("--spool", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="One empty file per node to launch again (written by meshctl-power resume).")  # fmt: skip
@click.option("--state", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="<node>.json: the terminated instance's type, region and name (meshctl-power suspend).")  # fmt: skip
@click.option("--key", "key_file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The head's SSH key (its .pub beside it is registered at Lambda).")  # fmt: skip
@click.option("--authorized", type=click.Path(file_okay=False, path_type=Path),
              help="<node>.pub: the control machine's key, authorized on the new instance.")  # fmt: skip
@mesh_option
def command(spool, state, key_file, authorized, mesh_dir) -> None:
    """Run by the head's relaunch service (root): each node asked for is launched again and set up,
    or marked DOWN with the reason. Not for people: a job for the node does it."""
    mesh = Mesh.find(mesh_dir)
    failed = []
    for request in sorted(spool.iterdir()) if spool.is_dir() else []:
        name = request.name
        try:
            check_name(name)
            relaunch.relaunch_node(mesh, name, state / f"{name}.json", key_file,
                                   authorized / f"{name}.pub" if authorized else None,
                                   say=display.echo)  # fmt: skip
            display.echo(f"{name}: launched again and set up; its slurmd registers by itself")
        except MeshctlError as exc:
            failed.append(name)
            said = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
            display.echo(f"{name}: FAILED: {said}", err=True)
            relaunch.mark_down(name, f"the head could not launch it again: {exc.message}")
        finally:
            request.unlink(missing_ok=True)
    if failed:
        raise click.exceptions.Exit(1)
