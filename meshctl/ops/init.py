"""`meshctl init`: a new mesh folder with its head (pending until its first converge)."""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
from pathlib import Path

from meshctl import preflight, tailnet, vault
from meshctl.errors import InventoryError, PreflightError, UsageError
from meshctl.mesh import LOCK, Mesh, atomic_write, removed_on_failure
from meshctl.model import Node, check_name, parse_target
from meshctl.ops import work
from meshctl.ops.joining import PreflightReport, mesh_address_for, require_passed, run_preflight, sanitize_name

# A mesh directory is meant to be kept in git: what changes on every run, and keys in clear, stay out.
GITIGNORE = """# Written by meshctl init. Runtime files:
mesh.lock
mesh.yml.bak
.mesh.yml.*
secrets/.*
# Slurm packages meshctl built for nodes of other distributions (large; made again when missing).
packages/
# The output of recent runs (meshctl keeps the last 30).
logs/
"""


GITIGNORE_CLEAR_SECRETS = """# Keys in clear (the munge key, the Tailscale auth key): never in git.
secrets/
"""


GROUP_VARS_ALL = """---
# Mesh-wide settings, read by every role (see each role's README for its variables).
# The tailnet every mesh address lies in (role mesh's default: Tailscale's 100.64.0.0/10).
# mesh_tailnet_cidr: 100.64.0.0/10

# Job users: the same accounts (name, UID, group) on every node and a folder each on the share
# (roles/job_users/README.md). Uncomment, then `meshctl apply`.
# job_users_list:
#   - {name: alice, uid: 2001}

# Job accounting (sacct, sreport): slurmdbd and MariaDB on the head (roles/slurm/README.md).
# slurm_accounting: true
"""


def vault_id(password_file: str | None, given_id: str | None) -> str | None:
    """The vault id ``--vault-password-file`` / ``--vault-id`` name (None: no vault)."""
    return vault.vault_id_from_options(password_file, given_id)


def read_authkey(key_file: str) -> str:
    """The Tailscale auth key in KEY_FILE (``-``: standard input), checked for its shape."""
    return tailnet.read_key(key_file, None)


def authkey_path(mesh: Mesh) -> Path:
    """Where the mesh keeps its Tailscale auth key."""
    return tailnet.key_path(mesh)


def init_mesh(
    path: Path,
    head: str,
    name: str | None,
    ssh_key: str | None,
    provider: str | None,
    address: str | None,
    check: bool = True,
    tailscale_key: str | None = None,
    tags: tuple[str, ...] = (),
    login_server: str | None = None,
    vault_id: str | None = None,
) -> tuple[Mesh, Node, PreflightReport | None]:
    """Create the mesh directory with its head (pending). With a Tailscale key the mesh runs over
    a tailnet: the key is checked before anything is written, then stored in secrets/ (0600)."""
    mesh = Mesh(path)
    if mesh.inventory.exists():
        raise InventoryError(f"{mesh.path} already holds a mesh", hint="use another folder, or add nodes to this one")
    if tailscale_key is not None:
        tailnet.check_key(tailscale_key, list(tags), "--authkey-file")
        tailnet.check_tailnet_options(tags, login_server)
    elif tags or login_server:
        raise UsageError("--tag and --login-server need --authkey-file", hint="pass the tailnet's auth key too")
    if ssh_key and not Path(ssh_key).is_file():
        raise UsageError(f"--ssh-key {ssh_key}: no such file")
    report = None
    if head == "local":
        node = Node(
            name=check_name(name or sanitize_name(socket.gethostname())),
            host="127.0.0.1",
            user=getpass.getuser(),
            provider=provider or "local",
            roles=["head", "compute"],
            mesh_address=mesh_address_for("", address) if address else None,
            connection="local",
        )
        if node.mesh_address is None:
            raise UsageError("a local head needs its mesh address", hint="pass --mesh-address ADDR (its tailnet IPv4)")
    else:
        target = parse_target(head)
        if check:
            report = run_preflight(mesh, target, ssh_key, provider)
            require_passed(report)
            if report.result.pod:
                raise PreflightError(
                    f"{target.user}@{target.host} is a pod (no systemd): it can be a compute node, not the head",
                    hint="make a machine with systemd the head (a VM or your desktop), then add the pod with add-node",
                )
        hostname = report.result.facts.get("hostname", "") if report else ""
        node = Node(
            name=check_name(name or sanitize_name(hostname) or "head"),
            host=target.host,
            user=target.user,
            port=target.port,
            ssh_key=str(Path(ssh_key).resolve()) if ssh_key else None,
            provider=report.provider if report else (provider or "generic"),
            roles=["head", "compute"],
            mesh_address=mesh_address_for(target.host, address),
        )
    created = not mesh.path.exists()
    lock_made = not (mesh.path / LOCK).exists()
    try:
        mesh.path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the mesh folder {mesh.path}: {exc.strerror}",
                         hint="choose a folder you can write") from None  # fmt: skip
    try:
        with work.locked(mesh, "init"), removed_on_failure(mesh.path):  # two inits at once: one creates the mesh,
            # the other is told; a failure removes what this one wrote (the stored key too), nothing else
            return _write_new_mesh(mesh, node, report, tailscale_key, tags, login_server, vault_id)
    except BaseException:
        with contextlib.suppress(OSError):  # the lock file this init made, and the folder it made
            if lock_made:
                (mesh.path / LOCK).unlink()
            if created:
                mesh.path.rmdir()
        raise


def _write_new_mesh(mesh, node, report, tailscale_key, tags, login_server, vault_id):
    if mesh.inventory.exists():
        raise InventoryError(f"{mesh.path} already holds a mesh", hint="use another folder, or add nodes to this one")
    if mesh.secrets.is_symlink() or (mesh.secrets.exists() and not mesh.secrets.is_dir()):
        raise UsageError(f"{mesh.secrets} exists and is not a folder of its own (a link or a file)",
                         hint=f"remove it; meshctl creates {mesh.secrets} (0700) itself")  # fmt: skip
    mesh.secrets.mkdir(mode=0o700, exist_ok=True)
    os.chmod(mesh.secrets, 0o700)
    (mesh.path / "group_vars").mkdir(exist_ok=True)
    mesh_vars = {}
    mesh_vault = None
    if vault_id is not None:  # checked (password readable) by vault.vault_id_from_options
        mesh_vars[vault.MESH_VAR] = vault_id
        mesh_vault = vault.for_mesh(mesh_vars)
    vault.ensure_generated_secrets(mesh.secrets, mesh_vault)
    group_vars = GROUP_VARS_ALL + slurm_major_text(report)
    if tailscale_key is not None:
        tailnet.store_key(mesh, tailscale_key, mesh_vault)
        mesh_vars["mesh_tailscale"] = True
        group_vars += tailnet.group_vars_text(list(tags), login_server)
    atomic_write(mesh.path / "group_vars" / "all.yml", group_vars)
    gitignore = mesh.path / ".gitignore"  # with a vault, the encrypted secrets/ may be committed
    wanted = GITIGNORE + ("" if mesh_vault else GITIGNORE_CLEAR_SECRETS)
    existing = gitignore.read_text(encoding="utf-8") if gitignore.is_file() else None
    atomic_write(gitignore, gitignore_text(existing, wanted))
    mesh.save([node], mesh_vars)
    return mesh, node, report


def gitignore_text(existing: str | None, wanted: str) -> str:
    """A folder's .gitignore with meshctl's entries: WANTED when there is none; else EXISTING with
    the entries it lacks added at its end (a project folder's own .gitignore would otherwise let
    `git add .` commit the munge key)."""
    if existing is None:
        return wanted
    have = {line.strip() for line in existing.splitlines()}
    missing = [line for line in wanted.splitlines() if line and not line.startswith("#") and line not in have]
    if not missing:
        return existing
    return (
        existing
        + ("" if existing.endswith("\n") or not existing else "\n")
        + ("# Added by meshctl init (runtime files, and keys in clear):\n" + "\n".join(missing) + "\n")
    )


def slurm_major_text(report: PreflightReport | None) -> str:
    """The mesh's Slurm major for group_vars/all.yml: what the head's distribution ships."""
    major = preflight.packaged_slurm_major(report.result.facts) if report is not None else None
    if major is None:
        return (
            '\n# The mesh\'s Slurm major release (roles/slurm/README.md, "Mixed distributions"); unset: what\n'
            '# the head\'s distribution ships.\n# slurm_mesh_major: "22.05"\n'
        )
    return (
        "\n# The mesh's Slurm major release, what the head's distribution ships: a node whose distribution\n"
        '# ships another gets this one built for it (roles/slurm/README.md, "Mixed distributions").\n'
        f'slurm_mesh_major: "{major}"\n'
    )
