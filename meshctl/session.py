"""The one way meshctl runs a playbook on a mesh: the Ansible session.

Every operation (add, apply, remove, rotate, doctor, usage, status -v) runs its playbook through
``run``: the inventory of the whole mesh from the store (records, recorded facts, secrets by path),
the mesh's vault, the head's control variables (its copy of meshctl, for a node it relaunches),
the run's events (``runner``), and, after a run that converged nodes, the hardware facts and the
status requests each node reported, checked and recorded. ``runner.run_playbook`` below it knows
Ansible and nothing of a mesh.
"""

from __future__ import annotations

from meshctl import errors, headcopy, hostkeys, quickread, runner, settings, vault
from meshctl.errors import InventoryError
from meshctl.mesh import Mesh
from meshctl.model import Node

GENERATION_VAR = "mesh_secrets_generation"  # NUMBER:FINGERPRINT (vault.generation_said), read by role munge


def run(
    mesh: Mesh,
    nodes: list[Node],
    mesh_vars: dict,
    playbook: str,
    progress,
    targets: list[Node] | None = None,
    leaving: list[Node] | tuple = (),
    check: bool = False,
    diff: bool = False,
    verbosity: int = 0,
    extravars: dict | None = None,
    converge: bool = True,
    mitogen: bool = True,
    connect_timeout: int | None = None,
    stream: bool = True,
    rotating: bool = False,
    settled: list[Node] | tuple = (),
) -> runner.RunResult:
    """Run a playbook on ``targets`` (default: every node) with the inventory of the whole mesh.

    Nodes outside ``targets`` are in the inventory (their records and recorded facts) but are
    never contacted. A run that converges (``converge``: site.yml and the other playbooks that
    change nodes) has its pending targets in their groups and hands the head its control variables;
    after it, each node that finished without a failure has its hardware facts and its status
    request recorded in the mesh directory. A read (``converge=False``: status, usage, the auth
    key's rotation) records nothing. ``mitogen``, ``connect_timeout`` and ``stream`` are
    ``runner.run_playbook``'s. ``settled`` targets (the head, converged before, in an add-node or an
    ``apply --limit`` of other nodes) get only what the other targets' membership changes on them
    (group ``settled``: site.yml's steps for the mesh's membership, not their own drift repair).
    """
    if converge and not rotating and targets is not None and {n.name for n in targets} < {n.name for n in nodes} \
            and (mesh.secrets / vault.ROTATION_PENDING).is_file():  # fmt: skip
        # Some nodes would get the rotation's new key and the others keep the old: Slurm split in two.
        raise InventoryError(
            "a munge key rotation was begun and not finished: a run on some nodes would give them the new key "
            "and leave the others on the old one",
            hint="run `meshctl rotate-munge-key` first: it installs the pending key on every node, then this",
        )
    limit = None
    if targets is not None:
        limit = runner.limit_to(n.name for n in [*targets, *leaving])
    if converge:  # the roles read them (dry runs too); a read makes nothing
        secrets = settings.secrets_problems(mesh.path)  # what `meshctl check` says, before any node is reached
        if secrets:
            more = f" (and {len(secrets) - 1} more: `meshctl check` lists them)" if len(secrets) > 1 else ""
            raise InventoryError(f"{mesh.path}/{secrets[0]}{more}", hint=secrets[0].hint)
        vault.ensure_generated_secrets(mesh.secrets, vault.for_mesh(mesh_vars))
    progress = progress or runner.Progress()
    converging = {n.name for n in targets} if converge and targets is not None else None
    inventory = mesh.run_inventory(nodes, mesh_vars, leaving, converging, {n.name for n in settled})
    if converge:  # Lambda nodes: the head relaunches them with its copy of meshctl
        inventory["all"]["vars"].update(headcopy.control_vars(nodes, mesh_vars))
        # The secrets' generation: the head records it, and refuses an older copy's (role munge).
        inventory["all"]["vars"][GENERATION_VAR] = vault.generation_said(mesh.secrets, vault.for_mesh(mesh_vars))
    for name, why in sorted(mesh.refused_facts.items()):
        if name in {n.name for n in nodes}:
            progress.note(
                f"{name}: its recorded facts ({mesh.facts_dir.name}/{name}.json) are refused and left out ({why}); "
                f"they are gathered again when {name} is converged (`meshctl apply --limit {name}`)"
            )
    result = runner.run_playbook(
        playbook,
        inventory,
        mesh.path,
        limit=limit,
        check=check,
        diff=diff,
        verbosity=verbosity,
        known_hosts=mesh.known_hosts,
        progress=progress,
        extravars=extravars,
        vault_id=mesh_vars.get(vault.MESH_VAR),
        mitogen=mitogen,
        connect_timeout=connect_timeout,
        stream=stream,
    )
    if converge and not check:
        names = {n.name for n in nodes}
        for host, hw in result.hw.items():
            if host in names and result.succeeded(host):
                mesh.record_facts(host, hw)
        for host, request in result.status_requests.items():  # what `status` reads there from now on
            if host in names and result.succeeded(host) and quickread.request_problem(request) is None:
                mesh.record_status_request(host, request)
    return result


def unreachable_rows(result: runner.RunResult) -> dict[str, str]:
    """Unreachable node -> what Ansible said."""
    said = {f.host: f.message for f in result.failures}
    return {host: said.get(host, "no answer") for host in result.unreachable}


def raise_partial(mesh: Mesh, nodes: list[Node], result: runner.RunResult, done: str, resting=()) -> None:
    """Exit 'partial' when only some nodes could not be reached; a real failure exits 5.

    A node whose SSH host key changed is named with both fingerprints and the command that
    accepts the new key: never trusted silently, never left to a hand edit of known_hosts.
    Nodes in ``resting`` (stopped while idle, already said) are not counted.
    """
    unreachable = {name: said for name, said in unreachable_rows(result).items() if name not in resting}
    todos = {}
    by_name = {n.name: n for n in nodes}
    for name, said in unreachable.items():
        if name in by_name and hostkeys.is_changed_key(said):
            node = by_name[name]
            unreachable[name], todos[name] = hostkeys.describe_change(name, node.host, node.port, mesh.known_hosts)
    raise errors.unreachable(done, unreachable, f"meshctl apply --limit {','.join(unreachable)}", todos=todos)
