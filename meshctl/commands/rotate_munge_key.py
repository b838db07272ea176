"""meshctl rotate-munge-key: a new munge key on every node."""

from __future__ import annotations

import click

from meshctl import display, runner
from meshctl.ops import rotate_munge_key, work
from meshctl.options import mesh_option, verbose_option, wait_option


@click.command("rotate-munge-key")
@mesh_option
@wait_option
@verbose_option
def command(mesh_dir, wait, verbosity) -> None:
    """Replace the mesh's munge key and install it on every active node.

    Do this after a node left the mesh while it could not be reached (it still holds the old key),
    or when the key may have been read. munged restarts once on each node; running jobs keep running.
    """
    with work.changing(mesh_dir, "rotate-munge-key", wait) as w:
        result, resumed = rotate_munge_key.rotate(w, runner.Progress(), verbosity)
    if resumed:
        display.echo("finished the rotation begun before: its pending key, no other made")
    reached = sorted(h for h in result.stats if h != "localhost")
    # The key's copy is no_log (its result, "changed" included, is hidden): the restart says it changed.
    restarted = sorted(h for h, tasks in result.changed.items() if any("Restart munge" in t for t in tasks))
    display.echo(f"new munge key stored in {rotate_munge_key.key_path(w.mesh)} and installed on {', '.join(reached)}; "
                 f"munged restarted on {', '.join(restarted) or 'none (they had it)'}")  # fmt: skip
