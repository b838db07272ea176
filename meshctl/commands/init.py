"""meshctl init: create a mesh directory with its head."""

from __future__ import annotations

from pathlib import Path

import click

from meshctl import display, membership, tailnet
from meshctl.options import mesh_address_option, provider_option, ssh_key_option


@click.command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("--head", required=True, metavar="local|[USER@]HOST[:PORT]", help="The controller node.")
@click.option("--name", help="The head's node name (default: its hostname).")
@ssh_key_option
@provider_option
@mesh_address_option
@click.option(
    "--authkey-file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Run the mesh over Tailscale with the auth key in this file ('-': standard input).",
)
@click.option("--tag", "tags", multiple=True, help="Tailscale tag every node advertises (repeatable), e.g. tag:gpu.")
@click.option("--login-server", help="Coordination server URL, for Headscale.")
def command(directory, head, name, ssh_key, provider, address, authkey_file, tags, login_server) -> None:
    """Create a mesh directory: mesh.yml, group_vars/ and secrets/ (0700)."""
    key = tailnet.read_key(authkey_file, None) if authkey_file else None
    mesh, node, report = membership.init_mesh(
        Path(directory), head, name, ssh_key, provider, address,
        tailscale_key=key, tags=tags, login_server=login_server,
    )  # fmt: skip
    if report is not None:
        display.preflight_table(report)
    click.echo(f"mesh created in {mesh.path} with head {node.name} ({node.host}, pending)")
    if key is not None:
        click.echo(f"nodes will join the tailnet with the key stored in {tailnet.key_path(mesh)} (0600)")
    click.echo("next: meshctl add-node [USER@]HOST  (or `meshctl apply` to set up the head alone)")
