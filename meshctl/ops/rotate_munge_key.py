"""`meshctl rotate-munge-key`: the mesh's munge key (made once with the other secrets) replaced.

Whoever holds the key can act as any user towards Slurm on every node. A node that left the mesh
while it could not be reached (a rented machine gone back to its provider, a hostile one) still
holds it: rotating gives every active node a new key, so the old one opens nothing.
"""

from __future__ import annotations

from pathlib import Path

from meshctl import resources, runner, session, vault
from meshctl.errors import InventoryError, PartialError
from meshctl.mesh import Mesh
from meshctl.model import head_of
from meshctl.ops.work import Work

MUNGE_KEY = ("munge", "munge_key_file")  # vault.GENERATED's entry: the one place a key is made
# The key the MLflow account holders' passwords are derived from: renewed with the munge key, so a
# node that left keeps no working account either.
ACCOUNTS_KEY = ("mlflow", "mlflow_accounts_key_file")


def key_path(mesh: Mesh) -> Path:
    """secrets/<the file the munge role's munge_key_file names>."""
    return mesh.secrets / resources.secret_file_name(*MUNGE_KEY)


def rotate(w: Work, progress, verbosity: int = 0) -> runner.RunResult:
    """Store a new key (0600, vault-encrypted when the mesh has a vault) and install it on every
    active node (playbooks/rotate_munge_key.yml: one munged restart per node, in one round); renew
    the MLflow accounts' key too, so every account holder gets a new password on the server and in
    their account file on each node reached (the old passwords stop working).

    Unreachable nodes keep the old key, so they cannot talk to Slurm until `meshctl apply --limit
    NODE` gives them the new one: they are listed (exit 7, partial); the head unreachable is an error.
    """
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    members = [n for n in nodes if n.state == "active"]
    head = head_of(nodes)
    if head not in members:
        raise InventoryError("the head is not active yet", hint="run `meshctl apply` first; it makes the first key")
    vault.write_secret(key_path(mesh), vault.GENERATED[MUNGE_KEY](), vault.for_mesh(mesh_vars))
    accounts_key = mesh.secrets / resources.secret_file_name(*ACCOUNTS_KEY)
    vault.write_secret(accounts_key, vault.GENERATED[ACCOUNTS_KEY](), vault.for_mesh(mesh_vars))
    result = w.run("rotate_munge_key.yml", progress, targets=members, verbosity=verbosity)
    if result.failed or head.name in result.unreachable:
        runner.raise_for(result, "the new key is stored; fix the problem shown and run `meshctl rotate-munge-key` "
                         "again (or `meshctl apply`, which installs it too)", done="no node has the new key for "
                         "sure; it is kept pending")  # fmt: skip
    unreachable = session.unreachable_rows(result)
    if unreachable:
        raise PartialError(
            f"the new munge key is on {len(members) - len(unreachable)} node(s); "
            f"{len(unreachable)} could not be reached: {', '.join(unreachable)}",
            hint="they cannot talk to Slurm until they have it: start them and run `meshctl apply --limit NODE`",
            unreachable=unreachable,
            todo="start it, then `meshctl apply --limit {node}`; or `meshctl remove-node {node} --force`",
        )
    return result
