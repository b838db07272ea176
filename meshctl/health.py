"""What nodes report to `meshctl status` (``<role>_health`` facts), held to a schema before use.

A node may lie about its health (nothing here can stop that), but what it reports must not be
anything else: a status word is a short word, a tailnet address an IPv4 address, a daemon map
names daemons. A value outside its shape is replaced by ``REFUSED`` (the row is then unhealthy)
and named in the problems returned, never printed as the node sent it.
"""

from __future__ import annotations

import re

import netaddr

REFUSED = "refused"
WORD_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+*~#:-]{0,39}$")  # active, fstab-only, idle~, down*
TEXT_RE = re.compile(r"^[A-Za-z0-9 ._:/()+*,=-]{0,120}$")  # a GRES string, MLflow's /health answer
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{0,62}$")

# Facts that are one status word.
WORDS = ("munge_health", "nfs_client_health", "nfs_server_health", "mlflow_health")


def _word(value: object) -> bool:
    return isinstance(value, str) and bool(WORD_RE.fullmatch(value))


def _slurm(value: object) -> str | None:
    if not isinstance(value, dict) or set(value) - {"daemons", "sinfo_ok", "nodes"}:
        return "not a mapping of daemons, sinfo_ok and nodes"
    daemons = value.get("daemons", {})
    if not isinstance(daemons, dict) or len(daemons) > 8:
        return "daemons is not a mapping"
    if not all(_word(k) and _word(v) for k, v in daemons.items()):
        return "a daemon or its state is not a word"
    if not isinstance(value.get("sinfo_ok", False), bool):
        return "sinfo_ok is not true or false"
    nodes = value.get("nodes", {})
    if not isinstance(nodes, dict) or len(nodes) > 10000:
        return "nodes is not a mapping"
    for name, row in nodes.items():
        if not (isinstance(name, str) and NAME_RE.fullmatch(name) and isinstance(row, dict)):
            return "a node name or row is not one"
        if set(row) - {"state", "gres", "ready"} or not _word(row.get("state")):
            return f"node {name}'s row is not state, gres, ready"
        if not isinstance(row.get("gres", ""), str) or not TEXT_RE.fullmatch(row.get("gres", "")):
            return f"node {name}'s GRES is not plain text"
        if not isinstance(row.get("ready", False), bool):
            return f"node {name}'s ready is not true or false"
    return None


TAILSCALE_KEYS = {"backend_state", "hostname", "ipv4", "ipv6", "key_expiry", "version", "userspace"}


def _tailscale(value: object) -> str | None:
    """The tailscale_status filter's mapping (plugins/filter/tailscale_status.py)."""
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


CHECKS = {"slurm_health": _slurm, "tailscale_health": _tailscale}


def checked(name: str, value: object) -> tuple[object, str | None]:
    """(the value, None) when it has its shape; else (REFUSED, why)."""
    if name in WORDS:
        if name == "mlflow_health" and isinstance(value, str) and TEXT_RE.fullmatch(value) and len(value) <= 40:
            return value, None
        return (value, None) if _word(value) else (REFUSED, "not a status word")
    check = CHECKS.get(name)
    if check is None:
        return REFUSED, "not a health fact meshctl knows"
    problem = check(value)
    return (REFUSED, problem) if problem else (value, None)
