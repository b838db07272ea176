"""The head's copy of meshctl: what the control machine hands the head, and what the head writes back.

A node whose provider cannot stop (capability ``relaunch``: Lambda) is terminated while idle and
launched again by the head (``meshctl.ops.relaunch``). For that, every converge hands role
relaunch what the head needs (``control_vars``): meshctl's own code as one archive whose bytes
depend only on the files (so it is copied again only when it changed), the Python packages it
needs, and the control machine's public key of each such node. The head's copy of ``mesh.yml`` is
the role's work (filter ``head_copy``). The head answers with one record per launch
(``write_record``), which the control machine reads before it takes a new instance for a node
(``read_record``, ``meshctl.ops.apply.follow_moves``).
"""

from __future__ import annotations

import atexit
import gzip
import io
import json
import shlex
import shutil
import tarfile
import tempfile
from functools import cache
from importlib import metadata
from pathlib import Path

import netaddr

from meshctl import cloud, core, hostkeys, resources, ssh
from meshctl.mesh import Mesh, atomic_write
from meshctl.model import Node

DATA_PARTS = ("playbooks", "roles", "plugins", "meta", "galaxy.yml")


SKIP = ("__pycache__", ".pyc", ".pyo")


def relaunchable(nodes: list[Node]) -> list[Node]:
    """The nodes the head may have to launch again: instances of a provider that cannot stop."""
    return [n for n in nodes if cloud.provider_of(n) in cloud.RELAUNCHED]


def _runtime() -> list[str]:
    try:
        wanted = metadata.requires("meshctl") or []
    except metadata.PackageNotFoundError:
        wanted = []
    return [r for r in wanted if "extra ==" not in r]


def requirements() -> list[str]:
    """What meshctl needs on the head, from its own package metadata (pyproject's dependencies):
    the runtime ones, not the tests' and not Mitogen (the head's runs are plain Ansible unless the
    mesh sets relaunch_mitogen: ``mitogen_requirements``)."""
    return sorted(r for r in _runtime() if not r.lower().startswith("mitogen"))


def mitogen_requirements() -> list[str]:
    """Mitogen as meshctl's metadata pins it: what role relaunch adds to the head's virtualenv where
    the mesh sets relaunch_mitogen (the head's own runs then go under Mitogen's strategy)."""
    return sorted(r for r in _runtime() if r.lower().startswith("mitogen"))


def _files(root: Path, part: str):
    path = root / part
    if path.is_file():
        yield path, part
        return
    for item in sorted(path.rglob("*")):
        if item.is_file() and not item.is_symlink() and not any(s in item.name or s in item.parts for s in SKIP):
            yield item, f"{part}/{item.relative_to(path).as_posix()}"


def archive_bytes() -> bytes:
    """meshctl's package and its collection, laid out as a checkout (``meshctl/``, ``roles/``, ...),
    as a gzip'd tar whose bytes depend only on the files' paths and contents."""
    package = Path(__file__).resolve().parent
    data = resources.data_dir()
    members = [(p, a) for p, a in _files(package.parent, package.name) if not a.startswith(f"{package.name}/_data/")]
    for part in DATA_PARTS:
        if (data / part).exists():
            members += list(_files(data, part))
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        for path, arcname in sorted(members, key=lambda m: m[1]):
            info = tarfile.TarInfo(arcname)
            content = path.read_bytes()
            info.size, info.mtime, info.mode = len(content), 0, 0o755 if path.stat().st_mode & 0o100 else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(content))
    return raw.getvalue()


@cache
def code_archive() -> Path:
    """``archive_bytes`` in a file of this process (removed at exit), for role relaunch to copy."""
    folder = Path(tempfile.mkdtemp(prefix="meshctl-code-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "meshctl-code.tar.gz"
    path.write_bytes(archive_bytes())
    return path


def control_vars(nodes: list[Node], mesh_vars: dict) -> dict:
    """What role relaunch needs to give the head its relaunch service: empty without a node the
    head may launch again, and on the head's own copy (its meshctl hands nothing on)."""
    wanted = relaunchable(nodes)
    pooled = core.mesh_burst.pool_nodes(mesh_vars.get("burst_pools") if isinstance(mesh_vars.get("burst_pools"),
                                                                                  list) else [])  # fmt: skip
    if not (wanted or pooled) or mesh_vars.get("meshctl_head_copy"):
        return {}
    keys = {}
    for node in wanted:
        public = Path(f"{node.ssh_key}.pub") if node.ssh_key else None
        if public and public.is_file():
            keys[node.name] = public.read_text(encoding="utf-8").strip()
    # A pool's machine is reached from here with the key that reaches the head, until it is a node.
    head = next((n for n in nodes if "head" in n.roles), None)
    head_public = Path(f"{head.ssh_key}.pub") if head is not None and head.ssh_key else None
    for name in pooled:
        node = next((n for n in nodes if n.name == name), None)
        public = Path(f"{node.ssh_key}.pub") if node is not None and node.ssh_key else head_public
        if name not in keys and public and public.is_file():
            keys[name] = public.read_text(encoding="utf-8").strip()
    return {
        "relaunch_code": str(code_archive()),
        "relaunch_requirements": requirements(),
        "relaunch_mitogen_requirements": mitogen_requirements(),
        "relaunch_keys": keys,
    }


MAX_SPEC_BYTES = 64 * 1024


RECORDS = "relaunched"  # in the head's copy of the mesh (root's, 0700): <node>.json per launch


def write_record(mesh: Mesh, name: str, ref: str, host: str, port: int, mesh_address: str | None = None) -> None:
    """The head's word that it launched REF for NAME, with the host keys it met there: the control
    machine takes an instance bearing a node's name for that node only with this record, and then
    trusts only these keys (``read_record``, ``meshctl.ops.apply.follow_moves``)."""
    folder = mesh.path / RECORDS
    folder.mkdir(mode=0o700, exist_ok=True)
    record = {"node": name, "instance": ref, "host": host, "port": port,
              "host_keys": hostkeys.keys_of(mesh.known_hosts, host, port)}  # fmt: skip
    if mesh_address:  # a pool's machine set up by the head: the control machine has no other word of it
        record["mesh_address"] = mesh_address
    atomic_write(folder / f"{name}.json", json.dumps(record, indent=1) + "\n", mode=0o600)


def parse_record(text: str, name: str) -> dict | None:
    """The head's relaunch record of NAME as the control machine reads it (data: checked), or None."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("node") != name or not isinstance(record.get("instance"), str):
        return None
    keys = record.get("host_keys")
    if not isinstance(keys, list) or not keys or not all(hostkeys.is_public_key(k) for k in keys):
        return None
    address = record.get("mesh_address")
    valid = isinstance(address, str) and netaddr.valid_ipv4(address, flags=netaddr.INET_PTON)
    return {"instance": record["instance"], "host_keys": keys, **({"mesh_address": address} if valid else {})}


def read_record(mesh: Mesh, head: Node, mesh_vars: dict, name: str) -> dict | None:
    """The head's relaunch record of NAME, read over SSH from its copy of the mesh (None when the
    head has none or cannot be asked)."""
    folder = mesh.setting("relaunch_dir", mesh_vars, resources.role_defaults("relaunch")["relaunch_dir"])
    path = f"{folder}/{RECORDS}/{name}.json"
    command = ("" if head.user == "root" else "sudo -n ") + f"cat {shlex.quote(path)}"
    argv = ssh.ssh_argv(head.host, head.user, head.port, head.ssh_key, mesh.known_hosts)
    done = ssh.run(argv, command, timeout=30)
    return parse_record(done.stdout[:MAX_SPEC_BYTES], name) if done.rc == 0 else None
