"""meshctl init: create a mesh directory with its head."""

from __future__ import annotations

from pathlib import Path

import click

from meshctl import display, membership
from meshctl.options import mesh_address_option, provider_option, ssh_key_option


@click.command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("--head", required=True, metavar="local|[USER@]HOST[:PORT]", help="The controller node.")
@click.option("--name", help="The head's node name (default: its hostname).")
@ssh_key_option
@provider_option
@mesh_address_option
def command(directory, head, name, ssh_key, provider, address) -> None:
    """Create a mesh directory: mesh.yml, group_vars/ and secrets/ (0700)."""
    mesh, node, report = membership.init_mesh(Path(directory), head, name, ssh_key, provider, address)
    if report is not None:
        display.preflight_table(report)
    click.echo(f"mesh created in {mesh.path} with head {node.name} ({node.host}, pending)")
    click.echo("next: meshctl add-node [USER@]HOST  (or `meshctl apply` to set up the head alone)")
