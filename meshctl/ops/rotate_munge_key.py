"""`meshctl rotate-munge-key`: the mesh's munge key (made once with the other secrets) replaced.

Whoever holds the key can act as any user towards Slurm on every node. A node that left the mesh
while it could not be reached (a rented machine gone back to its provider, a hostile one) still
holds it: rotating gives every active node a new key, so the old one opens nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

from meshctl import errors, resources, runner, session, vault
from meshctl.errors import Interrupted, InventoryError
from meshctl.mesh import Mesh, atomic_write
from meshctl.model import head_of
from meshctl.ops.work import Work

MUNGE_KEY = vault.MUNGE_KEY  # vault.GENERATED's entry: the one place a key is made
# The key the MLflow account holders' passwords are derived from: renewed with the munge key, so a
# node that left keeps no working account either.
ACCOUNTS_KEY = ("mlflow", "mlflow_accounts_key_file")
PENDING = vault.ROTATION_PENDING  # in secrets/: see pending_marker


def key_path(mesh: Mesh) -> Path:
    """secrets/<the file the munge role's munge_key_file names>."""
    return mesh.secrets / resources.secret_file_name(*MUNGE_KEY)


def pending_marker(mesh: Mesh) -> Path:
    """secrets/.munge-key-rotation: a rotation begun whose key is not yet on every node reached (a
    dot-file: the head's copy of the secrets leaves it out)."""
    return mesh.secrets / PENDING


def rotate(w: Work, progress, verbosity: int = 0) -> tuple[runner.RunResult, bool]:
    """Store a new key (0600, vault-encrypted when the mesh has a vault) and install it on every
    active node (playbooks/rotate_munge_key.yml: one munged restart per node, in one round); renew
    the MLflow accounts' key too, so every account holder gets a new password on the server and in
    their account file on each node reached (the old passwords stop working). Returns the run and
    whether it finished a rotation begun before.

    The new keys stay pending (``pending_marker``) until the run has ended on the head: a run
    interrupted, failed, or whose head did not answer leaves them pending, and the next
    rotate-munge-key installs that key rather than making another. Unreachable nodes keep the old
    key, so they cannot talk to Slurm until `meshctl apply --limit NODE` gives them the new one: they
    are listed (exit 7, partial); the head unreachable is the same outcome, the key still pending.
    """
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    members = [n for n in nodes if n.state == "active"]
    head = head_of(nodes)
    if head not in members:
        raise InventoryError("the head is not active yet", hint="run `meshctl apply` first; it makes the first key")
    marker = pending_marker(mesh)
    resumed = marker.is_file()
    if not resumed:  # the marker first: a stop between it and the keys leaves a rotation to finish, not two keys
        marker.parent.mkdir(mode=0o700, exist_ok=True)
        atomic_write(marker, f"begun {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n".encode(), mode=0o600)
        vault.write_secret(key_path(mesh), vault.GENERATED[MUNGE_KEY](), vault.for_mesh(mesh_vars))
        accounts_key = mesh.secrets / resources.secret_file_name(*ACCOUNTS_KEY)
        vault.write_secret(accounts_key, vault.GENERATED[ACCOUNTS_KEY](), vault.for_mesh(mesh_vars))
    vault.bump_generation(mesh.secrets, vault.for_mesh(mesh_vars))  # the head takes it, and refuses older
    finish = "run `meshctl rotate-munge-key` again: it installs the pending key (no other is made)"
    try:
        result = w.run("rotate_munge_key.yml", progress, targets=members, verbosity=verbosity, rotating=True)
    except Interrupted as exc:
        exc.hint = f"the new munge key is pending (nodes reached may have it, the others the old one); {finish}"
        raise
    if result.failed or head.name in result.unreachable:
        runner.raise_for(result, f"the new key is pending; fix the problem shown and {finish}",
                         done=f"the new munge key is pending, not on every node; {finish}", head=head.name)  # fmt: skip
    marker.unlink(missing_ok=True)  # on every node reached: what is left is each unreachable node's own apply
    unreachable = session.unreachable_rows(result)
    if unreachable:
        raise errors.unreachable(
            f"the new munge key is on {len(members) - len(unreachable)} node(s); the others cannot talk to Slurm "
            "until they have it", unreachable, f"meshctl apply --limit {','.join(unreachable)}")  # fmt: skip
    return result, resumed
