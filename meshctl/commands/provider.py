"""meshctl provider add|list|remove: the mesh's accounts with Lambda, Runpod and Paperspace."""

from __future__ import annotations

import click

from meshctl import display
from meshctl.ops import accounts, work
from meshctl.options import group_mesh_option, mesh_option, quiet_verbose_option, wait_option


@click.group("provider")
@group_mesh_option
@quiet_verbose_option
def command() -> None:
    """The mesh's provider accounts (an API key each, kept like the other secrets)."""


@command.command("add")
@quiet_verbose_option
@click.argument("provider", type=click.Choice(accounts.PROVIDERS))
@click.option("--key-file", required=True, help="File holding the API key (`-`: standard input). Never the key itself.")
@click.option("--no-check", is_flag=True, help="Store the key without asking the provider whether it is valid.")
@mesh_option
@wait_option
def add(provider, key_file, no_check, mesh_dir, wait) -> None:
    """Store PROVIDER's API key (0600, vault-encrypted when the mesh has a vault) once the provider accepts it."""
    key = accounts.read_key(key_file)
    with work.changing(mesh_dir, f"provider add {provider}", wait) as w:
        count = accounts.add(w, provider, key, check=not no_check)
    said = "stored without a check" if no_check else f"the key works ({count} instances)"
    display.echo(f"{provider}: {said}; `meshctl machines` lists them")


@command.command("list")
@quiet_verbose_option
@mesh_option
def list_(mesh_dir) -> None:
    """The providers the mesh has a key for."""
    rows = [[p, str(path)] for p, path in accounts.listed(work.reading(mesh_dir))]
    if not rows:
        display.echo(f"no provider accounts: {accounts.ADD_ACCOUNT}")
        return
    display.table("Provider accounts", ["provider", "key file"], rows)


@command.command("remove")
@quiet_verbose_option
@click.argument("provider", type=click.Choice(accounts.PROVIDERS))
@mesh_option
@wait_option
def remove(provider, mesh_dir, wait) -> None:
    """Delete PROVIDER's stored key (its instances keep running: `meshctl machines` first)."""
    with work.changing(mesh_dir, f"provider remove {provider}", wait) as w:
        accounts.remove(w, provider)
    display.echo(f"{provider}: key removed")
