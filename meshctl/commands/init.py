"""meshctl init: create a mesh directory with its head."""

from __future__ import annotations

from pathlib import Path

import click

from meshctl import display
from meshctl.ops import importing, init
from meshctl.options import mesh_address_option, provider_option, quiet_verbose_option, ssh_key_option


@click.command("init")
@quiet_verbose_option
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--head", metavar="local|[USER@]HOST[:PORT]", help="The controller node.")
@click.option(
    "--from-inventory",
    "inventory_file",
    type=click.Path(dir_okay=False),
    help="Take the head and compute nodes from an Ansible inventory (instead of --head).",
)
@click.option("--head-group", default="head", show_default=True, help="With --from-inventory: the head's group.")
@click.option(
    "--compute-group", default="compute", show_default=True, help="With --from-inventory: the compute nodes' group."
)
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
@click.option("--mesh", "mesh_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="The mesh's folder, as every other command names it (the same as DIRECTORY).")  # fmt: skip
def command(directory, head, inventory_file, head_group, compute_group, name, ssh_key, provider, address,
            authkey_file, tags, login_server, vault_password_file, vault_id, mesh_dir) -> None:  # fmt: skip
    """Create a mesh directory: mesh.yml, group_vars/, secrets/ (0700) and a .gitignore.

    DIRECTORY: the mesh's folder (default: `meshctl --mesh DIR init`'s DIR, else this folder)."""
    given = mesh_dir or (click.get_current_context().find_root().obj or {}).get("mesh_dir")
    if directory and given and Path(directory).resolve() != Path(given).resolve():
        raise click.UsageError(f"--mesh {given} and DIRECTORY {directory} name two folders: give one")
    directory = directory or given or "."
    if bool(head) == bool(inventory_file):
        raise click.UsageError("pass --head (the controller node) or --from-inventory FILE, one of them")
    if inventory_file and (name or ssh_key or address):
        raise click.UsageError("with --from-inventory, names, keys and addresses come from the inventory")
    chosen_vault = init.vault_id(vault_password_file, vault_id)
    others = foreign_entries(Path(directory))
    if others:
        shown = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
        display.echo(f"note: {directory} already holds {shown}: the mesh's files go beside them (mesh.yml, "
                     "group_vars/, secrets/; .gitignore keeps secrets/ and logs/ out of git); "
                     "`meshctl init NEW_FOLDER` keeps the mesh apart", err=True)  # fmt: skip
    key = init.read_authkey(authkey_file) if authkey_file else None
    if inventory_file:
        mesh, nodes, reports = importing.init_from_inventory(
            Path(directory), Path(inventory_file), head_group, compute_group, provider,
            tailscale_key=key, tags=tags, login_server=login_server, vault_id=chosen_vault,
        )  # fmt: skip
        for report in reports:
            display.preflight_table(report)
        display.table("Imported", ["node", "ssh", "roles", "state"],
                      [[n.name, f"{n.user}@{n.host}:{n.port}", ",".join(n.roles), n.state] for n in nodes])  # fmt: skip
        display.echo(f"mesh created in {mesh.path} with {len(nodes)} nodes (pending)")
        display.echo("next: meshctl apply  (sets up the head and every node)")
        return
    mesh, node, report = init.init_mesh(
        Path(directory), head, name, ssh_key, provider, address,
        tailscale_key=key, tags=tags, login_server=login_server, vault_id=chosen_vault,
    )  # fmt: skip
    if report is not None:
        display.preflight_table(report)
    display.echo(f"mesh created in {mesh.path} with head {node.name} ({node.host}, pending)")
    if key is not None:
        how = "vault-encrypted, 0600" if chosen_vault else "0600"
        display.echo(f"nodes will join the tailnet with the key stored in {init.authkey_path(mesh)} ({how})")
    if chosen_vault:
        display.echo(f"secrets/ is encrypted with Ansible Vault ({chosen_vault}): it may be committed to git")
    display.echo("next: meshctl add-node [USER@]HOST  (or `meshctl apply` to set up the head alone)")


def foreign_entries(folder: Path) -> list[str]:
    """What FOLDER holds besides git's own (sorted names; [] when it is missing, empty, or a mesh's,
    which init refuses anyway)."""
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        return []
    if "mesh.yml" in names:
        return []
    return [n for n in names if n not in (".git", ".gitignore")]
