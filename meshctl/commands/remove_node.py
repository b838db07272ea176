"""meshctl remove-node: drain a node, wait for its jobs, take it out of Slurm and the inventory."""

from __future__ import annotations

import click

from meshctl import completion, display, runner
from meshctl.ops import remove, work
from meshctl.options import confirm, mesh_option, verbose_option, wait_option, yes_option


@click.command("remove-node")
@click.argument("name", shell_complete=completion.node_names)
@click.option("--force", is_flag=True, help="Cancel the node's jobs instead of waiting for them.")
@click.option("--timeout", type=click.FloatRange(min=0), default=3600, show_default=True,
              help="Seconds to wait for the node's jobs.")  # fmt: skip
@click.option("--terminate", is_flag=True, help="Then delete the machine at its provider (added as PROVIDER:NAME).")
@click.option("--delete-volume", "volume", flag_value="delete",
              help="With --terminate: delete the network volume it mounts too (its data is lost).")  # fmt: skip
@click.option("--keep-volume", "volume", flag_value="keep",
              help="With --terminate: keep the network volume it mounts (it bills on, used or not).")  # fmt: skip
@yes_option
@mesh_option
@wait_option
@verbose_option
def command(name, force, timeout, terminate, volume, yes, mesh_dir, wait, verbosity) -> None:
    """Drain NAME in Slurm, wait for its jobs, stop it, remove it from Slurm, the head and the inventory.

    Only NAME (when it can be reached) and the head are contacted. With --terminate, asks before
    deleting the machine unless -y; a machine that mounts a network volume (a Runpod pod's) needs
    --delete-volume or --keep-volume: the volume bills whether or not anything uses it.
    """
    with work.changing(mesh_dir, f"remove-node {name}", wait) as w:
        node = next((n for n in w.nodes if n.name == name), None)
        plan = remove.terminate_plan(w, name, terminate, volume)
        if terminate and node is not None and node.instance:
            also = f" and {plan.volume.words()} go with it" if plan.deletes_volume else " goes with it"
            confirm(f"delete {node.instance} at its provider after {name} leaves? Its disk{also}", yes)
        remove.remove_node(w, name, force, timeout, runner.Progress(), say=display.echo, verbosity=verbosity,
                           terminate=terminate, plan=plan)  # fmt: skip
    display.echo(f"{name} removed from the mesh")
