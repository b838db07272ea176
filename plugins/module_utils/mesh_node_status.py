# Copyright: meshctl contributors; Apache-2.0
"""``node_status``: one node's status record, judged, from what ``mesh_status`` read on it.

Runs on the control machine (a filter), on data a node sent: every value is parsed into a
small fixed shape (a state word, an address, a row per Slurm node) and the judgement (healthy or
not, and the first problem, as one of ``PROBLEMS``) is made here, in one place, beside the roles
whose services it judges. meshctl checks the record's shape again (meshctl/health.py) and only
words the advice.
"""

from __future__ import annotations

import ipaddress
import json
import re

from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_burst, mesh_cloud, mesh_slurm
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_tailscale_status import (
    TailscaleOutputError,
    tailscale_status,
)

# The first problem a record names, in the order they are looked for ("" when healthy).
PROBLEMS = (
    "pending",  # meshctl has not finished setting the node up
    "service",  # a daemon is not active (detail: which)
    "userspace",  # tailscaled without a TUN device on a machine that should have one
    "tailnet",  # Tailscale is not Running on the node's mesh address
    "share",  # the shared folder is not exported (head), not in fstab or not the head's share (node)
    "address",  # Slurm's address for the node (NodeAddr) is not meshctl's record (detail: both)
    "no-nfs-kernel",  # the node's kernel cannot mount NFS (a container): jobs do not see the share
    "slurm",  # Slurm does not see the node in a state that takes jobs (detail: the state)
    "pod",  # healthy, but a pod: said so (no NFS mount, Slurm through Tailscale's proxy)
)
HEALTHY_PROBLEMS = ("", "pod", "no-nfs-kernel")
SHARE_OK = ("exporting", "mounted", "shared", "fstab-only")
WORD = mesh_slurm.WORD_RE  # a service's state, or a Slurm state word and its flag (~ % # ! * $ @ ^ - +)
NAME = re.compile(r"[a-z0-9][a-z0-9.-]{0,62}")
GRES = re.compile(r"[A-Za-z0-9 ._:/()+*,=-]{0,120}")
REASON = re.compile(r"[A-Za-z0-9 ._:/()+*,;=@'#$%~!`<>\[\]-]{0,200}")  # printable words, no escape
MAX_NODES = 10000
INSTANCE = re.compile(f"({'|'.join(mesh_cloud.PROVIDERS)}):{mesh_cloud.ID_RE.pattern}")


def _word(value, default="unknown"):
    value = str(value).strip() if value is not None else ""
    return value if WORD.fullmatch(value) else default


def slurm_rows(sinfo):
    """Every node's row from the controller's ``sinfo --Node --format=%N|%T|%G|%E``: state, gres,
    ready and reason (why Slurm took it out: a drain, a failed start; "" for none).

    A line that is not three or four fields, or whose name is not one, is left out; a state that
    is not a word becomes ``unknown``, a GRES or reason that is not plain text ``?``. ``ready``:
    Slurm's words (module_utils ``mesh_slurm.ready``): the state less its flag takes jobs, and the
    node answers Slurm (no ``*``).
    """
    rows = {}
    for line in (sinfo or {}).get("stdout", "").splitlines()[:MAX_NODES]:
        parts = line.strip().split("|", 3)
        if len(parts) not in (3, 4) or not NAME.fullmatch(parts[0]):
            continue
        state = _word(parts[1])
        gres = parts[2] if GRES.fullmatch(parts[2]) else "?"
        reason = parts[3].strip() if len(parts) == 4 and parts[3].strip() not in ("none", "(null)") else ""
        reason = reason if REASON.fullmatch(reason) else "?"
        rows[parts[0]] = {"state": state, "gres": gres, "ready": mesh_slurm.ready(state), "reason": reason}
    return rows


def slurm_addresses(sinfo):
    """{node: its address in Slurm} from ``sinfo --Node --format=%N|%o`` (the probe's ``addresses``,
    beside the rows). What is no IP address (a powered-down cloud node's own name) is left out; an
    address a node's root set may be any text, and is shown only when it is an address."""
    found = {}
    text = str(((sinfo or {}).get("addresses") or {}).get("stdout", ""))
    for line in text.splitlines()[:MAX_NODES]:
        parts = line.strip().split("|")
        if len(parts) != 2 or not NAME.fullmatch(parts[0]):
            continue
        try:
            found[parts[0]] = str(ipaddress.ip_address(parts[1]))
        except ValueError:
            found[parts[0]] = "not-an-address" if parts[1] != parts[0] else None
    return {name: address for name, address in found.items() if address}


def _records(records):
    """``(node, record)`` of the first 64 RECORDS (text by node) that are JSON objects naming their
    node, the node's name a node's."""
    for node, text in list((records or {}).items())[:64]:
        try:
            record = json.loads(str(text))
        except ValueError:
            continue
        if isinstance(record, dict) and NAME.fullmatch(str(node)) and record.get("node") == node:
            yield node, record


def rented_rows(records):
    """The head's records of the burst pool machines it rented (``mesh_status``'s ``rented``: text
    by node) as ``{node: {pool, instance, price, since}}``: a record that is not JSON of that shape
    (a pool's name, ``provider:id``, $/h from 0 to 1000, seconds since the epoch) is left out."""
    rows = {}
    for node, record in _records({k: v for k, v in (records or {}).items() if "@" not in str(k)}):  # now's
        pool, instance = record.get("pool"), record.get("instance")
        price, since = record.get("price"), record.get("since")
        if not (isinstance(pool, str) and mesh_burst.NAME_RE.fullmatch(pool)):
            continue
        if not (isinstance(instance, str) and INSTANCE.fullmatch(instance)):
            continue
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 <= price <= 1000:
            continue
        if isinstance(since, bool) or not isinstance(since, int) or since <= 0:
            continue
        rows[node] = {"pool": pool, "instance": instance, "price": float(price), "since": since}
    return rows


def ended_rows(records):
    """The power program's records of the machines the head's watch found lost (``mesh_status``'s
    ``ended``: text by node) as ``{node: {instance, why, at, price, since}}`` (``price`` and
    ``since`` None where it did not know them): a record given back when idle, or not of that shape
    (``provider:id``, a reason as Slurm's, seconds since the epoch, $/h from 0 to 1000), is left out."""
    rows = {}
    for node, record in _records(records):
        instances, why, at = record.get("instances"), record.get("why"), record.get("at")
        if record.get("lost") is not True or not isinstance(instances, list) or len(instances) != 1:
            continue
        if not (isinstance(instances[0], str) and INSTANCE.fullmatch(instances[0])):
            continue
        if not (isinstance(why, str) and REASON.fullmatch(why)) or not _seconds(at):
            continue
        price, since = record.get("price"), record.get("since")
        priced = not isinstance(price, bool) and isinstance(price, (int, float)) and 0 <= price <= 1000
        rows[node] = {"instance": instances[0], "why": why, "at": at, "price": float(price) if priced else None,
                      "since": since if _seconds(since) and since <= at else None}  # fmt: skip
    return rows


def _seconds(value):
    return not isinstance(value, bool) and isinstance(value, int) and value > 0


def tailnet_record(probe):
    """backend_state, ipv4, userspace (and the rest of ``tailscale_status``) from the probe."""
    if not probe or probe.get("rc") != 0:
        return {"backend_state": "down", "ipv4": None, "userspace": False}
    try:
        return tailscale_status(probe.get("stdout", ""))
    except TailscaleOutputError:
        return {"backend_state": "unreadable", "ipv4": None, "userspace": False}


def node_status(probe, expect, sinfo=None):
    """The status record of one node.

    ``probe``: what the ``mesh_status`` module returned (``status``). ``expect``: what the
    inventory says of the node: ``name``, ``address`` (its mesh address), ``active`` (set up, not
    pending), ``pod``, ``compute``, ``head``, ``tailnet`` (it should be on the tailnet),
    ``share_service`` (the head's NFS server unit). ``sinfo``: the controller's ``sinfo`` probe,
    for this node's row (and, on the controller, everyone's: ``slurm_nodes``).
    """
    probe = probe or {}
    expect = expect or {}
    services = {_word(k, "?"): _word(v) for k, v in (probe.get("services") or {}).items()}
    rows = slurm_rows(sinfo)
    record = {
        "name": expect.get("name"),
        "services": services,
        "tailnet": tailnet_record(probe.get("tailscale")) if expect.get("tailnet") else None,
        "share": None,
        "mlflow": None,
        "slurm": rows.get(expect.get("name")),
        "sinfo_ok": bool(sinfo) and sinfo.get("rc") == 0,
    }
    if expect.get("head"):
        unit = expect.get("share_service")
        record["share"] = ("exporting" if services.get(unit) == "active" else "down") if unit else None
        http = probe.get("http")
        if http is not None:
            body = str(http.get("body", "")).strip()
            record["mlflow"] = _word(body, "unreadable") if http.get("status") == 200 else "unreachable"
    elif probe.get("mount") is not None:
        record["share"] = _word(probe.get("mount"))
    if probe.get("sinfo") is not None:  # the controller: everyone's row, for the nodes that did not answer
        record["slurm_nodes"] = rows if probe["sinfo"] == sinfo else slurm_rows(probe["sinfo"])
    if probe.get("rented") is not None:  # the head of a mesh with burst pools: the machines it rented
        record["rented"] = rented_rows(probe["rented"])
    if probe.get("ended") is not None:  # the head of a mesh whose rented machines it watches: the lost ones
        record["ended"] = ended_rows(probe["ended"])
    in_slurm = slurm_addresses(sinfo).get(expect.get("name"))
    record["problem"], record["detail"] = judge(record, expect, in_slurm)
    record["healthy"] = record["problem"] in HEALTHY_PROBLEMS
    return record


def judge(record, expect, in_slurm=None):
    """(problem, detail): the first of ``PROBLEMS`` the record shows, "" when none. ``in_slurm``: the
    node's address in Slurm (NodeAddr; ``not-an-address`` for other text), None when Slurm gave none."""
    if not expect.get("active"):
        return "pending", ""
    down = [name for name, state in record["services"].items() if state != "active"]
    if down or not record["services"]:
        return "service", ", ".join(down) or "none reported"
    tailnet = record["tailnet"]
    if tailnet is not None:
        userspace = bool(tailnet.get("userspace"))
        if userspace and not expect.get("pod"):
            return "userspace", ""
        if tailnet.get("backend_state") != "Running" or tailnet.get("ipv4") != expect.get("address"):
            return "tailnet", str(tailnet.get("backend_state"))
    share = record["share"]
    if not expect.get("pod") and share not in SHARE_OK:
        return "share", str(share)
    if in_slurm and expect.get("address") and in_slurm != expect["address"]:
        return "address", f"{in_slurm}, meshctl recorded {expect['address']}"
    slurm = record["slurm"]
    if expect.get("compute") and not (slurm or {}).get("ready"):
        reason = (slurm or {}).get("reason")
        return "slurm", (slurm or {}).get("state", "absent") + (f" ({reason})" if reason else "")
    if share == "fstab-only" and not expect.get("pod"):
        return "no-nfs-kernel", ""
    if expect.get("pod"):
        return "pod", ""
    return "", ""
