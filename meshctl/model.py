"""The model: what a mesh is made of, whatever file it is kept in.

A node (``Node``: name, SSH address, user, port, key, provider, roles, state, mesh address, its
instance at a provider, pod or not, the host variables a user added), the words for its roles and
states, the group names a run's inventory derives, the rules of a node name and an SSH target, and
how data a node reported is marked for Ansible (``Unsafe``). The store (``meshctl.mesh``) keeps
nodes in ``mesh.yml``; everything else asks this module.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import asdict, dataclass, field

import netaddr

from meshctl import core
from meshctl.errors import InventoryError, UsageError
from meshctl.settings import MANAGED_HOSTVARS, RUN_HOSTVARS

RENTED = core.mesh_cloud.PROVIDERS  # providers meshctl reaches through their APIs

# What a node's `mesh_provider` may say: the machine's own (local), one rented through an API, or
# another machine reached over SSH (generic). The providers meshctl rents from are RENTED only.
NODE_PROVIDERS = ("local", *RENTED, "generic")

ROLES = ("head", "compute")

STATES = ("pending", "active")

# Host variables meshctl writes from a node's record; any other a user adds is kept as written.
VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")

LOCAL_PYTHON = "/usr/bin/python3"  # the interpreter of a head that is the machine meshctl runs on

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")

# A node's instance, "<provider>:<id>", the id as the provider clients accept one (module_utils/mesh_cloud.py).
INSTANCE_RE = re.compile(f"({'|'.join(RENTED)}):" + core.mesh_cloud.ID_RE.pattern)

HOSTNAME_RE = re.compile(
    r"^(?=.{1,253}\Z)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z"
)

# An SSH login name; never an option (`-oProxyCommand=...`).
USER_RE = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")


def check_name(name: str) -> str:
    if not NAME_RE.match(name or ""):
        raise UsageError(
            f"node name {name!r} is not valid for Slurm and Tailscale",
            hint="use lowercase letters, digits and hyphens, at most 63, not starting or ending with a hyphen",
        )
    return name


def check_host(host: str) -> str:
    """An SSH address: an IPv4/IPv6 address (netaddr) or a DNS hostname."""
    with contextlib.suppress(netaddr.AddrFormatError, ValueError):
        return str(netaddr.IPAddress(host))
    if HOSTNAME_RE.match(host or "") and not re.fullmatch(r"[0-9.]+", host):
        return host
    raise UsageError(f"{host!r} is neither an IP address nor a hostname", hint="give [USER@]HOST[:PORT]")


@dataclass(frozen=True)
class Target:
    user: str
    host: str
    port: int


def node_named(nodes: list[Node], name: str) -> Node:
    """The node called NAME; a UsageError naming where to see the nodes when there is none."""
    node = next((n for n in nodes if n.name == name), None)
    if node is None:
        raise UsageError(f"no node named {name} in the mesh", hint="`meshctl status` lists the nodes")
    return node


def head_of(nodes: list[Node]) -> Node:
    """The mesh's head (the first node with role head)."""
    heads = [n for n in nodes if "head" in n.roles]
    if not heads:
        raise InventoryError("the mesh has no head", hint="recreate it with `meshctl init --head ...`")
    return heads[0]


def parse_target(text: str, default_user: str = "root") -> Target:
    """``[USER@]HOST[:PORT]``; IPv6 hosts go in brackets: ``root@[fd7a::1]:22``."""
    user, _, rest = text.rpartition("@")
    user = user or default_user
    if not USER_RE.fullmatch(user):
        raise UsageError(f"{user!r} is not a valid SSH user name")
    port = 22
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        if tail:
            if not tail.startswith(":"):
                raise UsageError(f"cannot read {text!r}", hint="use [USER@]HOST[:PORT]")
            port = _port(tail[1:])
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
        if not port_text.isdigit():  # `gpu:bar`: neither HOST:PORT nor a provider's PROVIDER:NAME
            providers = RENTED
            raise UsageError(f"cannot read {text!r}: {port_text!r} is not a TCP port, and {host!r} is not a provider",
                             hint=f"give [USER@]HOST[:PORT], or PROVIDER:NAME with a provider of "
                             f"{', '.join(providers)} (`meshctl machines` lists yours)")  # fmt: skip
        port = _port(port_text)
    else:
        host = rest
    return Target(user, check_host(host), port)


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise UsageError(f"{text!r} is not a TCP port", hint="use a number from 1 to 65535")
    return int(text)


@dataclass
class Node:
    name: str
    host: str
    user: str = "root"
    port: int = 22
    ssh_key: str | None = None
    provider: str = "generic"
    roles: list[str] = field(default_factory=lambda: ["compute"])
    state: str = "pending"
    mesh_address: str | None = None
    connection: str = "ssh"  # "local" for a head that is the machine meshctl runs on
    pod: bool = False  # no systemd: its daemons run under supervisor (group "pod"; roles/pod)
    instance: str | None = None  # the provider's instance it is: "<provider>:<id>" (meshctl/cloud.py)
    # When meshctl took that instance in (epoch seconds; a provider such as Lambda lists no start):
    # what a machine taken away had cost by then (`meshctl status`, the head's watch).
    since: int | None = None
    extra: dict = field(default_factory=dict)  # host variables a user added in mesh.yml: kept as written

    def validate(self) -> None:
        check_name(self.name)
        check_host(self.host)
        if self.provider not in NODE_PROVIDERS:
            raise InventoryError(
                f"node {self.name}: unknown provider {self.provider!r}", hint=f"use one of {', '.join(NODE_PROVIDERS)}"
            )
        if not self.roles or any(r not in ROLES for r in self.roles):
            raise InventoryError(f"node {self.name}: roles {self.roles} must be a subset of {list(ROLES)}")
        if self.state not in STATES:
            raise InventoryError(f"node {self.name}: state {self.state!r} must be one of {list(STATES)}")
        if self.instance is not None and not INSTANCE_RE.fullmatch(self.instance):
            raise InventoryError(f"node {self.name}: meshctl_instance {self.instance!r} is not PROVIDER:ID",
                                 hint="e.g. lambda:0920582c7ff041399e34823a0be62549, or remove it")  # fmt: skip
        if self.mesh_address is not None:
            try:
                address = netaddr.IPAddress(self.mesh_address, version=4)
            except (netaddr.AddrFormatError, ValueError, TypeError):
                raise InventoryError(f"node {self.name}: mesh_address {self.mesh_address!r} is not IPv4") from None
            if address.value == 0 or address.is_loopback() or address.is_multicast() or address.value == 2**32 - 1:
                raise InventoryError(f"node {self.name}: mesh_address {self.mesh_address} is not a node's address",
                                     hint="use the node's tailnet (or LAN) IPv4")  # fmt: skip

    def move_to(self, host: str, port: int, instance: str | None) -> str | None:
        """Record the node at HOST:PORT as INSTANCE (its provider moved it, or it is a new machine).
        On a mesh without a tailnet the mesh address is the SSH address, and follows it; returns
        the old mesh address when it did."""
        old = None
        if self.mesh_address == self.host != host and netaddr.valid_ipv4(host):
            old, self.mesh_address = self.mesh_address, host
        if instance != self.instance:
            self.since = int(time.time()) if instance else None
        self.host, self.port, self.instance = host, port, instance
        return old

    def hostvars(self) -> dict:
        hv = {
            "ansible_host": self.host,
            "ansible_user": self.user,
            "ansible_port": self.port,
            "mesh_provider": self.provider,
            "meshctl_roles": list(self.roles),
            "meshctl_state": self.state,
        }
        if self.ssh_key:
            hv["ansible_ssh_private_key_file"] = self.ssh_key
        if self.mesh_address:
            hv["mesh_address"] = self.mesh_address
        if self.user != "root":
            hv["ansible_become"] = True
        if self.connection == "local":
            hv["ansible_connection"] = "local"
            # The system's Python (python3-apt, the distribution's modules), never meshctl's venv,
            # which interpreter discovery would find first on this machine (unless the user set one).
            hv["ansible_python_interpreter"] = LOCAL_PYTHON
        if self.pod:
            hv["mesh_pod"] = True
        if self.instance:
            hv["meshctl_instance"] = self.instance
            if self.since is not None:
                hv["meshctl_instance_since"] = self.since
        hv.update(self.extra)  # what the user added (never one of the keys above: from_hostvars)
        return hv

    @classmethod
    def from_hostvars(cls, name: object, hv: object) -> Node:
        """A node from its mesh.yml entry; every field is checked for its type before it is used."""
        if not isinstance(name, str):
            raise InventoryError(f"host name {_show(name)} is not text", hint="node names are words like gpu1")
        if not isinstance(hv, dict):
            raise InventoryError(f"node {name}: expected a mapping of host variables")

        def text(key: str, default: str | None = None, required: bool = False) -> str | None:
            value = hv.get(key, default)
            if value is None and not required:
                return None
            if not isinstance(value, str) or not value:
                raise InventoryError(f"node {name}: {key} is {_show(value)}, not text", hint=f"fix {key} in mesh.yml")
            return value

        port = hv.get("ansible_port", 22)
        if isinstance(port, str) and port.strip().isdigit():
            raise InventoryError(f"node {name}: ansible_port is {_show(port)}, text in quotes",
                                 hint=f"write the number without quotes: ansible_port: {port.strip()}")  # fmt: skip
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise InventoryError(f"node {name}: ansible_port is {_show(port)}", hint="use a port from 1 to 65535")
        roles = hv.get("meshctl_roles", ["compute"])
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise InventoryError(f"node {name}: meshctl_roles is {_show(roles)}", hint="use a list: [compute]")
        pod = hv.get("mesh_pod", False)
        if not isinstance(pod, bool):
            raise InventoryError(f"node {name}: mesh_pod is {_show(pod)}", hint="use true or false")
        user = text("ansible_user", "root")
        if not USER_RE.fullmatch(user):
            raise InventoryError(f"node {name}: ansible_user {user!r} is not a user name",
                                 hint="use a login name (lowercase letters, digits, _ . -)")  # fmt: skip
        since = hv.get("meshctl_instance_since")
        if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < 0):
            raise InventoryError(f"node {name}: meshctl_instance_since is {_show(since)}, not a time in seconds",
                                 hint="meshctl writes it when it takes a machine in: remove the line")  # fmt: skip
        connection = "local" if hv.get("ansible_connection") == "local" else "ssh"
        managed = set(MANAGED_HOSTVARS)
        if connection == "local" and hv.get("ansible_python_interpreter") == LOCAL_PYTHON:
            managed.add("ansible_python_interpreter")  # meshctl's own default for a local head
        extra = {k: v for k, v in hv.items() if k not in managed}
        for key in extra:
            if not isinstance(key, str) or not VAR_RE.fullmatch(key):
                raise InventoryError(f"node {name}: host variable {_show(key)} is not a variable name",
                                     hint="use letters, digits and _, not starting with a digit")  # fmt: skip
            if key in RUN_HOSTVARS:
                raise InventoryError(f"node {name}: {key} is meshctl's to set (the facts a node reported)",
                                     hint=f"remove {key} from mesh.yml")  # fmt: skip
        if "idle_stop" in extra:
            power = core.power_save
            try:
                power.duration_seconds(extra["idle_stop"])
            except power.PowerSaveError as exc:
                raise InventoryError(f"node {name}: {exc}", hint="write it as 30m, 1h30m, 90s or 30 minutes, "
                                     "or false for never") from None  # fmt: skip
        return cls(
            name=name,
            host=text("ansible_host", required=True),
            user=user,
            port=port,
            ssh_key=text("ansible_ssh_private_key_file"),
            provider=text("mesh_provider", "generic"),
            roles=list(roles),
            state=text("meshctl_state", "pending"),
            mesh_address=text("mesh_address"),
            instance=text("meshctl_instance"),
            since=since,
            connection=connection,
            pod=pod,
            extra=extra,
        )


def _show(value: object) -> str:
    """A value from a file, safe to print: its type for containers (never expanded: alias bombs)."""
    if isinstance(value, (dict, list, tuple, set)):
        return f"a {type(value).__name__}"
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


class Unsafe(dict):
    """A mapping a node reported: written into a run's inventory as one YAML ``!unsafe`` mapping, so
    Ansible never templates anything in it (ansible-core templates every other string of a YAML
    inventory). The tag goes on the mapping, never on a single scalar: Ansible resolves an
    ``!unsafe`` scalar's type again from its text, quotes or not ('22.05' would become 22.05)."""


def unsafe(value: dict) -> Unsafe:
    """``value`` marked as node data (the tag covers everything inside it)."""
    return Unsafe(value)


def facts_problems(hw: object) -> list[str]:
    """What is wrong with a node's hardware facts ([] when sound): the one schema, mesh_hw.facts_problems."""
    from meshctl import hardware

    return hardware.mesh_hw().facts_problems(hw)


DERIVED_GROUPS = (*ROLES, "pending", "tailnet", "pod", "leaving", "settled", *NODE_PROVIDERS)


def record(node: Node) -> dict:
    return asdict(node)
