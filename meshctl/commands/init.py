"""meshctl init: create a mesh directory with its head."""

from __future__ import annotations

from pathlib import Path

import click

from meshctl import display, membership, tailnet, vault
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
@click.option("--vault-password-file", type=click.Path(dir_okay=False),
              help="Keep secrets/ encrypted with Ansible Vault, with the password in this file (0600).")  # fmt: skip
@click.option("--vault-id", metavar="LABEL@SOURCE",
              help="Same, with an existing vault id (SOURCE: a password file or client script).")  # fmt: skip
def command(directory, head, name, ssh_key, provider, address, authkey_file, tags, login_server,
            vault_password_file, vault_id) -> None:  # fmt: skip
    """Create a mesh directory: mesh.yml, group_vars/, secrets/ (0700) and a .gitignore."""
    chosen_vault = vault.vault_id_from_options(vault_password_file, vault_id)
    key = tailnet.read_key(authkey_file, None) if authkey_file else None
    mesh, node, report = membership.init_mesh(
        Path(directory), head, name, ssh_key, provider, address,
        tailscale_key=key, tags=tags, login_server=login_server, vault_id=chosen_vault,
    )  # fmt: skip
    if report is not None:
        display.preflight_table(report)
    click.echo(f"mesh created in {mesh.path} with head {node.name} ({node.host}, pending)")
    if key is not None:
        how = "vault-encrypted, 0600" if chosen_vault else "0600"
        click.echo(f"nodes will join the tailnet with the key stored in {tailnet.key_path(mesh)} ({how})")
    if chosen_vault:
        click.echo(f"secrets/ is encrypted with Ansible Vault ({chosen_vault}): it may be committed to git")
    click.echo("next: meshctl add-node [USER@]HOST  (or `meshctl apply` to set up the head alone)")
