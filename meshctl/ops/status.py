"""`meshctl status`: one row per node from what each node says of itself (one SSH command per node,
``meshctl.quickread``, or playbooks/status.yml), judged by the collection's filter node_status;
meshctl words the advice and says what the head's Slurm knows of a node that did not answer."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

from meshctl import burst, cloud, core, quickread, resources, runner, slurm, ssh
from meshctl.model import Node, head_of
from meshctl.ops.work import Work

# Seconds status waits for a node to take its TCP connection before it calls it unreachable
# (`--timeout`): one round trip, a fraction of it on a LAN or a direct tailnet path and well under
# this over a relayed one; SSH's own wait, for the rest of its handshake, is this rounded up to
# whole seconds (all SSH counts). A connection SSH made in the last minute is reused at once.
STATUS_CONNECT_TIMEOUT = 0.5


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
    problem: str = ""  # the record's problem code (plugins/module_utils/mesh_node_status.py PROBLEMS), "" when none
    price_per_hour: float | None = None  # what its provider bills for it now (meshctl/cloud.py); None: unknown
    price_unknown: bool = False  # a rented node whose provider did not answer in time: shown as `?`
    role: str = "compute"  # "head" (the controller, a compute node too when it runs jobs) or "compute"
    autostop: str = "-"  # its idle_stop as written in mesh.yml ("-": never stopped when idle)
    stopped_bills: str = ""  # its instance is stopped and this still bills (its provider's words), "" when not
    pool: str = ""  # the burst pool whose node it is ("" for none)
    instance: str = ""  # a pool node's machine, provider:id, as its provider lists it ("" for none up)
    since: int | None = None  # when the head rented that machine (seconds since the epoch; the head's record)
    listed: bool = True  # in mesh.yml (a pool's machine is, once an apply took it in): read over SSH


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
    "address": "Slurm has its address as {detail}: someone with a node's root changed it (`scontrol update "
    "nodeaddr=`); the head sets it back within slurm_names_interval seconds, and no node's /etc/hosts takes it "
    "(docs/trust.md)",
    "slurm": "Slurm sees it {detail}: `scontrol show node {name}` says why (Reason=); "
    "`scontrol update nodename={name} state=resume` once fixed",
    "pod": "pod: daemons under supervisor, Slurm out through Tailscale's proxy, no NFS mount (docs/usage.md)",
}


# What the nfs column says for a node's share word (plugins/module_utils/mesh_status_read.py).
SHARE_WORDS = {
    "shared": "shared",
    "not-the-heads": "not the head's share",
    "fstab-only": "no share (kernel cannot mount NFS)",
}
NOT_THE_HEADS = (
    "the share folder is not the head's share (a mount that failed left the local folder): `mount {path}` "
    "on {name}, or `meshctl apply --limit {name}`; the node drains itself until it is"
)


def node_status(node: Node, record: dict) -> NodeStatus:
    """One row from the node's status record (checked by health.checked, judged by the filter)."""
    services = record["services"]
    row = NodeStatus(
        node.name,
        True,
        munge=services.get("munge", "?"),
        daemon=", ".join(f"{d} {state}" for d, state in services.items() if d.startswith("slurm")),
        slurm=(record.get("slurm") or {}).get("state", "absent") if "compute" in node.roles else "-",
        nfs=SHARE_WORDS.get(record.get("share"), record.get("share") or "?"),
        tailnet=tailnet_text(record.get("tailnet")),
        gpus=_gres(record.get("slurm")),
        healthy=record["healthy"],
        problem=record["problem"],
    )
    if row.problem == "share" and record.get("detail") == "not-the-heads":
        row.error = NOT_THE_HEADS.format(name=node.name, path=resources.role_defaults("mesh")["mesh_share_path"])
    elif row.problem:
        row.error = ADVICE[row.problem].format(name=node.name, address=node.mesh_address,
                                               detail=record.get("detail") or "?")  # fmt: skip
    return row


LOST = "its machine was lost"  # how a row of a node whose machine the head's watch found lost begins


def lost_cost(error: str, record: dict) -> str:
    """ERROR (a lost node's row) with what its machine had cost when it was lost, from the power
    program's RECORD of it (the filter's ``ended_rows``): its price an hour, and the hours and their
    sum where it knew since when meshctl had it."""
    if record.get("price") is None:
        return error
    spent = core.mesh_watch.cost(record)
    if spent is None:  # since when is not known (taken in before meshctl recorded it)
        said = f" at ${record['price']:.2f}/h"
    else:
        hours, price, dollars = spent
        said = f" after {hours:.1f} h at ${price:.2f}/h (${dollars:.2f})"
    mark = f"; {core.mesh_watch.REQUEUED}"
    return error.replace(mark, said + mark, 1) if mark in error else error + said


def unreachable_status(node: Node, is_head: bool, said: str, in_slurm: dict) -> NodeStatus:
    """The row of a node SSH could not reach: the head's Slurm view of it, and advice for its state.

    A node Slurm stopped while idle (power saving: ``idle~``) or is starting for a job (``#``) is
    meant to be unreachable: healthy, and said so.
    """
    row = NodeStatus(node.name, False, slurm=in_slurm.get("state", "?" if is_head else "absent"), gpus=_gres(in_slurm))
    state = slurm.base(row.slurm)
    reason = in_slurm.get("reason") or ""
    why = f"; Slurm's reason: {reason}" if reason else ""
    if is_head:
        row.error = f"the head cannot be reached ({said}): start it; every node waits for it"
    elif slurm.resting_state(in_slurm) and "~" in row.slurm:
        row.healthy = True
        row.error = "stopped while idle (idle_stop): a job for it starts it again"
    elif slurm.resting_state(in_slurm):
        row.healthy = True
        row.error = "starting: a job asked for it (Slurm waits up to ResumeTimeout)"
    elif core.mesh_watch.is_loss(reason):  # the head's watch found its machine taken away: the reason says what to do
        row.error = f"{LOST} ({said}): {reason.removeprefix(core.mesh_watch.OURS)}"
    elif row.slurm.endswith("*") or state in ("down", "absent", "unknown") or "~" in row.slurm:
        row.error = (f"the machine is off or cut off ({said}); Slurm sees it {row.slurm}{why}: start it (it rejoins "
                     f"by itself), or `meshctl remove-node {node.name} --force` if it is gone")  # fmt: skip
    else:  # Slurm has not missed it (yet): it stopped a moment ago, or only its SSH fails
        row.error = (f"SSH fails ({said}) while Slurm still lists it {row.slurm}: it may have just stopped "
                     f"(Slurm notices within minutes), its link is slow (`meshctl status --timeout 5`), or its "
                     f"SSH is broken (a new host key: `meshctl forget-host-key {node.name}`)")  # fmt: skip
    return row


def read_status(w: Work, timeout: float, targets: list[Node] | None = None, verbosity: int = 0):
    """Every target's status record (default: every node): one SSH command per node
    (meshctl/quickread.py) when meshctl knows how Ansible would reach each, else playbooks/status.yml,
    one read per node, judged; with ``verbosity`` always the playbook, whose own output is shown
    (``meshctl status -v``)."""
    if not verbosity:
        quick = quickread.read(w.mesh, w.nodes, w.mesh_vars, timeout, targets)
        if quick is not None:
            return quick
    quiet = runner.Progress() if verbosity else runner.Progress(out=io.StringIO(), live=False)
    result = w.run(
        "status.yml",
        quiet,
        targets=targets,
        verbosity=verbosity,
        converge=False,
        mitogen=False,  # one read per node: plain Ansible is faster (docs/benchmarks.md)
        connect_timeout=ssh.whole_seconds(timeout),  # a stopped machine costs a second, not Ansible's 10
        stream=bool(verbosity),  # a second's run nobody watches: its events at the end
    )
    if result.status == "canceled":  # Ctrl+C: no node was judged, none is to be called down
        runner.raise_for(result, "run it again")
    return result


def since_text(since: int | None, now: float) -> str:
    """``since 14:02 UTC (38 min)`` for a rent at SINCE (seconds since the epoch), "" for none."""
    import time

    if since is None:
        return ""
    minutes = max(0, int(now - since) // 60)
    spent = f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"
    return f"since {time.strftime('%H:%M UTC', time.gmtime(since))} ({spent})"


def pool_rows(pools: list[dict], nodes: list[Node], slurm_nodes: dict, rented: dict, machines: list,
              price_problems: dict, now: float) -> list[NodeStatus]:  # fmt: skip
    """A row for each burst pool node not in mesh.yml that Slurm has not powered down or that a
    provider runs a machine for (the providers' list: instance and $/h; the head's record: since
    when it rented it). A pool's node with no row rests powered down, with no machine."""
    listed = {n.name for n in nodes}
    rows = []
    for pool in pools:
        for name in core.mesh_burst.node_names(pool):
            if name in listed:
                continue
            in_slurm = slurm_nodes.get(name, {})
            state = in_slurm.get("state", "?")
            live = [m for m in machines if m.name == name and m.node is None
                    and m.status not in core.mesh_cloud.GONE]  # fmt: skip
            if not live and "~" in state and slurm.resting_state(in_slurm):
                continue
            record = rented.get(name) or {}
            row = NodeStatus(name, False, munge="-", daemon="-", slurm=state, nfs="-", gpus=_gres(in_slurm),
                             role=f"pool {pool['name']}", pool=pool["name"], listed=False)  # fmt: skip
            if live:
                row.instance = f"{live[0].provider}:{live[0].id}"
                row.price_per_hour = live[0].price_per_hour
            elif record and not price_problems and state != "?":
                row.instance = ""  # the head's record names a machine no provider runs now
            elif record:
                row.instance, row.price_unknown = record["instance"], True
            if record and record["instance"] == row.instance:
                row.since = record["since"]
                if row.price_per_hour is None:
                    row.price_per_hour = record["price"]
            reason = in_slurm.get("reason") or ""
            why = f"; Slurm's reason: {reason}" if reason else ""
            rent = f"rented {row.instance} {since_text(row.since, now)}".rstrip() if row.instance else ""
            if state == "?":
                row.error = "the head's Slurm did not say (see the head's row)" + (f"; {rent}" if rent else "")
            elif slurm.taken_out(state) or "*" in state:
                cooldown = "; meshctl offers it to Slurm again after the cool-down" if reason.startswith(
                    "meshctl:") else f"; `scontrol show node {name}` on the head says why"  # fmt: skip
                row.error = f"Slurm sees it {state}{why}{cooldown}" + (f"; {rent}" if rent else "")
            elif not live and slurm.resting_state(in_slurm):
                row.healthy = True
                row.error = "renting a machine for a job (Slurm waits up to ResumeTimeout)"
            else:
                row.healthy = True
                row.error = (f"{rent}; `meshctl apply` takes it into mesh.yml" if rent else
                             "its machine is not listed by its provider now")  # fmt: skip
            rows.append(row)
    return rows


def pools(mesh_vars: dict, rows: list[NodeStatus]) -> list[dict]:
    """Each burst pool: its gres, its max $/h, and its nodes with no row (powered down, no machine)."""
    shown = {r.name for r in rows}
    return [{"name": p["name"], "gres": f"gpu:{core.mesh_burst.gres_type(p['gpu'])}:{p['gpus']}",
             "max_price": float(p["max_price"]),
             "resting": [n for n in core.mesh_burst.node_names(p) if n not in shown]}
            for p in burst.pools(mesh_vars)]  # fmt: skip


# Seconds from status's start it waits for the providers' prices (they are asked while the nodes are
# read): offline, or with a provider slow to answer, the table comes with `?` for the price, and an
# offline provider adds nothing to an offline node's wait.
PRICE_WAIT = 1.0


def status(w: Work, timeout: float = STATUS_CONNECT_TIMEOUT,
           verbosity: int = 0) -> tuple[list[NodeStatus], str, bool, list]:  # fmt: skip
    """One row per node, MLflow's health, whether everything is healthy, and the providers' network
    volumes that no instance uses (``cloud.VolumeRow``: they bill on; no node is less healthy for them).

    Runs playbooks/status.yml: one read per node (module mesh_status), judged into one status
    record per node by the collection's filter node_status; meshctl checks each record's shape,
    words the advice, and says what the head's Slurm knows of a node that did not answer.
    """
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    head = head_of(nodes)
    prices = cloud.PriceLookup(mesh, nodes, mesh_vars)  # the providers' answer, while Ansible runs
    result = read_status(w, timeout, verbosity=verbosity)
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
    costs, price_problems = prices.result(timeout=PRICE_WAIT)
    by_name = {n.name: n for n in nodes}
    for row in rows:
        row.price_per_hour = costs.get(row.name)
        node = by_name[row.name]
        row.price_unknown = row.price_per_hour is None and bool(node.instance) and bool(price_problems)
        row.stopped_bills = prices.stopped.get(row.name, "") if not price_problems else ""
        row.role = "head" if "head" in node.roles else "compute"
        stop = node.extra.get("idle_stop")
        row.autostop = str(stop) if stop not in (None, False, "", 0) else "-"
    ended = (result.records.get(head.name) or {}).get("ended") or {}
    for row in rows:  # a machine the head's watch found lost: what it had cost by then
        if row.error.startswith(LOST) and (record := ended.get(row.name)) and record["instance"] == by_name[
                row.name].instance:  # fmt: skip
            row.error = lost_cost(row.error, record)
    rented = (result.records.get(head.name) or {}).get("rented") or {}
    for row in rows:  # a pool's machine apply took into mesh.yml: its pool, and since when the head rented it
        node = by_name[row.name]
        pool = burst.pool_of(mesh_vars, row.name)
        if pool is not None:
            up = any(m.node == row.name and m.status not in core.mesh_cloud.GONE for m in prices.rows)
            row.pool, row.role, row.instance = pool["name"], f"pool {pool['name']}", (node.instance or "") if up else ""
            record = rented.get(row.name) or {}
            row.since = record["since"] if record and row.instance and record["instance"] == row.instance else None
            if row.since is not None and not row.error:
                row.error = f"rented {node.instance} {since_text(row.since, time.time())}"
            elif not row.ssh and row.healthy and "~" in row.slurm:  # powered down: its machine given back
                row.error = (
                    f"given back to pool {pool['name']} (its machine terminated when idle): a job for it rents one"
                )
    rows += pool_rows(burst.pools(mesh_vars), nodes, slurm_nodes, rented, prices.rows, price_problems, time.time())
    mlflow = (result.records.get(head.name) or {}).get("mlflow") or "unreachable"
    sinfo_ok = bool(controller.get("sinfo_ok"))
    left = [v for v in prices.volumes if not v.used_by] if not price_problems else []
    return rows, mlflow, all(r.healthy for r in rows) and sinfo_ok and mlflow == "OK", left
