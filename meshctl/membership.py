"""What meshctl does to a mesh: create it, add, converge, inspect and remove nodes.

The CLI parses arguments and prints; these functions decide and act, raising MeshctlError
subclasses with what went wrong and what to do. Every change to mesh.yml happens under the
mesh lock, and a node is marked ``active`` only after its playbook run succeeded.
"""

from __future__ import annotations

import contextlib
import getpass
import io
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

import netaddr

from meshctl import cloud, hostkeys, preflight, quickread, relaunch, resources, runner, ssh, tailnet, vault
from meshctl.errors import InventoryError, MeshctlError, PartialError, PreflightError, ProviderError, UsageError
from meshctl.mesh import (
    LOCK,
    Mesh,
    Node,
    Target,
    atomic_write,
    check_name,
    node_named,
    parse_target,
    removed_on_failure,
)

SLURM = resources.plugin("module_utils.mesh_slurm")  # Slurm's state words and flags (one place)

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


def mesh_address_for(host: str, given: str | None) -> str:
    """The address Slurm and NFS use: --mesh-address, else the SSH address as IPv4.

    Until the node joins the tailnet (the tailscale role then reports its tailnet IP), the SSH
    address must be one the other nodes can reach.
    """
    if given:
        try:
            return str(netaddr.IPAddress(given, version=4))
        except (netaddr.AddrFormatError, ValueError):
            raise UsageError(f"--mesh-address {given!r} is not an IPv4 address") from None
    try:
        return str(netaddr.IPAddress(host, version=4))
    except (netaddr.AddrFormatError, ValueError):
        pass
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except OSError:
        raise UsageError(f"cannot resolve {host} to an IPv4 address", hint="pass --mesh-address ADDR") from None


def sanitize_name(hostname: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", hostname.split(".")[0].lower()).strip("-")[:63]
    return name.strip("-")


@dataclass
class PreflightReport:
    target: Target
    result: preflight.Preflight
    provider: str
    name: str | None = None


def run_preflight(mesh: Mesh, target: Target, ssh_key: str | None, provider: str | None) -> PreflightReport:
    argv = ssh.ssh_argv(target.host, target.user, target.port, ssh_key, mesh.known_hosts)
    result = preflight.run(argv, target.user, target.host, target.port, mesh.known_hosts, provider=provider)
    if not result.reachable:
        what, fix = result.error
        raise PreflightError(what, hint=fix)
    chosen = provider or preflight.detect_provider(result.facts)
    return PreflightReport(target, result, chosen)


def require_passed(report: PreflightReport) -> None:
    failed = [c for c in report.result.checks if c.blocking and not c.ok]
    if failed:
        first = failed[0]
        names = ", ".join(c.name for c in failed)
        raise PreflightError(
            f"{report.target.user}@{report.target.host} failed preflight ({names}): {first.name} is {first.value}",
            hint=first.hint,
        )


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
        with mesh.lock("init"), removed_on_failure(mesh.path):  # two inits at once: one creates the mesh,
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
    if not (mesh.path / ".gitignore").exists():  # with a vault, the encrypted secrets/ may be committed
        atomic_write(mesh.path / ".gitignore", GITIGNORE + ("" if mesh_vault else GITIGNORE_CLEAR_SECRETS))
    mesh.save([node], mesh_vars)
    return mesh, node, report


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
) -> runner.RunResult:
    """Run a playbook on ``targets`` (default: every node) with the inventory of the whole mesh.

    Nodes outside ``targets`` are in the inventory (their records and recorded facts) but are
    never contacted. After a real run, each node that finished without a failure has its
    hardware facts recorded in the mesh directory.
    """
    limit = None
    if targets is not None:
        limit = runner.limit_to(n.name for n in [*targets, *leaving])
    vault.ensure_generated_secrets(mesh.secrets, vault.for_mesh(mesh_vars))  # dry runs read them too
    progress = progress or runner.Progress()
    inventory = mesh.run_inventory(nodes, mesh_vars, leaving, None if targets is None else {n.name for n in targets})
    inventory["all"]["vars"].update(relaunch.control_vars(nodes, mesh_vars))  # Lambda nodes: the head relaunches
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
    )
    if not check:
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
    names = ", ".join(unreachable)
    raise PartialError(
        f"{done}; {len(unreachable)} node(s) could not be reached: {names}",
        hint="start them (they rejoin Slurm by themselves) and run `meshctl apply --limit NODE`, "
        "or take them out with `meshctl remove-node NODE --force`",
        unreachable=unreachable,
        todo="start it, then `meshctl apply --limit {node}`; or `meshctl remove-node {node} --force`",
        todos=todos,
    )


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
        result = run(mesh, everyone, mesh_vars, "site.yml", progress, targets, check=True, diff=True,
                     verbosity=verbosity)  # fmt: skip
        runner.raise_for(result, "the dry run found a problem; nothing was changed")
        return result
    mesh.save(everyone, mesh_vars)
    result = run(mesh, everyone, mesh_vars, "site.yml", progress, targets, verbosity=verbosity)
    runner.raise_for(result, retry)
    for node in targets:
        node.state = "active"
    result.notes = tailnet.record_addresses(targets, result, everyone, tailnet.tailnet_cidr(mesh))
    mesh.save(everyone, mesh_vars)
    return result


def follow_moves(mesh: Mesh, nodes: list[Node], mesh_vars: dict, progress, check: bool = False,
                 head_record=None) -> list[str]:  # fmt: skip
    """Rented nodes their provider now runs at another SSH address or port (a Runpod pod started
    again, a Paperspace machine's new public IP) are recorded there before a run reaches them, the
    host keys known for the old address carried to the new one (the machine must still show one
    of them). A Lambda node the head launched again (a new instance, named as the node) is
    recorded as that instance only when the head recorded launching that very instance (its
    relaunch record, ``HEAD_RECORD(node_name)``, read from the head over SSH by default), and then
    with the host keys the head met on it: anyone who can launch in the account can name an
    instance after a node, and it would be sent the mesh's keys. A dry run says so and records
    nothing. Returns the names of the nodes moved."""
    if check or not any(node.instance for node in nodes) or not cloud.configured(mesh):
        return []
    moves, problems = cloud.moved(mesh, nodes, mesh_vars)
    for provider, why in problems.items():
        progress.note(f"{provider}: could not ask where its instances run now ({why}); addresses as recorded")
    if head_record is None:

        def head_record(name):
            return relaunch.read_record(mesh, head_of(nodes), mesh_vars, name)

    followed = []
    for node, host, port, ref in moves:
        provider = node.instance.split(":", 1)[0]
        if ref != node.instance:
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
        mesh.save(nodes, mesh_vars)
    return followed


def apply(mesh: Mesh, nodes, mesh_vars, progress, limit=None, check=False, diff=False, verbosity=0):
    """Converge the mesh (or the nodes named by ``limit`` and the head): the drift repair.

    Rented nodes their provider moved are recorded at their new address first (follow_moves).
    Nodes that cannot be reached are reported (exit 'partial'); the others are converged.
    """
    follow_moves(mesh, nodes, mesh_vars, progress, check)
    targets = None
    if limit:
        wanted = [part.strip() for part in limit.split(",") if part.strip()]
        unknown = [w for w in wanted if w not in {n.name for n in nodes}]
        if unknown:
            names = ", ".join(unknown)
            raise UsageError(f"--limit names no node of the mesh: {names}", hint="`meshctl status` lists the nodes")
        targets = [head_of(nodes), *(n for n in nodes if n.name in wanted)]
    result = run(mesh, nodes, mesh_vars, "site.yml", progress, targets, check=check, diff=diff, verbosity=verbosity)
    reached = [n for n in (targets or nodes) if result.succeeded(n.name)]
    head_lost = head_of(nodes).name in result.unreachable
    partial = not result.ok and not result.failed and bool(result.unreachable) and not head_lost
    resting = {}
    if partial:  # a node Slurm stopped while idle is meant to be off: skipped and said, not a failure
        resting = resting_nodes(mesh, nodes, mesh_vars, result.unreachable)
        for name, why in resting.items():
            progress.note(f"{name}: {why}; not changed: a job for it (or `scontrol update nodename={name} "
                          f"state=power_up` on the head) starts it, then `meshctl apply --limit {name}`")  # fmt: skip
    if not partial:
        runner.raise_for(result, "fix the problem shown and run `meshctl apply` again")
    if not check:
        result.notes = tailnet.record_addresses(reached, result, nodes, tailnet.tailnet_cidr(mesh))
        changed = bool(result.notes)
        for node in reached:
            if node.state == "pending":
                node.state, changed = "active", True
        if changed:
            mesh.save(nodes, mesh_vars)
    if partial and set(result.unreachable) - set(resting):
        raise_partial(mesh, nodes, result, f"converged {len(reached)} node(s)", resting=resting)
    return result


def resting_state(in_slurm: dict) -> str | None:
    """Why a node SSH cannot reach is meant to be off (Slurm's view of it: ``state``), or None:
    Slurm's words (collection module_utils ``mesh_slurm.resting``)."""
    return SLURM.resting(in_slurm.get("state") or "")


def resting_nodes(mesh: Mesh, nodes: list[Node], mesh_vars: dict, names) -> dict[str, str]:
    """Of the nodes ``names`` (SSH could not reach them), those Slurm stopped while idle or is
    starting, with why: one read of the head's Slurm view (playbooks/status.yml on the head)."""
    result = read_status(mesh, nodes, mesh_vars, STATUS_CONNECT_TIMEOUT, [head_of(nodes)])
    controller = next((r for r in result.records.values() if "slurm_nodes" in r), {})
    slurm_nodes = controller.get("slurm_nodes") or {}
    resting = {name: resting_state(slurm_nodes.get(name) or {}) for name in names}
    return {name: why for name, why in resting.items() if why}


def head_of(nodes: list[Node]) -> Node:
    heads = [n for n in nodes if "head" in n.roles]
    if not heads:
        raise InventoryError("the mesh has no head", hint="recreate it with `meshctl init --head ...`")
    return heads[0]


# Seconds status waits for a node's SSH connection before it calls it unreachable (`--timeout`):
# a TCP handshake and sshd's banner, a few round trips even over a relayed tailnet path; SSH
# reuses a connection made in the last minute without waiting at all.
STATUS_CONNECT_TIMEOUT = 1


@dataclass
class NodeStatus:
    name: str
    ssh: bool
    munge: str = "?"
    daemon: str = "?"
    slurm: str = "?"
    nfs: str = "?"
    tailnet: str = "-"
    gpus: str = ""
    error: str = ""
    healthy: bool = field(default=False)
    problem: str = ""  # the record's problem code (plugins/filter/node_status.py PROBLEMS), "" when none
    price_per_hour: float | None = None  # what its provider bills for it now (meshctl/cloud.py); None: unknown
    role: str = "compute"  # "head" (the controller, a compute node too when it runs jobs) or "compute"
    autostop: str = "-"  # its idle_stop as written in mesh.yml ("-": never stopped when idle)


def tailnet_text(tailnet: dict | None) -> str:
    """'<BackendState> <IPv4 or -> [userspace]' from a record's tailnet part ('-': not on one)."""
    if not tailnet:
        return "-"
    parts = [str(tailnet.get("backend_state", "?")), tailnet.get("ipv4") or "-"]
    return " ".join(parts + (["userspace"] if tailnet.get("userspace") else []))


def _gres(in_slurm: dict | None) -> str:
    """The GRES sinfo lists for a node ("" for none)."""
    gres = (in_slurm or {}).get("gres")
    return "" if gres in (None, "(null)", "") else gres


# What to do about each problem a status record names (the filter node_status decides which).
ADVICE = {
    "pending": "pending: run `meshctl add-node` or `meshctl apply` to finish it",
    "service": "{detail} not active: `meshctl apply --limit {name}` starts it (`journalctl -u` on the node says why)",
    "userspace": "no TUN device: Slurm goes through Tailscale's proxy, but NFS and NCCL cannot reach the tailnet",
    "tailnet": "tailnet is {detail}, not Running on {address}: `meshctl rotate-authkey --stored` logs it in",
    "share": "the share is {detail}: `meshctl apply --limit {name}` exports or mounts it again",
    "no-nfs-kernel": "kernel cannot mount NFS: jobs here do not see the share",
    "slurm": "Slurm sees it {detail}: `scontrol show node {name}` says why (Reason=); "
    "`scontrol update nodename={name} state=resume` once fixed",
    "pod": "pod: daemons under supervisor, Slurm out through Tailscale's proxy, no NFS mount (docs/usage.md)",
}


def node_status(node: Node, record: dict) -> NodeStatus:
    """One row from the node's status record (checked by health.checked, judged by the filter)."""
    services = record["services"]
    row = NodeStatus(
        node.name,
        True,
        munge=services.get("munge", "?"),
        daemon=", ".join(f"{d} {state}" for d, state in services.items() if d.startswith("slurm")),
        slurm=(record.get("slurm") or {}).get("state", "absent") if "compute" in node.roles else "-",
        nfs=record.get("share") or "?",
        tailnet=tailnet_text(record.get("tailnet")),
        gpus=_gres(record.get("slurm")),
        healthy=record["healthy"],
        problem=record["problem"],
    )
    if row.problem:
        row.error = ADVICE[row.problem].format(name=node.name, address=node.mesh_address,
                                               detail=record.get("detail") or "?")  # fmt: skip
    return row


def unreachable_status(node: Node, is_head: bool, said: str, in_slurm: dict) -> NodeStatus:
    """The row of a node SSH could not reach: the head's Slurm view of it, and advice for its state.

    A node Slurm stopped while idle (power saving: ``idle~``) or is starting for a job (``#``) is
    meant to be unreachable: healthy, and said so.
    """
    row = NodeStatus(node.name, False, slurm=in_slurm.get("state", "?" if is_head else "absent"), gpus=_gres(in_slurm))
    state = SLURM.base(row.slurm)
    reason = in_slurm.get("reason") or ""
    why = f"; Slurm's reason: {reason}" if reason else ""
    if is_head:
        row.error = f"the head cannot be reached ({said}): start it; every node waits for it"
    elif resting_state(in_slurm) and "~" in row.slurm:
        row.healthy = True
        row.error = "stopped while idle (idle_stop): a job for it starts it again"
    elif resting_state(in_slurm):
        row.healthy = True
        row.error = "starting: a job asked for it (Slurm waits up to ResumeTimeout)"
    elif row.slurm.endswith("*") or state in ("down", "absent", "unknown") or "~" in row.slurm:
        row.error = (f"the machine is off or cut off ({said}); Slurm sees it {row.slurm}{why}: start it (it rejoins "
                     f"by itself), or `meshctl remove-node {node.name} --force` if it is gone")  # fmt: skip
    else:  # Slurm has not missed it (yet): it stopped a moment ago, or only its SSH fails
        row.error = (f"SSH fails ({said}) while Slurm still lists it {row.slurm}: it may have just stopped "
                     f"(Slurm notices within minutes), its link is slow (`meshctl status --timeout 5`), or its "
                     f"SSH is broken (a new host key: `meshctl forget-host-key {node.name}`)")  # fmt: skip
    return row


def read_status(mesh: Mesh, nodes: list[Node], mesh_vars: dict, timeout: int, targets: list[Node] | None = None,
                verbosity: int = 0):  # fmt: skip
    """Every target's status record (default: every node): one SSH command per node
    (meshctl/quickread.py) when meshctl knows how Ansible would reach each, else playbooks/status.yml,
    one read per node, judged; with ``verbosity`` always the playbook, whose own output is shown
    (``meshctl status -v``)."""
    if not verbosity:
        quick = quickread.read(mesh, nodes, mesh_vars, timeout, targets)
        if quick is not None:
            return quick
    quiet = runner.Progress() if verbosity else runner.Progress(out=io.StringIO(), live=False)
    result = runner.run_playbook(
        "status.yml",
        mesh.run_inventory(nodes, mesh_vars),
        mesh.path,
        limit=None if targets is None else runner.limit_to(n.name for n in targets),
        known_hosts=mesh.known_hosts,
        progress=quiet,
        vault_id=mesh_vars.get(vault.MESH_VAR),
        mitogen=False,  # one read per node: plain Ansible is faster (docs/benchmarks.md)
        connect_timeout=timeout,  # a stopped machine costs a second, not Ansible's 10
        stream=bool(verbosity),  # a second's run nobody watches: its events at the end
        verbosity=verbosity,
    )
    if result.status == "canceled":  # Ctrl+C: no node was judged, none is to be called down
        runner.raise_for(result, "run it again")
    return result


def status(
    mesh: Mesh,
    nodes: list[Node],
    mesh_vars: dict | None = None,
    timeout: int = STATUS_CONNECT_TIMEOUT,
    verbosity: int = 0,
) -> tuple[list[NodeStatus], str, bool]:
    """One row per node, MLflow's health, and whether everything is healthy.

    Runs playbooks/status.yml: one read per node (module mesh_status), judged into one status
    record per node by the collection's filter node_status; meshctl checks each record's shape,
    words the advice, and says what the head's Slurm knows of a node that did not answer.
    """
    head = head_of(nodes)
    mesh_vars = mesh_vars or {}
    prices = cloud.PriceLookup(mesh, nodes, mesh_vars)  # the providers' answer, while Ansible runs
    result = read_status(mesh, nodes, mesh_vars, timeout, verbosity=verbosity)
    said = {f.host: f.message for f in result.failures}
    controller = next((r for r in result.records.values() if "slurm_nodes" in r), {})
    slurm_nodes = controller.get("slurm_nodes") or {}
    rows = []
    for node in nodes:
        if node.name in result.refused_records:  # a record outside its shape: never shown as sent
            rows.append(NodeStatus(node.name, True, error="reported what meshctl refuses ("
                                   + result.refused_records[node.name] + ")"))  # fmt: skip
        elif node.name in result.records:
            rows.append(node_status(node, result.records[node.name]))
        elif node.name not in result.unreachable and node.name in said:  # reached, but the read failed
            rows.append(NodeStatus(node.name, True, error=f"its status could not be read ({said[node.name]}): "
                                   f"run `meshctl status -v`; the log names the task"))  # fmt: skip
        else:
            rows.append(unreachable_status(node, node is head, said.get(node.name, "did not answer"),
                                           slurm_nodes.get(node.name, {})))  # fmt: skip
    costs, _problems = prices.result()
    by_name = {n.name: n for n in nodes}
    for row in rows:
        row.price_per_hour = costs.get(row.name)
        node = by_name[row.name]
        row.role = "head" if "head" in node.roles else "compute"
        stop = node.extra.get("idle_stop")
        row.autostop = str(stop) if stop not in (None, False, "", 0) else "-"
    mlflow = (result.records.get(head.name) or {}).get("mlflow") or "unreachable"
    sinfo_ok = bool(controller.get("sinfo_ok"))
    return rows, mlflow, all(r.healthy for r in rows) and sinfo_ok and mlflow == "OK"


def remove_node(mesh: Mesh, nodes, mesh_vars, name: str, force: bool, timeout: float, progress, say=print,
                verbosity: int = 0, terminate: bool = False):  # fmt: skip
    """Drain the node and wait for its jobs (head), stop its slurmd and take it off the tailnet (the
    node, when it can be reached), delete it from Slurm and the head's files (head), then from mesh.yml.
    No other node is contacted."""
    node = node_named(nodes, name)
    if "head" in node.roles:
        raise UsageError(f"{name} is the head; removing it would end the mesh", hint="remove the other nodes first")
    if terminate and not node.instance:
        raise UsageError(
            f"--terminate: {name} is no provider's instance meshctl knows of",
            hint="delete the machine where you rented it (nodes added as PROVIDER:NAME record theirs)",
        )
    if terminate:
        cloud.stored_key(mesh, mesh_vars, node.instance.partition(":")[0])  # the account, before anything changes
    head = head_of(nodes)
    remaining = [n for n in nodes if n.name != name]
    extravars = {"slurm_drain_force": bool(force), "slurm_drain_timeout": int(timeout)}
    result = run(mesh, remaining, mesh_vars, "remove_node.yml", progress, [head], leaving=[node], extravars=extravars,
                 verbosity=verbosity)  # fmt: skip
    if result.failed or head.name in result.unreachable:
        retry = f"{name} is still in the mesh; fix the problem and run `meshctl remove-node {name}` again"
        runner.raise_for(result, retry)
    if name in result.unreachable:
        say(
            f"{name}: could not be reached: its slurmd, Tailscale login, munge key and MLflow account were left "
            "as they are; delete the machine at its provider (it would register with Slurm again if it booted), "
            "and run `meshctl rotate-munge-key`: with the mesh's munge key it can act as any user in Slurm"
        )
    mesh.save(remaining, mesh_vars)
    mesh.forget_facts(name)
    say(f"{name}: removed from {mesh.inventory.name}")
    if terminate:
        try:
            cloud.terminate(mesh, mesh_vars, node.instance)
        except MeshctlError as exc:
            raise ProviderError(
                f"{name} left the mesh, but its instance {node.instance} was not deleted: {exc}",
                hint=exc.hint or "delete it at the provider (it bills until then)",
            ) from None
        say(f"{name}: instance {node.instance} deleted at its provider")
    return result
