"""The mesh directory and its inventory (``mesh.yml``): the single source of truth for membership.

``mesh.yml`` is plain Ansible YAML inventory (``ansible-inventory -i mesh.yml --list`` reads it).
Every node is a host under ``all.hosts`` with its record as host variables; groups are derived:
``head`` and ``compute`` list *active* nodes by role, one group per provider lists every node,
and ``pending`` lists nodes being added. Writes are atomic (temp file, fsync, rename) and keep
the previous file as ``mesh.yml.bak``; runs on one mesh are serialized by ``mesh.lock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import netaddr
import yaml

from meshctl.errors import InventoryError, UsageError

INVENTORY = "mesh.yml"
LOCK = "mesh.lock"
SECRETS = "secrets"
FACTS = "facts"  # one <node>.json per node: its hardware facts (mesh_hw) after its last converge
PROVIDERS = ("local", "paperspace", "lambda", "runpod", "generic")
ROLES = ("head", "compute")
STATES = ("pending", "active")
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
HOSTNAME_RE = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


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


def parse_target(text: str, default_user: str = "root") -> Target:
    """``[USER@]HOST[:PORT]``; IPv6 hosts go in brackets: ``root@[fd7a::1]:22``."""
    user, _, rest = text.rpartition("@")
    user = user or default_user
    if not re.fullmatch(r"[a-z_][a-z0-9_.-]{0,31}", user):
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

    def validate(self) -> None:
        check_name(self.name)
        check_host(self.host)
        if self.provider not in PROVIDERS:
            raise InventoryError(f"node {self.name}: unknown provider {self.provider!r}", hint=f"use {PROVIDERS}")
        if not self.roles or any(r not in ROLES for r in self.roles):
            raise InventoryError(f"node {self.name}: roles {self.roles} must be a subset of {list(ROLES)}")
        if self.state not in STATES:
            raise InventoryError(f"node {self.name}: state {self.state!r} must be one of {list(STATES)}")
        if self.mesh_address is not None:
            try:
                netaddr.IPAddress(self.mesh_address, version=4)
            except (netaddr.AddrFormatError, ValueError):
                raise InventoryError(f"node {self.name}: mesh_address {self.mesh_address!r} is not IPv4") from None

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
        return hv

    @classmethod
    def from_hostvars(cls, name: str, hv: dict) -> Node:
        if not isinstance(hv, dict):
            raise InventoryError(f"node {name}: expected a mapping of host variables")
        try:
            return cls(
                name=name,
                host=str(hv["ansible_host"]),
                user=str(hv.get("ansible_user", "root")),
                port=int(hv.get("ansible_port", 22)),
                ssh_key=hv.get("ansible_ssh_private_key_file"),
                provider=str(hv.get("mesh_provider", "generic")),
                roles=list(hv.get("meshctl_roles", ["compute"])),
                state=str(hv.get("meshctl_state", "pending")),
                mesh_address=hv.get("mesh_address"),
                connection="local" if hv.get("ansible_connection") == "local" else "ssh",
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InventoryError(f"node {name}: bad or missing field ({exc})") from None


def to_inventory(
    nodes: list[Node],
    mesh_vars: dict,
    *,
    facts: dict[str, dict] | None = None,
    secrets: Path | None = None,
    leaving: list[Node] | tuple = (),
    converging: set[str] | None = None,
) -> dict:
    """The Ansible inventory for these nodes: hosts with records, groups derived from them.

    This one function builds both ``mesh.yml`` (no keyword arguments) and the inventory of every
    run (``Mesh.run_inventory``): for a run, pending nodes that the run converges (``converging``,
    None: all) also join their role groups (they are being configured; another pending node, one
    whose add-node failed, stays out of the way), recorded hardware facts become each node's
    ``mesh_hw`` (so the head renders cluster-wide files without reaching the other nodes; a node
    in the run gathers fresh facts, which take precedence), the secrets folder is named, and nodes
    leaving the mesh are hosts of group ``leaving`` only.
    """
    for_run = facts is not None
    hosts = {n.name: n.hostvars() for n in [*nodes, *leaving]}
    children: dict[str, dict] = {}

    def add(group: str, name: str) -> None:
        children.setdefault(group, {"hosts": {}})["hosts"][name] = {}

    for n in nodes:
        if n.state == "active" or (for_run and (converging is None or n.name in converging)):
            for role in n.roles:
                add(role, n.name)
        if n.state != "active":
            add("pending", n.name)
        add(n.provider, n.name)
        if mesh_vars.get("mesh_tailscale"):
            add("tailnet", n.name)
        if for_run and n.name in facts:
            hosts[n.name]["mesh_hw"] = facts[n.name]
    for n in leaving:
        add("leaving", n.name)
        add(n.provider, n.name)
    for group in (*ROLES, "pending", "tailnet", *(("leaving",) if for_run else ())):
        children.setdefault(group, {"hosts": {}})
    all_vars = dict(mesh_vars)
    if secrets is not None:
        all_vars["mesh_secrets_dir"] = str(secrets)
    return {"all": {"vars": all_vars, "hosts": hosts, "children": children}}


def from_inventory(data: object) -> tuple[list[Node], dict]:
    if not isinstance(data, dict) or not isinstance(data.get("all"), dict):
        raise InventoryError("mesh.yml has no top-level 'all' mapping")
    hosts = data["all"].get("hosts") or {}
    if not isinstance(hosts, dict):
        raise InventoryError("mesh.yml: all.hosts must be a mapping")
    nodes = [Node.from_hostvars(name, hv) for name, hv in hosts.items()]
    for node in nodes:
        try:
            node.validate()
        except UsageError as exc:
            raise InventoryError(exc.message, hint=exc.hint) from None
    heads = [n.name for n in nodes if "head" in n.roles]
    if len(heads) > 1:
        raise InventoryError(f"mesh.yml names {len(heads)} heads ({', '.join(heads)}); a mesh has one")
    return nodes, dict(data["all"].get("vars") or {})


class Mesh:
    """A mesh directory: ``mesh.yml``, ``group_vars/``, ``secrets/`` (0700), ``mesh.lock``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve()

    @property
    def inventory(self) -> Path:
        return self.path / INVENTORY

    @property
    def secrets(self) -> Path:
        return self.path / SECRETS

    @property
    def known_hosts(self) -> Path:
        return self.path / "known_hosts"

    @property
    def facts_dir(self) -> Path:
        return self.path / FACTS

    def load_facts(self) -> dict[str, dict]:
        """Each node's recorded hardware facts; a file that cannot be read is left out (re-gathered)."""
        facts: dict[str, dict] = {}
        for path in sorted(self.facts_dir.glob("*.json")) if self.facts_dir.is_dir() else []:
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text())
                if isinstance(data, dict) and NAME_RE.match(path.stem):
                    facts[path.stem] = data
        return facts

    def record_facts(self, name: str, hw: dict) -> None:
        self.facts_dir.mkdir(exist_ok=True)
        atomic_write(self.facts_dir / f"{check_name(name)}.json", json.dumps(hw, indent=1, sort_keys=True) + "\n")

    def forget_facts(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.facts_dir / f"{check_name(name)}.json").unlink()

    def run_inventory(
        self, nodes: list[Node], mesh_vars: dict, leaving: list[Node] | tuple = (), converging: set[str] | None = None
    ) -> dict:
        """The inventory one Ansible run gets (see ``to_inventory``)."""
        facts = self.load_facts()
        return to_inventory(nodes, mesh_vars, facts=facts, secrets=self.secrets, leaving=leaving, converging=converging)

    @classmethod
    def find(cls, explicit: str | None = None, cwd: Path | None = None) -> Mesh:
        """--mesh DIR, else $MESHCTL_MESH, else the current directory or a parent of it."""
        chosen = explicit or os.environ.get("MESHCTL_MESH")
        if chosen:
            mesh = cls(Path(chosen))
            if not mesh.inventory.is_file():
                raise InventoryError(f"{mesh.path} has no {INVENTORY}", hint="run `meshctl init DIR` first")
            return mesh
        here = (cwd or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            if (folder / INVENTORY).is_file():
                return cls(folder)
        raise InventoryError(
            "no mesh here: no mesh.yml in this directory or its parents",
            hint="run `meshctl init DIR`, then cd into it, or pass --mesh DIR / set MESHCTL_MESH",
        )

    def load(self) -> tuple[list[Node], dict]:
        try:
            text = self.inventory.read_text()
        except OSError as exc:
            raise InventoryError(f"cannot read {self.inventory}: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InventoryError(
                f"{self.inventory} is not valid YAML ({str(exc).splitlines()[0]})",
                hint=f"fix it by hand or restore the previous version from {self.inventory.name}.bak",
            ) from None
        try:
            return from_inventory(data)
        except InventoryError as exc:
            raise InventoryError(
                f"{self.inventory}: {exc.message}",
                hint=exc.hint or f"fix it by hand or restore {self.inventory.name}.bak",
            ) from None

    def save(self, nodes: list[Node], mesh_vars: dict) -> None:
        for node in nodes:
            node.validate()
        text = "# meshctl mesh inventory: edit with care; meshctl keeps the previous version as mesh.yml.bak\n"
        text += yaml.safe_dump(to_inventory(nodes, mesh_vars), sort_keys=False, default_flow_style=False)
        atomic_write(self.inventory, text, backup=True)

    @contextlib.contextmanager
    def lock(self, command: str, wait: float = 0.0):
        """Hold the mesh lock; wait up to ``wait`` seconds, else say who holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another meshctl"
                        raise InventoryError(
                            f"the mesh is busy: {holder}",
                            hint="wait for that run to finish, or pass --wait SECONDS",
                        ) from None
                    time.sleep(0.5)
            info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command})
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} running `{command}` ({info})\n".encode(), 0)
            yield self
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)


def atomic_write(path: Path, text: str, backup: bool = False, mode: int = 0o644) -> None:
    """Write via a temp file in the same folder, fsync, keep the old file as .bak, rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if backup and path.exists():
            bak = path.with_name(path.name + ".bak")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(bak)
            os.link(path, bak)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def record(node: Node) -> dict:
    return asdict(node)
