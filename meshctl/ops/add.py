"""`meshctl add-node`: everything about each new machine checked first (``plan_add``, ``plan_adds``),
then the new nodes and the head converged in one run, and no other node contacted (``add_node``)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from meshctl import cloud, runner, tailnet
from meshctl.errors import MeshctlError, PartialError, UsageError, unreachable
from meshctl.model import Node, check_name, head_of, parse_target
from meshctl.ops.joining import PreflightReport, mesh_address_for, require_passed, run_preflight, sanitize_name
from meshctl.ops.work import Work
from meshctl.ssh import CONNECT_TIMEOUT

THIRD_PARTY_HOST = cloud.THIRD_PARTY_HOST  # said before a Community Cloud pod is added (meshctl/cloud.py)


@dataclass
class AddPlan:
    node: Node
    report: PreflightReport
    resumed: bool = False
    cloud: str = ""  # a Runpod pod's cloud type (SECURE, COMMUNITY), when added as PROVIDER:NAME


def plan_add(
    w: Work,
    target_text: str,
    name: str | None,
    provider: str | None,
    ssh_key: str | None,
    address: str | None,
    timeout: int = CONNECT_TIMEOUT,
) -> AddPlan:
    """Validate everything about a new node before touching anything; raise on any problem.

    TARGET_TEXT is USER@HOST:PORT, or PROVIDER:NAME (an instance of a configured provider: its
    SSH address, user and provider come from the provider's API, and the node records it).
    """
    instance, cloud_type = None, ""
    mesh, nodes = w.mesh, w.nodes
    rented = cloud.target_of(mesh, w.mesh_vars, target_text)
    if rented is not None:
        target_text, api_provider, instance, _pod, cloud_type = rented
        if provider not in (None, api_provider):
            raise UsageError(f"--provider {provider} contradicts the instance's provider {api_provider}",
                             hint="leave --provider out: the provider's API says where it runs")  # fmt: skip
        provider = api_provider
    target = parse_target(target_text)
    if name is not None:
        check_name(name)
    if ssh_key and not Path(ssh_key).is_file():
        raise UsageError(f"--ssh-key {ssh_key}: no such file")
    same_host = [n for n in nodes if n.host == target.host and n.port == target.port]
    if same_host and name is None and same_host[0].state == "pending":
        name = same_host[0].name  # an add-node that failed: the same command resumes the node it recorded
    if same_host and (name is None or same_host[0].name != name or same_host[0].state == "active"):
        existing = same_host[0]
        raise UsageError(
            f"{target.host}:{target.port} is already in the mesh as {existing.name} ({existing.state})",
            hint="each machine joins once; use `meshctl apply` to converge it again",
        )
    if name is not None:
        clash = next((n for n in nodes if n.name == name), None)
        if clash is not None and not (clash.state == "pending" and clash.host == target.host):
            raise UsageError(f"a node named {name} is already in the mesh ({clash.state})", hint="pick another --name")
    report = run_preflight(mesh, target, ssh_key, provider, timeout)
    require_passed(report)
    chosen = name or sanitize_name(report.result.facts.get("hostname", ""))
    if not chosen:
        raise UsageError(f"{target.host} reported no usable hostname", hint="pass --name NAME")
    check_name(chosen)
    clash = next((n for n in nodes if n.name == chosen), None)
    resumed = clash is not None and clash.state == "pending" and clash.host == target.host
    if clash is not None and not resumed:
        raise UsageError(f"a node named {chosen} is already in the mesh ({clash.state})", hint="pass --name NAME")
    report.name = chosen
    node = Node(
        name=chosen,
        host=target.host,
        user=target.user,
        port=target.port,
        ssh_key=str(Path(ssh_key).resolve()) if ssh_key else None,
        provider=report.provider,
        roles=["compute"],
        state="pending",
        mesh_address=mesh_address_for(target.host, address),
        pod=report.result.pod,
        instance=instance,
        since=int(time.time()) if instance else None,
    )
    node.validate()
    return AddPlan(node, report, resumed, cloud_type)


def plan_adds(
    w: Work,
    targets: list[str] | tuple[str, ...],
    name: str | None,
    provider: str | None,
    ssh_key: str | None,
    address: str | None,
    on_plan=None,
    timeout: int = CONNECT_TIMEOUT,
) -> list[AddPlan]:
    """``plan_add`` for each of TARGETS, all of them before anything is written; raise on any problem.

    ``--name`` and ``--address`` name one machine, so they go with one target only. Two targets
    that are the same machine, or whose machines report the same hostname, are refused: nothing is
    recorded and no node is touched. ON_PLAN, when given, is called with each plan as it passes
    (the command shows its preflight table).
    """
    if not targets:
        raise UsageError("no machine to add", hint="name one or more: meshctl add-node root@HOST [root@HOST ...]")
    if len(targets) > 1 and (name is not None or address is not None):
        option = "--name" if name is not None else "--mesh-address"
        raise UsageError(
            f"{option} names one machine, and {len(targets)} were given",
            hint=f"leave {option} out (each node is named by its hostname) or add the machines one by one",
        )
    # Every machine's preflight at once: each problem of each is said, not the first one's only.
    with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        futures = [pool.submit(plan_add, w, target, name, provider, ssh_key, address, timeout) for target in targets]
    outcomes: list[AddPlan | MeshctlError] = []
    for future in futures:
        try:
            outcomes.append(future.result())
        except MeshctlError as exc:
            outcomes.append(exc)
    refused = [(t, o) for t, o in zip(targets, outcomes, strict=True) if isinstance(o, MeshctlError)]
    if refused:
        raise _refused_together(refused, len(targets))
    plans: list[AddPlan] = []
    for plan in outcomes:
        for earlier in plans:
            if (earlier.node.host, earlier.node.port) == (plan.node.host, plan.node.port):
                raise UsageError(f"{plan.node.host}:{plan.node.port} is given twice", hint="name each machine once")
            if earlier.node.name == plan.node.name:
                raise UsageError(
                    f"{earlier.node.host} and {plan.node.host} both report the hostname {plan.node.name}",
                    hint="add them one by one, each with --name NAME",
                )
        if on_plan is not None:
            on_plan(plan)
        plans.append(plan)
    return plans


def _refused_together(refused: list[tuple[str, MeshctlError]], count: int) -> MeshctlError:
    """One outcome for the machines add-node cannot take: the unreachable ones together (exit 7),
    else the first refusal, naming every other one too; nothing was recorded or changed."""
    if len(refused) == 1:
        return refused[0][1]
    lost = [exc for _t, exc in refused if isinstance(exc, PartialError)]
    if len(lost) == len(refused):
        rows = {k: v for exc in lost for k, v in exc.unreachable.items()}
        todos = {k: exc.todo_for(k) for exc in lost for k in exc.unreachable}
        return unreachable(f"nothing was changed; {len(refused)} of {count} machines cannot be added", rows,
                           runner.again(), todos=todos)  # fmt: skip
    first = next(exc for _t, exc in refused if not isinstance(exc, PartialError))
    others = "; ".join(f"{t}: {exc.message}" for t, exc in refused if exc is not first)
    first.message = f"{first.message} (and {len(refused) - 1} more of the {count} machines: {others})"
    first.args = (first.message,)
    return first


def add_node(w: Work, plans, progress, dry_run=False, verbosity=0):
    """Configure the new nodes and the head only, in one run; mark them active on success.

    PLANS is one ``AddPlan`` or a list of them. No other node is contacted: the head renders
    cluster-wide files from the records and the recorded facts of the others. A failed run leaves
    every new node pending; the same command resumes them all.
    """
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    plans = [plans] if isinstance(plans, AddPlan) else list(plans)
    added = [plan.node for plan in plans]
    names = {node.name for node in added}
    others = [n for n in nodes if n.name not in names]
    everyone = [*others, *added]
    head = head_of(everyone)
    retry = "fix the problem and run `meshctl add-node " + " ".join(f"{n.user}@{n.host}:{n.port}" for n in added)
    retry += (f" --name {added[0].name}` again" if len(added) == 1 else "` again") + "; "
    retry += f"the {'node is' if len(added) == 1 else 'nodes are'} recorded as pending until it succeeds"
    targets = [head, *added]
    # A head converged before gets what the new nodes change on it, not a repair of its own.
    settled = [head] if head.state == "active" and head.name not in names else []
    if dry_run:
        # The nodes are not written to mesh.yml: the run's inventory carries their whole records.
        result = Work(mesh, everyone, mesh_vars).run("site.yml", progress, targets=targets, check=True, diff=True,
                                                     verbosity=verbosity, settled=settled)  # fmt: skip
        runner.raise_for(result, "the dry run found a problem; nothing was changed", head=head.name)
        return result
    w.save(everyone)
    result = w.run("site.yml", progress, targets=targets, verbosity=verbosity, settled=settled)
    runner.raise_for(result, retry, done=f"the {'node stays' if len(added) == 1 else 'nodes stay'} pending",
                     head=head.name)  # fmt: skip
    for node in targets:
        node.state = "active"
    recorded = tailnet.record_addresses(targets, result.reports, everyone, tailnet.tailnet_cidr(mesh))
    result.notes = [*result.notes, *recorded]
    w.save()
    return result
