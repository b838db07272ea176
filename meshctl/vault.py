"""Secrets kept encrypted at rest with Ansible Vault.

A mesh made with ``meshctl init --vault-password-file FILE`` (or ``--vault-id LABEL@SOURCE``,
where SOURCE is a password file or a client script, as ``ansible-playbook --vault-id`` takes it)
records that vault id in ``mesh.yml`` (``meshctl_vault_id``; a path, never the password). The
munge key, MLflow's password and the Tailscale auth key in ``secrets/`` are then vault-encrypted files. meshctl
encrypts them with Ansible's own VaultLib and never writes them in clear; Ansible decrypts
them where it must, in memory or in a temp file of its local temp folder (inside the run's
private folder, removed with it), when ``copy`` sends them to a node.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from pathlib import Path

from meshctl import resources
from meshctl.errors import UsageError
from meshctl.mesh import atomic_write

MESH_VAR = "meshctl_vault_id"
DEFAULT_LABEL = "meshctl"


def vault_id_from_options(password_file: str | None, vault_id: str | None) -> str | None:
    """The vault id to record, from ``--vault-password-file`` or ``--vault-id`` (not both)."""
    if password_file and vault_id:
        raise UsageError("--vault-password-file and --vault-id are two ways to say the same thing",
                         hint="pass one of them")  # fmt: skip
    if password_file:
        vault_id = f"{DEFAULT_LABEL}@{password_file}"
    if not vault_id:
        return None
    label, sep, source = vault_id.partition("@")
    if not sep:  # a bare source, as ansible-playbook --vault-id accepts it
        label, source = DEFAULT_LABEL, vault_id
    if not label or any(c in label for c in " \n,@"):
        raise UsageError(
            f"--vault-id {vault_id!r}: the label must be one word", hint="use LABEL@FILE, e.g. mesh@~/.vault"
        )
    path = Path(source).expanduser()
    if not path.is_file():
        raise UsageError(f"vault password source {source}: no such file", hint="create it (chmod 600) or name another")
    info = path.stat()
    kind = "client script" if info.st_mode & 0o111 else "file"
    if info.st_uid != os.geteuid():  # whoever owns it decides the mesh's password (or runs code as you)
        raise UsageError(f"vault password {kind} {path} belongs to uid {info.st_uid}, not to you",
                         hint=f"use a {kind} of your own (chown {os.geteuid()} {path})")  # fmt: skip
    if info.st_mode & 0o022:  # a script others can change runs their code as you
        raise UsageError(f"vault password {kind} {path} can be changed by other users", hint=f"chmod go-w {path}")
    if info.st_mode & 0o077 and not info.st_mode & 0o111:
        raise UsageError(f"vault password file {path} is readable by others", hint=f"chmod 600 {path}")
    vault = Vault(f"{label}@{path.resolve()}")
    vault.secret()  # fail now, before anything is written, if the password cannot be read
    return vault.vault_id


def for_mesh(mesh_vars: dict) -> Vault | None:
    """The mesh's vault, or None when its secrets are kept in clear (0600 files)."""
    vault_id = mesh_vars.get(MESH_VAR)
    return Vault(vault_id) if vault_id else None


class Vault:
    """One vault id (``label@source``): encrypts and decrypts with Ansible's VaultLib."""

    def __init__(self, vault_id: str) -> None:
        self.vault_id = vault_id
        self.label, _, self.source = vault_id.partition("@")

    def secret(self):
        from ansible.errors import AnsibleError
        from ansible.parsing.dataloader import DataLoader
        from ansible.parsing.vault import get_file_vault_secret

        try:
            secret = get_file_vault_secret(filename=self.source, vault_id=self.label, loader=DataLoader())
            secret.load()
        except (AnsibleError, OSError) as exc:
            raise UsageError(
                f"cannot read the vault password from {self.source}: {exc}",
                hint=f"{self.source} must hold the password (a script: print it); mesh.yml names it as {MESH_VAR}",
            ) from None
        if not secret.bytes:
            raise UsageError(f"the vault password from {self.source} is empty", hint="put a password in it")
        return secret

    def _lib(self):
        from ansible.parsing.vault import VaultLib

        return VaultLib([(self.label, self.secret())])

    def encrypt(self, data: bytes) -> bytes:
        return self._lib().encrypt(data, vault_id=self.label)

    def decrypt(self, data: bytes) -> bytes:
        return self._lib().decrypt(data)

    @staticmethod
    def is_encrypted(data: bytes) -> bool:
        from ansible.parsing.vault import is_encrypted

        return is_encrypted(data)


def write_secret(path: Path, data: bytes, vault: Vault | None) -> Path:
    """Replace a file of secrets/ atomically (0600 all along), encrypted when the mesh has a vault."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    atomic_write(path, vault.encrypt(data) if vault is not None else data, mode=0o600)
    return path


def read_secret(path: Path, vault: Vault | None) -> bytes:
    """A secret's clear bytes, in memory only (decrypted when it is a vault file)."""
    data = path.read_bytes()
    if Vault.is_encrypted(data):
        if vault is None:
            raise UsageError(f"{path} is vault-encrypted but the mesh names no vault",
                             hint=f"set {MESH_VAR}: LABEL@PASSWORD_FILE in mesh.yml's vars")  # fmt: skip
        return vault.decrypt(data)
    return data


# In secrets/: a munge key rotation begun and not finished (ops/rotate_munge_key.py); a dot-file,
# which the head's copy of the secrets leaves out.
ROTATION_PENDING = ".munge-key-rotation"


# Secrets the roles make on the control machine when they are missing, by (role, variable that
# names the file): with a vault meshctl makes them itself, encrypted, before a run.
GENERATED = {
    ("munge", "munge_key_file"): lambda: os.urandom(1024),
    ("mlflow", "mlflow_auth_password_file"): lambda: secrets.token_hex(24).encode(),
    ("mlflow", "mlflow_accounts_key_file"): lambda: secrets.token_hex(32).encode(),
}


def ensure_generated_secrets(folder: Path, vault: Vault | None) -> None:
    """meshctl makes the munge key and MLflow's password itself, once, atomically (0600 from the
    start; encrypted with a vault, so no clear copy is written): `init` does, and every run after
    it makes one that is missing, before Ansible starts (a dry run's copy tasks find them)."""
    for (role, variable), make in GENERATED.items():
        path = folder / resources.secret_file_name(role, variable)
        if not path.exists():
            write_secret(path, make(), vault)
    bump_generation(folder, vault)  # a key made (or put back by hand) is a generation of its own


# The secrets' generation (secrets/generation.json): a number that grows with each new munge key
# (made, or rotated: rotate-munge-key renews the MLflow accounts' key with it), and the key's
# fingerprint. Each converge hands it to the head (``mesh_secrets_generation``), which records it
# and refuses a run whose generation is older than its own, or the same with another key: an
# older copy of the mesh folder (a second laptop, a backup) would put an old key back.
GENERATION_FILE = "generation.json"
MUNGE_KEY = ("munge", "munge_key_file")


def fingerprint(folder: Path, vault: Vault | None) -> str:
    """The munge key's fingerprint (SHA-256, 16 hex digits): which key, never the key."""
    path = folder / resources.secret_file_name(*MUNGE_KEY)
    return hashlib.sha256(read_secret(path, vault)).hexdigest()[:16] if path.is_file() else ""


def _recorded(folder: Path) -> tuple[int, str]:
    try:
        data = json.loads((folder / GENERATION_FILE).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            return 0, ""
        return max(0, int(data.get("generation", 0))), str(data.get("fingerprint", ""))
    except (OSError, ValueError, TypeError):
        return 0, ""


def generation(folder: Path, vault: Vault | None) -> tuple[int, str]:
    """(the generation number this mesh folder's secrets are, the munge key's fingerprint)."""
    return _recorded(folder)[0], fingerprint(folder, vault)


def bump_generation(folder: Path, vault: Vault | None) -> int:
    """The munge key written now has its generation: one more than the last one's, once per key
    (a key already recorded keeps its number: a rotation resumed bumps nothing twice)."""
    number, recorded = _recorded(folder)
    if number and recorded == fingerprint(folder, vault):
        return number
    number += 1
    data = {"generation": number, "fingerprint": fingerprint(folder, vault),
            "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    atomic_write(folder / GENERATION_FILE, (json.dumps(data) + "\n").encode(), mode=0o600)
    return number


def generation_said(folder: Path, vault: Vault | None) -> str:
    """What a run hands the head: ``NUMBER:FINGERPRINT``."""
    number, print_ = generation(folder, vault)
    return f"{number}:{print_}"
