"""`meshctl apply`: converge the mesh (or named nodes and the head), the drift repair; rented nodes
their provider moved are followed first, and nodes Slurm stopped while idle are said, not failed."""

from __future__ import annotations

from meshctl import burst, cloud, core, headcopy, hostkeys, runner, session, slurm, tailnet
from meshctl.errors import UsageError
from meshctl.model import Node, head_of
from meshctl.ops import status
from meshctl.ops.work import Work


def follow_moves(w: Work, progress, check: bool = False, head_record=None) -> list[str]:
    """Rented nodes their provider now runs at another SSH address or port (a Runpod pod started
    again, a Paperspace machine's new public IP) are recorded there before a run reaches them, the
    host keys known for the old address carried to the new one (the machine must still show one
    of them). A Lambda node the head launched again (a new instance, named as the node) is
    recorded as that instance only when the head recorded launching that very instance (its
    relaunch record, ``HEAD_RECORD(node_name)``, read from the head over SSH by default), and then
    with the host keys the head met on it: anyone who can launch in the account can name an
    instance after a node, and it would be sent the mesh's keys. A pod the head put on a new pod of
    its volume (its host had no GPU left) is followed by name with the host keys known for it carried
    over: it keeps them on its volume, and SSH refuses a machine that shows none. A dry run says so
    and records nothing. Returns the names of the nodes moved."""
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    if check or not any(node.instance for node in nodes) or not cloud.configured(mesh):
        return []
    moves, problems = cloud.moved(mesh, nodes, mesh_vars)
    for provider, why in problems.items():
        progress.note(f"{provider}: could not ask where its instances run now ({why}); addresses as recorded")
    if head_record is None:

        def head_record(name):
            return headcopy.read_record(mesh, head_of(nodes), mesh_vars, name)

    followed = []
    for node, host, port, ref in moves:
        provider = node.instance.split(":", 1)[0]
        if ref != node.instance and provider in cloud.REPLACED:
            # The head's power program put the node on a new pod of its volume (its host had no GPU
            # left): the pod shows the node's host keys, kept there, or SSH refuses it.
            if not hostkeys.keys_of(mesh.known_hosts, node.host, node.port):
                progress.note(f"{node.name}: {provider} runs {ref} at {host}:{port}, named {node.name}, and no "
                              f"host key is known for it: not taken for {node.name}; if it is the node, "
                              f"`meshctl remove-node {node.name}` then `meshctl add-node`")  # fmt: skip
                continue
            carried = hostkeys.carry(mesh.known_hosts, (node.host, node.port), (host, port))
            progress.note(f"{node.name}: {provider} runs it as {ref} at {host}:{port} now, a new instance of its "
                          f"volume (recorded {node.instance} at {node.host}:{node.port}); recorded there, "
                          f"reached only if it shows one of the {carried} known host key(s)")  # fmt: skip
        elif ref != node.instance:
            record = head_record(node.name)
            if not record or record["instance"] != ref:
                progress.note(f"{node.name}: {provider} runs {ref} at {host}:{port}, named {node.name}, but the "
                              f"head recorded no launch of it: not taken for {node.name} (its recorded "
                              f"{node.instance} is gone); if you launched it, `meshctl remove-node "
                              f"{node.name}` then `meshctl add-node`")  # fmt: skip
                continue
            hostkeys.forget(mesh.known_hosts, node.host, node.port)
            hostkeys.record(mesh.known_hosts, host, port, record["host_keys"])
            progress.note(f"{node.name}: launched again by the head as {ref} at {host}:{port} (recorded "
                          f"{node.instance} at {node.host}:{node.port}); recorded there, with the host "
                          f"key(s) the head met on it")  # fmt: skip
        else:
            carried = hostkeys.carry(mesh.known_hosts, (node.host, node.port), (host, port))
            progress.note(f"{node.name}: {provider} runs it at {host}:{port} now "
                          f"(recorded {node.host}:{node.port}); recorded there"
                          + (f", its {carried} known host key(s) carried over" if carried else ""))  # fmt: skip
        was = node.move_to(host, port, ref)
        followed.append(node.name)
        if was:
            progress.note(f"{node.name}: mesh address {was} -> {host} (its SSH address: no tailnet)")
    if followed:
        w.save()
    return followed


def follow_pools(w: Work, progress, check: bool = False, head_record=None) -> list[str]:
    """A burst pool's machine the head rented, running now, is taken into mesh.yml as its node, only
    with the head's record of renting that very instance (anyone who can launch in the account can
    name one after a pool node) and with the host keys the head met on it, reached with the key
    that reaches the head. A dry run records nothing. Returns the nodes taken."""
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    every = burst.pools(mesh_vars)
    if check or not every or not cloud.configured(mesh):
        return []
    members = core.mesh_burst.pool_nodes(every)
    missing = {name for name in members if not any(n.name == name for n in nodes)}
    providers = core.mesh_burst.burst_providers(every, cloud.configured(mesh))
    found, problems = burst.live_named(mesh, mesh_vars, providers, missing) if missing else ([], {})
    for provider, why in problems.items():
        progress.note(f"{provider}: could not ask which pool machines run ({why})")
    head = head_of(nodes)
    if head_record is None:

        def head_record(name):
            return headcopy.read_record(mesh, head, mesh_vars, name)

    taken = []
    for inst in sorted(found, key=lambda i: i["name"]):
        name, ref = inst["name"], cloud.instance_ref(inst)
        if inst["status"] != "running" or not inst["ssh_host"] or not inst["ssh_port"] or name in taken:
            continue
        record = head_record(name)
        if not record or record["instance"] != ref:
            progress.note(f"{name}: {ref} runs under pool {members[name]['name']}'s node name, but the head "
                          "recorded no rent of it: not taken (`meshctl machines` shows it)")  # fmt: skip
            continue
        hostkeys.record(mesh.known_hosts, inst["ssh_host"], int(inst["ssh_port"]), record["host_keys"])
        since = record["since"] if isinstance(record.get("since"), int) else None
        nodes.append(Node(name, inst["ssh_host"], inst["ssh_user"] or "root", int(inst["ssh_port"]), head.ssh_key,
                          inst["provider"], ["compute"], "active", record.get("mesh_address"),
                          instance=ref, since=since))  # fmt: skip
        progress.note(f"{name}: pool {members[name]['name']}'s machine {ref} at {inst['ssh_host']}, rented by the "
                      "head, taken into mesh.yml with the host key(s) the head met on it")  # fmt: skip
        taken.append(name)
    if taken:
        w.save()
    return taken


def apply(w: Work, progress, limit=None, check=False, diff=False, verbosity=0):
    """Converge the mesh (or the nodes named by ``limit`` and the head): the drift repair.

    With ``limit``, a head converged before and not named in it is settled (``session.run``): it
    gets what the named nodes' membership changes on it (Slurm's files, the share's exports, the
    names, the power plan), not a repair of its own, which `apply` or `--limit HEAD` makes.

    Rented nodes their provider moved are recorded at their new address first (follow_moves), and
    burst pools' machines the head rented taken in (follow_pools). Nodes that cannot be reached are
    reported (exit 'partial'); the others are converged.
    """
    follow_pools(w, progress, check)
    follow_moves(w, progress, check)
    mesh, nodes = w.mesh, w.nodes
    targets, settled = None, []
    if limit:
        wanted = [part.strip() for part in limit.split(",") if part.strip()]
        unknown = [w for w in wanted if w not in {n.name for n in nodes}]
        if unknown:
            names = ", ".join(unknown)
            raise UsageError(f"--limit names no node of the mesh: {names}", hint="`meshctl status` lists the nodes")
        head = head_of(nodes)
        targets = [head, *(n for n in nodes if n.name in wanted and n is not head)]
        settled = [head] if head.name not in wanted and head.state == "active" else []
    result = w.run("site.yml", progress, targets=targets, check=check, diff=diff, verbosity=verbosity,
                   settled=settled)  # fmt: skip
    reached = [n for n in (targets or nodes) if result.succeeded(n.name)]
    head_lost = head_of(nodes).name in result.unreachable
    partial = not result.ok and not result.failed and bool(result.unreachable) and not head_lost
    resting = {}
    if partial:  # a node Slurm stopped while idle is meant to be off: skipped and said, not a failure
        resting = resting_nodes(w, result.unreachable)
        for name, why in resting.items():
            progress.note(f"{name}: {why}; not changed: a job for it (or `scontrol update nodename={name} "
                          f"state=power_up` on the head) starts it, then `meshctl apply --limit {name}`")  # fmt: skip
    if not partial:
        runner.raise_for(result, f"fix the problem shown and run `{runner.again('meshctl apply')}` again",
                         head=head_of(nodes).name)  # fmt: skip
    if not check:
        recorded = tailnet.record_addresses(reached, result.reports, nodes, tailnet.tailnet_cidr(mesh))
        result.notes = [*result.notes, *recorded]
        changed = bool(recorded)
        for node in reached:
            if node.state == "pending":
                node.state, changed = "active", True
        if changed:
            w.save()
    if partial and set(result.unreachable) - set(resting):
        session.raise_partial(mesh, nodes, result, f"converged {len(reached)} node(s)", resting=resting)
    return result


def resting_nodes(w: Work, names) -> dict[str, str]:
    """Of the nodes ``names`` (SSH could not reach them), those Slurm stopped while idle or is
    starting, with why: one read of the head's Slurm view (playbooks/status.yml on the head)."""
    result = status.read_status(w, status.STATUS_CONNECT_TIMEOUT, [head_of(w.nodes)])
    controller = next((r for r in result.records.values() if "slurm_nodes" in r), {})
    slurm_nodes = controller.get("slurm_nodes") or {}
    resting = {name: slurm.resting_state(slurm_nodes.get(name) or {}) for name in names}
    return {name: why for name, why in resting.items() if why}
