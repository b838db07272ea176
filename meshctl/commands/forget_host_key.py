"""meshctl forget-host-key: accept that a node's machine changed (re-rented, rebuilt)."""

from __future__ import annotations

import click

from meshctl import completion, display
from meshctl.ops import forget_host_key, work
from meshctl.options import mesh_option, quiet_verbose_option, wait_option


@click.command("forget-host-key")
@quiet_verbose_option
@click.argument("name", shell_complete=completion.node_names)
@mesh_option
@wait_option
def command(name, mesh_dir, wait) -> None:
    """Forget the SSH host key recorded for node NAME, so the next run records the key it offers now.

    For a machine that was re-rented or rebuilt at the same address: meshctl refuses a changed key
    until this is run. Only the mesh's own known_hosts changes.
    """
    with work.changing(mesh_dir, f"forget-host-key {name}", wait) as w:
        node, gone = forget_host_key.forget(w, name)
    if not gone:
        display.echo(f"no host key was recorded for {name} ({node.host}:{node.port}); nothing to forget")
        return
    display.echo(f"forgot {name}'s host key ({', '.join(map(str, gone))})")
    display.echo(f"next: `meshctl apply --limit {name}` records the key {name} offers now")
