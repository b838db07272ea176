"""`meshctl add-node`: everything about the new machine checked first (``plan_add``), then the node
and the head converged, and no other node contacted (``add_node``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from meshctl import cloud, runner, session, tailnet
from meshctl.errors import UsageError
from meshctl.mesh import Mesh
from meshctl.model import Node, check_name, head_of, parse_target
from meshctl.ops.joining import PreflightReport, mesh_address_for, require_passed, run_preflight, sanitize_name


@dataclass
class AddPlan:
    node: Node
    report: PreflightReport
    resumed: bool = False
    cloud: str = ""  # a Runpod pod's cloud type (SECURE, COMMUNITY), when added as PROVIDER:NAME


def plan_add(
    mesh: Mesh,
    nodes: list[Node],
    target_text: str,
    name: str | None,
    provider: str | None,
    ssh_key: str | None,
    address: str | None,
    mesh_vars: dict | None = None,
) -> AddPlan:
    """Validate everything about a new node before touching anything; raise on any problem.

    TARGET_TEXT is USER@HOST:PORT, or PROVIDER:NAME (an instance of a configured provider: its
    SSH address, user and provider come from the provider's API, and the node records it).
    """
    instance, cloud_type = None, ""
    rented = cloud.target_of(mesh, mesh_vars or {}, target_text)
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
    report = run_preflight(mesh, target, ssh_key, provider)
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
    )
    node.validate()
    return AddPlan(node, report, resumed, cloud_type)


def add_node(mesh: Mesh, nodes: list[Node], mesh_vars: dict, plan: AddPlan, progress, dry_run=False, verbosity=0):
    """Configure the new node and the head only; mark them active on success.

    No other node is contacted: the head renders cluster-wide files from the records and the
    recorded facts of the others.
    """
    others = [n for n in nodes if n.name != plan.node.name]
    everyone = [*others, plan.node]
    head = head_of(everyone)
    retry = f"fix the problem and run `meshctl add-node {plan.node.user}@{plan.node.host}:{plan.node.port}"
    retry += f" --name {plan.node.name}` again; the node is recorded as pending until it succeeds"
    targets = [head, plan.node]
    if dry_run:
        # The node is not written to mesh.yml: the run's inventory carries its whole record.
        result = session.run(mesh, everyone, mesh_vars, "site.yml", progress, targets, check=True, diff=True,
                     verbosity=verbosity)  # fmt: skip
        runner.raise_for(result, "the dry run found a problem; nothing was changed")
        return result
    mesh.save(everyone, mesh_vars)
    result = session.run(mesh, everyone, mesh_vars, "site.yml", progress, targets, verbosity=verbosity)
    runner.raise_for(result, retry)
    for node in targets:
        node.state = "active"
    result.notes = tailnet.record_addresses(targets, result.reports, everyone, tailnet.tailnet_cidr(mesh))
    mesh.save(everyone, mesh_vars)
    return result
