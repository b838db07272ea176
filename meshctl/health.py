"""What `meshctl status` reads back: one status record per node, held to a schema before use.

The record (fact ``mesh_status``) is made on the control machine by the collection's filter
``node_status`` from what the node's ``mesh_status`` module read; its values came from the node.
A node may lie about its health (nothing here can stop that), but what it reports must not be
anything else: a status word is a short word, a tailnet address an IP address, a Slurm row is
state, GRES, ready and reason. A record outside its shape is refused (the row is then
unhealthy, and named), never printed as the node sent it. The shapes are the filter's own
(``WORD``, ``NAME``, ``GRES``, ``REASON`` in plugins/module_utils/mesh_node_status.py): one place.
"""

from __future__ import annotations

import netaddr

from meshctl import core

_FILTER = core.node_status
WORD_RE = _FILTER.WORD  # active, fstab-only, idle~, down*
TEXT_RE = _FILTER.GRES  # a GRES string, a tailnet hostname or version
REASON_RE = _FILTER.REASON  # why Slurm took a node out
NAME_RE = _FILTER.NAME

# The one fact playbooks/status.yml leaves on each node: its status record, made and judged by
# the collection's filter node_status (plugins/module_utils/mesh_node_status.py), whose PROBLEMS it names.
FACT = "mesh_status"
RECORD_KEYS = {"name", "services", "tailnet", "share", "mlflow", "slurm", "slurm_nodes", "sinfo_ok", "problem",
               "detail", "healthy", "rented", "ended"}  # fmt: skip


def problems() -> tuple[str, ...]:
    """The problem codes a record may carry: the filter's own list."""
    return tuple(_FILTER.PROBLEMS)


def _word(value: object) -> bool:
    return isinstance(value, str) and bool(WORD_RE.fullmatch(value))


def _row(name: object, row: object) -> str | None:
    if not (isinstance(name, str) and NAME_RE.fullmatch(name) and isinstance(row, dict)):
        return "a node name or row is not one"
    if set(row) != {"state", "gres", "ready", "reason"} or not _word(row["state"]):
        return f"node {name}'s row is not state, gres, ready, reason"
    if not isinstance(row["reason"], str) or not REASON_RE.fullmatch(row["reason"]):
        return f"node {name}'s reason is not plain text"
    if not isinstance(row["gres"], str) or not TEXT_RE.fullmatch(row["gres"]):
        return f"node {name}'s GRES is not plain text"
    if not isinstance(row["ready"], bool):
        return f"node {name}'s ready is not true or false"
    return None


def record_problem(name: str, record: object) -> str | None:
    """Why RECORD is not the status record of node NAME (None when it is)."""
    if (
        not isinstance(record, dict)
        or set(record) - RECORD_KEYS
        or not {"services", "problem", "healthy"} <= set(record)
    ):
        return "not a status record"
    if record.get("name") != name:
        return "the record names another node"
    services = record["services"]
    if not isinstance(services, dict) or len(services) > 8 or not all(_word(k) and _word(v) for k, v in
                                                                      services.items()):  # fmt: skip
        return "services is not a mapping of service words"
    for key in ("share", "mlflow"):
        if record.get(key) is not None and not _word(record[key]):
            return f"{key} is not a status word"
    if record.get("tailnet") is not None and (why := _tailscale(record["tailnet"])):
        return f"tailnet: {why}"
    if record.get("slurm") is not None and (why := _row(name, record["slurm"])):
        return f"slurm: {why}"
    nodes = record.get("slurm_nodes", {})
    if not isinstance(nodes, dict) or len(nodes) > 10000:
        return "slurm_nodes is not a mapping"
    for other, row in nodes.items():
        if why := _row(other, row):
            return f"slurm_nodes: {why}"
    if why := _rented(record.get("rented", {})):
        return f"rented: {why}"
    if why := _ended(record.get("ended", {})):
        return f"ended: {why}"
    if not isinstance(record.get("sinfo_ok", False), bool) or not isinstance(record["healthy"], bool):
        return "sinfo_ok or healthy is not true or false"
    if record["problem"] not in ("", *problems()):
        return "problem is not one meshctl knows"
    if not isinstance(record.get("detail", ""), str) or not REASON_RE.fullmatch(record.get("detail", "")):
        return "detail is not plain text"
    return None


def _rented(value: object) -> str | None:
    """The head's records of the pool machines it rented, as the filter's ``rented_rows`` makes them."""
    if not isinstance(value, dict) or len(value) > 64:
        return "not a mapping"
    for node, row in value.items():
        if not (isinstance(node, str) and NAME_RE.fullmatch(node) and isinstance(row, dict)):
            return "a node name or record is not one"
        if set(row) != {"pool", "instance", "price", "since"}:
            return f"{node}'s record is not pool, instance, price, since"
        if not (isinstance(row["pool"], str) and core.mesh_burst.NAME_RE.fullmatch(row["pool"])):
            return f"{node}'s pool is not a pool's name"
        if not (isinstance(row["instance"], str) and _FILTER.INSTANCE.fullmatch(row["instance"])):
            return f"{node}'s instance is not provider:id"
        if not isinstance(row["price"], float) or not 0 <= row["price"] <= 1000:
            return f"{node}'s price is not $/h"
        if isinstance(row["since"], bool) or not isinstance(row["since"], int) or row["since"] <= 0:
            return f"{node}'s since is not a time"
    return None


def _ended(value: object) -> str | None:
    """The power program's records of the lost machines, as the filter's ``ended_rows`` makes them."""
    if not isinstance(value, dict) or len(value) > 64:
        return "not a mapping"
    for node, row in value.items():
        if not (isinstance(node, str) and NAME_RE.fullmatch(node) and isinstance(row, dict)):
            return "a node name or record is not one"
        if set(row) != {"instance", "why", "at", "price", "since"}:
            return f"{node}'s record is not instance, why, at, price, since"
        if not (isinstance(row["instance"], str) and _FILTER.INSTANCE.fullmatch(row["instance"])):
            return f"{node}'s instance is not provider:id"
        if not (isinstance(row["why"], str) and REASON_RE.fullmatch(row["why"])):
            return f"{node}'s why is not plain text"
        if row["price"] is not None and (not isinstance(row["price"], float) or not 0 <= row["price"] <= 1000):
            return f"{node}'s price is not $/h"
        for key in ("at", "since"):
            if (row[key] is not None or key == "at") and (isinstance(row[key], bool) or not isinstance(row[key], int)
                                                          or row[key] <= 0):  # fmt: skip
                return f"{node}'s {key} is not a time"
    return None


TAILSCALE_KEYS = {"backend_state", "hostname", "ipv4", "ipv6", "key_expiry", "version", "userspace"}


def _tailscale(value: object) -> str | None:
    """The tailscale_status filter's mapping (plugins/module_utils/mesh_tailscale_status.py)."""
    if not isinstance(value, dict) or set(value) - TAILSCALE_KEYS:
        return f"not a mapping of {', '.join(sorted(TAILSCALE_KEYS))}"
    if not _word(value.get("backend_state")):
        return "backend_state is not a word"
    for key, version in (("ipv4", 4), ("ipv6", 6)):
        address = value.get(key)
        if address is None:
            continue
        try:
            netaddr.IPAddress(address, version=version, flags=netaddr.INET_PTON)
        except (netaddr.AddrFormatError, ValueError, TypeError):
            return f"{key} is not an IPv{version} address"
    for key in ("hostname", "key_expiry", "version"):
        if value.get(key) is not None and not (isinstance(value[key], str) and TEXT_RE.fullmatch(value[key])):
            return f"{key} is not plain text"
    if not isinstance(value.get("userspace", False), bool):
        return "userspace is not true or false"
    return None


def checked(name: str, record: object) -> tuple[dict | None, str | None]:
    """(the record, None) when it has its shape; else (None, why)."""
    problem = record_problem(name, record)
    return (None, problem) if problem else (record, None)
