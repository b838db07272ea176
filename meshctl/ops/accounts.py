"""`meshctl provider add|list|remove`: the mesh's accounts with the providers (an API key each,
kept like the other secrets: 0600, vault-encrypted when the mesh has a vault). What the command
line offers as choices (the providers, Runpod's clouds) is asked of meshctl/cloud.py here."""

from __future__ import annotations

from pathlib import Path

from meshctl import cloud
from meshctl.ops import work

PROVIDERS = cloud.PROVIDERS  # the providers meshctl rents from
CLOUDS = cloud.CLOUDS  # the clouds a provider's offers come from (Runpod: SECURE, COMMUNITY)
ADD_ACCOUNT = cloud.ADD_ACCOUNT  # what to run when the mesh has no account
THIRD_PARTY_HOST = cloud.THIRD_PARTY_HOST  # said of a machine on a host a third party runs


def add(mesh_dir: str | None, provider: str, key_file: str, check: bool = True, wait: float = 0.0) -> int:
    """Store PROVIDER's key read from KEY_FILE (``-``: standard input) once the provider accepts it
    (unless not CHECK); returns how many instances the account has (0 unchecked)."""
    mesh = work.find(mesh_dir)
    key = cloud.read_key_file(key_file)
    with work.changing(mesh, f"provider add {provider}", wait) as w:
        return cloud.add_account(w.mesh, w.mesh_vars, provider, key, check=check)


def listed(mesh_dir: str | None) -> list[tuple[str, Path]]:
    """(provider, its key file) for each account the mesh has."""
    mesh = work.find(mesh_dir)
    return [(p, cloud.key_path(mesh, p)) for p in cloud.configured(mesh)]


def remove(mesh_dir: str | None, provider: str, wait: float = 0.0) -> None:
    """Delete PROVIDER's stored key (its instances keep running)."""
    mesh = work.find(mesh_dir)
    with work.locked(mesh, f"provider remove {provider}", wait):
        cloud.remove_account(mesh, provider)
