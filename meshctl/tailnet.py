"""The mesh's tailnet: its auth key read safely and stored atomically, its options, its address range,
the addresses nodes report (rotating the key on every node is ``meshctl.ops.rotate_authkey``).

The key is read from a file or a hidden prompt (never from the command line), checked for shape
with the tailscale role's own ``auth_key_kind`` (one copy of the rule), and written to
``secrets/tailscale.key`` (0600) by rename, so a reader sees the old key or the new one, never
half of either. Roles copy it to the nodes from there; it never travels as a variable.
"""

from __future__ import annotations

import re
import stat
import sys
import urllib.parse
from pathlib import Path
from types import ModuleType

import netaddr
import yaml

from meshctl import core, display, resources, settings
from meshctl.errors import InventoryError, UsageError
from meshctl.mesh import Mesh
from meshctl.model import Node
from meshctl.vault import Vault, read_secret, write_secret

KEY_FILE = "tailscale.key"
KEY_SHAPES = "tskey-auth-..., tskey-client-... (an OAuth client secret) or a 48/64-hex Headscale pre-auth key"


def _plugin() -> ModuleType:
    return core.tailscale_status


def key_path(mesh: Mesh) -> Path:
    return mesh.secrets / KEY_FILE


def uses_tailscale(mesh_vars: dict) -> bool:
    return bool(mesh_vars.get("mesh_tailscale"))


def mesh_tags(mesh: Mesh, mesh_vars: dict) -> list:
    """tailscale_tags from mesh.yml's vars or group_vars/all.yml (where users set role variables)."""
    return list(mesh.setting("tailscale_tags", mesh_vars) or [])


def read_key(key_file: str | None, prompt) -> str:
    """The key from FILE, from standard input (``-``) or from ``prompt()`` (hidden input).

    Never echoes what it read, nor the file name when the name itself looks like a key (a key
    pasted where its file was asked for); reads at most 4 KiB from regular files and stdin.
    """
    if key_file == "-":
        if sys.stdin is None or sys.stdin.closed:
            raise UsageError("--key-file - reads standard input, which is closed", hint="pass --key-file FILE")
        try:
            text = sys.stdin.read(MAX_KEY_BYTES + 1)
        except (OSError, UnicodeDecodeError, ValueError):
            raise UsageError("cannot read a key from standard input", hint="pipe the key file in as text") from None
    elif key_file:
        shown = "the file given" if _plugin().auth_key_kind(Path(key_file).name) else key_file
        path = Path(key_file)
        try:
            mode = path.stat().st_mode
            if not stat.S_ISREG(mode):
                raise UsageError(
                    f"{shown} is not a regular file", hint="save the key in a file (chmod 600) and pass that"
                )
            if stat.S_IMODE(mode) & 0o077:
                raise UsageError(f"{shown} can be read by others (mode {stat.S_IMODE(mode):04o}): the key in it "
                                 "joins any machine to the tailnet", hint=f"chmod 600 {shown}, then run the command "
                                 "again (and make a new key if others may have read it)")  # fmt: skip
            with path.open("rb") as handle:
                data = handle.read(MAX_KEY_BYTES + 1)
        except OSError as exc:
            hint = "pass the key's file (not the key itself): save it with chmod 600" if shown != key_file else None
            raise UsageError(f"cannot read the key file {shown}: {exc.strerror}", hint=hint) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"{shown} is not text", hint="a Tailscale auth key is one line of text") from None
    elif prompt is None:
        raise UsageError(
            "no auth key given and no terminal to ask on",
            hint="pass --key-file FILE (or --key-file - to read it from standard input)",
        )
    else:
        text = prompt()
    if text is None or len(text) > MAX_KEY_BYTES:
        raise UsageError("the key given is too long to be a Tailscale auth key", hint="pass the key's file")
    return text.removeprefix("\ufeff").strip()  # a byte order mark some editors write is no part of the key


MAX_KEY_BYTES = 4096


def key_shape_problem(text: str) -> str:
    """What around a key keeps it from being one (never the key itself): ``: ...`` or ""."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        return f": it holds {len(lines)} lines; keep only the key, on one line"
    line = lines[0].strip() if lines else ""
    if "=" in line.split("tskey-")[0] and line.split("=", 1)[1].strip("'\" "):
        return f": it holds an assignment ({line.split('=', 1)[0].strip()[:30]}=...); keep only the key"
    if line[:1] in "'\"" and line[:1] and line[-1:] == line[:1]:
        return ": the key is in quotes; keep only the key, without them"
    return ""


def check_key(key: str, tags: list, source: str) -> str:
    """The key's kind; UsageError (which never quotes the key) when it cannot be one."""
    kind = _plugin().auth_key_kind(key)
    if kind is None:
        shape = key_shape_problem(key)
        # Only what is around the key is wrong: the fix is to edit the file, not to make a new key.
        hint = (f"edit {source}{shape.split(';', 1)[1]}, then run the command again" if shape
                else f"make one in the admin console (Settings > Keys); meshctl accepts {KEY_SHAPES}")  # fmt: skip
        raise UsageError(f"{source} does not hold a Tailscale auth key" + shape.split(";", 1)[0], hint=hint)
    if kind == "client" and not tags:
        raise UsageError(
            f"{source} holds an OAuth client secret, which can only register tagged nodes",
            hint="set tailscale_tags (e.g. [tag:meshctl]) in group_vars/all.yml, or use a tskey-auth- key",
        )
    return kind


def store_key(mesh: Mesh, key: str, vault: Vault | None = None) -> Path:
    """Replace secrets/tailscale.key atomically (0600; vault-encrypted when the mesh has a vault)."""
    return write_secret(key_path(mesh), (key + "\n").encode(), vault)


def stored_key(mesh: Mesh, vault: Vault | None = None) -> str:
    """The stored key, in memory only."""
    try:
        data = read_secret(key_path(mesh), vault)
    except OSError as exc:
        raise UsageError(f"cannot read the stored key {key_path(mesh)}: {exc.strerror}",
                         hint="store one with `meshctl rotate-authkey --key-file FILE`") from None  # fmt: skip
    try:
        return data.decode().strip()
    except UnicodeDecodeError:
        raise UsageError(
            f"the stored key {key_path(mesh)} is not text", hint="store a new one with --key-file"
        ) from None


def require_tailscale(mesh_vars: dict) -> None:
    if not uses_tailscale(mesh_vars):
        raise InventoryError(
            "this mesh does not use Tailscale (mesh_tailscale is not set in mesh.yml)",
            hint="create the mesh with `meshctl init --authkey-file FILE` to run it over a tailnet",
        )


TAG_RE = re.compile(r"^tag:[a-zA-Z][a-zA-Z0-9-]{0,79}\Z")


def check_tailnet_options(tags, login_server) -> None:
    """Tags as Tailscale spells them; a login server that is one https URL (it goes into YAML and argv)."""
    for tag in tags:
        if not TAG_RE.match(tag):
            raise UsageError(
                f"--tag {tag!r} is not a Tailscale tag", hint="tags look like tag:gpu (letters, digits, -)"
            )
    if login_server is not None:
        try:  # urlsplit raises on a bracket it cannot read ('https://x\nbad: [')
            parsed = urllib.parse.urlsplit(login_server)
            hostname = parsed.hostname
        except ValueError:
            parsed, hostname = None, None
        if (parsed is None or parsed.scheme not in ("https", "http") or not hostname
                or any(c.isspace() or not c.isprintable() for c in login_server)
                or parsed.query or parsed.fragment or login_server.startswith("-")):  # fmt: skip
            raise UsageError(f"--login-server {login_server!r} is not a server URL",
                             hint="give the coordination server's URL, e.g. https://headscale.example.com")  # fmt: skip


def group_vars_text(tags: list[str], login_server: str | None) -> str:
    """Lines for group_vars/all.yml that `meshctl init` writes for a tailnet mesh (options checked by
    ``check_tailnet_options`` before anything is written)."""
    lines = ["# Tailscale (see roles/tailscale/README.md for every variable)."]
    lines.append(f"tailscale_tags: {yaml.safe_dump(list(tags), default_flow_style=True).strip()}")
    if login_server:
        lines.append(f"tailscale_login_server: {yaml.safe_dump(login_server).splitlines()[0]}")
    return "\n".join(lines) + "\n"


# The range Tailscale gives its nodes' IPv4 addresses (CGNAT space), as role mesh's default
# mesh_tailnet_cidr says; group_vars' mesh_tailnet_cidr narrows or moves it (a Headscale with its
# own prefixes).
TAILNET_CIDR = str(resources.role_defaults("mesh")["mesh_tailnet_cidr"])


def tailnet_cidr(mesh: Mesh | None) -> netaddr.IPNetwork:
    """mesh_tailnet_cidr from the mesh's group_vars/all.yml, else Tailscale's range."""
    value = TAILNET_CIDR
    path = mesh.path / "group_vars" / "all.yml" if mesh is not None else None
    if path is not None and path.is_file():
        try:
            value = (settings.load(path.read_text(encoding="utf-8")) or {}).get("mesh_tailnet_cidr") or TAILNET_CIDR
        except (OSError, ValueError, yaml.YAMLError, AttributeError):
            value = TAILNET_CIDR
    try:
        return netaddr.IPNetwork(str(value), version=4)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        raise InventoryError(f"mesh_tailnet_cidr {value!r} in group_vars/all.yml is not an IPv4 network",
                             hint=f"use a CIDR such as {TAILNET_CIDR}") from None  # fmt: skip


def record_addresses(nodes: list[Node], reports: dict, everyone: list[Node] = (),
                     cidr: netaddr.IPNetwork | None = None) -> list[str]:  # fmt: skip
    """Write each node's tailnet IPv4 (from the tailscale role's report in a run's ``reports``) into
    its record.

    The address is what the node says: it is recorded only when it is an IPv4 host address inside
    the tailnet's range (``cidr``) that no other node of ``everyone`` has; else the node keeps its
    address and a note says why. Returns one note per node whose address changed (the other nodes'
    Slurm and NFS settings follow on the same run, but a user should know) or was refused.
    """
    cidr = cidr or netaddr.IPNetwork(TAILNET_CIDR)
    notes = []
    for node in nodes:
        report = reports.get(node.name) or {}
        reported = (report.get("after") or {}).get("ipv4") if isinstance(report.get("after"), dict) else None
        if not reported or reported == node.mesh_address:
            continue
        problem = address_problem(reported, node, everyone, cidr)
        if problem:
            notes.append(f"{node.name}: reported tailnet address {display.clean(str(reported))[:60]!r} refused "
                         f"({problem}); it keeps {node.mesh_address or 'no mesh address'}")  # fmt: skip
            continue
        notes.append(f"{node.name}: mesh address {node.mesh_address or '-'} -> {reported} (its tailnet IPv4)")
        node.mesh_address = str(netaddr.IPAddress(reported))
    return notes


def address_problem(reported: object, node: Node, everyone, cidr: netaddr.IPNetwork) -> str | None:
    """Why a reported tailnet address cannot be recorded for ``node``, or None."""
    if not isinstance(reported, str) or not re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", reported):
        return "not an IPv4 address"
    try:
        address = netaddr.IPAddress(reported, version=4)
    except (netaddr.AddrFormatError, ValueError):
        return "not an IPv4 address"
    if address not in cidr or address in (cidr.network, cidr.broadcast):
        return f"outside the tailnet's range {cidr} (mesh_tailnet_cidr)"
    holder = next((n.name for n in everyone if n.name != node.name and n.mesh_address == str(address)), None)
    if holder:
        return f"it is {holder}'s mesh address"
    return None
