"""`meshctl provider add|list|remove`: the mesh's accounts with the providers (an API key each,
kept like the other secrets: 0600, vault-encrypted when the mesh has a vault). What the command
line offers as choices (the providers, Runpod's clouds) is asked of meshctl/cloud.py here."""

from __future__ import annotations

from pathlib import Path

from meshctl import cloud
from meshctl.ops.work import Work

PROVIDERS = cloud.PROVIDERS  # the providers meshctl rents from
CLOUDS = cloud.CLOUDS  # the clouds a provider's offers come from (Runpod: SECURE, COMMUNITY)
ADD_ACCOUNT = cloud.ADD_ACCOUNT  # what to run when the mesh has no account
THIRD_PARTY_HOST = cloud.THIRD_PARTY_HOST  # said of a machine on a host a third party runs


def read_key(key_file: str) -> str:
    """The API key in KEY_FILE (``-``: standard input), checked: read before the mesh is locked."""
    return cloud.read_key_file(key_file)


def add(w: Work, provider: str, key: str, check: bool = True) -> int:
    """Store PROVIDER's KEY once the provider accepts it (unless not CHECK); returns how many
    instances the account has (0 unchecked)."""
    return cloud.add_account(w.mesh, w.mesh_vars, provider, key, check=check)


def listed(w: Work) -> list[tuple[str, Path]]:
    """(provider, its key file) for each account the mesh has."""
    return [(p, cloud.key_path(w.mesh, p)) for p in cloud.configured(w.mesh)]


def remove(w: Work, provider: str) -> None:
    """Delete PROVIDER's stored key (its instances keep running)."""
    cloud.remove_account(w.mesh, provider)
