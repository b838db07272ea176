"""meshctl autostop: set or cancel a rented node's idle stop (mesh.yml's idle_stop), on the head only."""

from __future__ import annotations

import click

from meshctl import completion, display
from meshctl.ops import autostop as autostop_op
from meshctl.ops import work
from meshctl.options import mesh_option, verbose_option, wait_option


@click.command("autostop")
@click.argument("name", shell_complete=completion.node_names)
@click.argument("duration")
@mesh_option
@wait_option
@verbose_option
def command(name, duration, mesh_dir, wait, verbosity) -> None:
    """Stop NAME after DURATION idle (30m, 1h30m, 90s, 30 minutes), or never (off).

    Writes the node's idle_stop in mesh.yml (refused before anything changes when its provider cannot
    stop it and bring it back, for the head, and for a node not set up yet) and converges the head
    only, and only when its power plan changes: Slurm's power saving lives there.
    """
    autostop_op.seconds_of(duration)  # a bad duration is refused before the mesh is looked for
    with work.changing(mesh_dir, f"autostop {name} {duration}", wait) as w:
        done = autostop_op.autostop(w, name, duration, verbosity=verbosity)
    said = f"stopped after {duration} idle ({done.seconds} s)" if done.seconds else "never stopped when idle"
    display.echo(f"{name}: {said}" + ("" if done.converged else " (the head's power plan was already so: nothing run)"))
