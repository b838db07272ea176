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
@yes_option
@mesh_option
@wait_option
@verbose_option
def command(name, force, timeout, terminate, yes, mesh_dir, wait, verbosity) -> None:
    """Drain NAME in Slurm, wait for its jobs, stop it, remove it from Slurm, the head and the inventory.

    Only NAME (when it can be reached) and the head are contacted. With --terminate, asks before
    deleting the machine unless -y.
    """
    with work.changing(mesh_dir, f"remove-node {name}", wait) as w:
        node = next((n for n in w.nodes if n.name == name), None)
        if terminate and node is not None and node.instance:
            confirm(f"delete {node.instance} at its provider after {name} leaves? Its disk goes with it", yes)
        remove.remove_node(w, name, force, timeout, runner.Progress(), say=display.echo, verbosity=verbosity,
                           terminate=terminate)  # fmt: skip
    display.echo(f"{name} removed from the mesh")
