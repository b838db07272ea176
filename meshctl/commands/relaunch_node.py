"""meshctl relaunch-node: on the head, launch again the Lambda nodes Slurm asked for (role power_save)."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import click

from meshctl import display
from meshctl.burst import pool_of
from meshctl.errors import MeshctlError
from meshctl.mesh import Mesh
from meshctl.model import NAME_RE, check_name
from meshctl.ops import burst, relaunch
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
    mesh = Mesh.find(mesh_dir)
    if reap:
        for name in burst.reap(mesh, say=display.echo):
            display.echo(f"{name}: its rent was cut short; what it made is terminated", err=True)
            _remove(spool / name)  # else the path unit would start the service on it again
            if NAME_RE.match(name):
                with contextlib.suppress(OSError):
                    burst.note_jobs(name, "the head's rent of a machine for it was cut short")
                    relaunch.mark_down(name, "the head's rent of a machine for it was cut short")
                    burst.give_back(name)
                    burst.retry_later(name, cooldown)
        return
    failed = []
    for request in sorted(spool.iterdir()) if spool.is_dir() else []:
        name, pooled = request.name, False
        try:
            if request.is_symlink() or not request.is_file():
                failed.append(name)
                display.echo(f"{name}: FAILED: not a request (the spool holds plain files only); removed", err=True)
                continue
            check_name(name)
            pooled = pool_of(mesh.load()[1], name) is not None
            if pooled:
                burst.rent(mesh, name, key_file, authorized / f"{name}.pub" if authorized else None, say=display.echo)
                continue
            relaunch.relaunch_node(mesh, name, state / f"{name}.json", key_file,
                                   authorized / f"{name}.pub" if authorized else None,
                                   say=display.echo)  # fmt: skip
            display.echo(f"{name}: launched again and set up; its slurmd registers by itself")
        except Exception as exc:  # one node's failure is said, and the others go on
            failed.append(name)
            message = exc.message if isinstance(exc, MeshctlError) else f"{type(exc).__name__}: {exc}"
            hint = exc.hint if isinstance(exc, MeshctlError) else ""
            display.echo(f"{name}: FAILED: {message} ({hint})" if hint else f"{name}: FAILED: {message}", err=True)
            if NAME_RE.match(name):
                with contextlib.suppress(OSError):  # no scontrol here: said above all the same
                    if pooled:
                        burst.note_jobs(name, f"no machine could be rented: {message}")
                        relaunch.mark_down(name, f"the head could not rent a machine for it: {message}")
                        burst.give_back(name)
                        burst.retry_later(name, cooldown)
                    else:
                        relaunch.mark_down(name, f"the head could not launch it again: {message}")
        finally:
            _remove(request)
    if failed:
        raise click.exceptions.Exit(1)


def _remove(request: Path) -> None:
    """The request gone, whatever it is: one left behind would start this service again forever (its
    path unit starts it while the spool is not empty). A folder goes whole, its links unfollowed."""
    try:
        if request.is_dir() and not request.is_symlink():
            shutil.rmtree(request)
        else:
            request.unlink(missing_ok=True)
    except OSError as exc:
        display.echo(f"{request.name}: could not be removed from the spool ({exc})", err=True)
