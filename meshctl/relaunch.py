"""A node whose provider cannot stop (capability ``relaunch``), terminated while idle, launched again
and set up from scratch by the head.

A node of such a provider that opts in (``idle_terminate: true`` beside its ``idle_stop``) is
terminated by Slurm's power saving when idle, and a job that needs it has the head launch a new
instance of the same type in the same region, named as the node, and converge it as ``meshctl
apply --limit NODE`` would: the same roles, the head's copy of the mesh (role power_save).

On the control machine, every run with such a node hands role power_save what the head needs
for that (``control_vars``): meshctl's own code as one archive whose bytes depend only on the
files (so it is copied again only when it changed), the Python packages it needs, and the
control machine's public key of each such node (authorized on a new instance, so that the
control machine reaches it as before). The head's copy of ``mesh.yml`` is the role's work
(filter ``head_copy``).

On the head, the relaunch service (root) runs ``meshctl relaunch-node`` for each node Slurm asked
for (``relaunch_node``). Its failure marks the node DOWN with the reason, as a resume the provider
refuses does. The control machine's next run finds the node's new instance by the node's name
(``cloud.moved``) and reaches it with its own key; its host key is learnt on that first contact,
as for any new machine.
"""

from __future__ import annotations

import atexit
import gzip
import hashlib
import io
import json
import os
import shlex
import shutil
import stat
import subprocess
import tarfile
import tempfile
from functools import cache
from importlib import metadata
from pathlib import Path

from meshctl import cloud, hostkeys, resources, ssh
from meshctl.errors import MeshctlError, UsageError
from meshctl.mesh import Mesh, Node

DATA_PARTS = ("playbooks", "roles", "plugins", "meta", "galaxy.yml")
SKIP = ("__pycache__", ".pyc", ".pyo")
KEY_NAME = "meshctl-head-"  # + the first 12 hex digits of the head key's sha256: its name at the provider


def relaunchable(nodes: list[Node]) -> list[Node]:
    """The nodes the head may have to launch again: instances of a provider that cannot stop."""
    return [n for n in nodes if cloud.provider_of(n) in cloud.RELAUNCHED]


def requirements() -> list[str]:
    """What meshctl needs on the head, from its own package metadata (pyproject's dependencies):
    the runtime ones, not the tests' and not Mitogen (plain Ansible there)."""
    try:
        wanted = metadata.requires("meshctl") or []
    except metadata.PackageNotFoundError:
        wanted = []
    return sorted(r for r in wanted if "extra ==" not in r and not r.lower().startswith("mitogen"))


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
    """``archive_bytes`` in a file of this process (removed at exit), for role power_save to copy."""
    folder = Path(tempfile.mkdtemp(prefix="meshctl-code-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "meshctl-code.tar.gz"
    path.write_bytes(archive_bytes())
    return path


def control_vars(nodes: list[Node], mesh_vars: dict) -> dict:
    """What role power_save needs to give the head its relaunch service: empty without a node the
    head may launch again, and on the head's own copy (its meshctl hands nothing on)."""
    wanted = relaunchable(nodes)
    if not wanted or mesh_vars.get("meshctl_head_copy"):
        return {}
    keys = {}
    for node in wanted:
        public = Path(f"{node.ssh_key}.pub") if node.ssh_key else None
        if public and public.is_file():
            keys[node.name] = public.read_text(encoding="utf-8").strip()
    return {"power_save_control_code": str(code_archive()), "power_save_control_requirements": requirements(),
            "power_save_control_keys": keys}  # fmt: skip


def key_name(public_key: str) -> str:
    return KEY_NAME + hashlib.sha256(" ".join(public_key.split()[:2]).encode()).hexdigest()[:12]


def register_key(api, public_key: str) -> str:
    """The head's key's name at the provider, registered first when it is not (one key per launch)."""
    return cloud.call(api.register_key, key_name(public_key), public_key)


MAX_SPEC_BYTES = 64 * 1024
RECORDS = "relaunched"  # in the head's copy of the mesh (root's, 0700): <node>.json per launch


def write_record(mesh: Mesh, name: str, ref: str, host: str, port: int) -> None:
    """The head's word that it launched REF for NAME, with the host keys it met there: the control
    machine takes an instance bearing a node's name for that node only with this record, and then
    trusts only these keys (``read_record``, ``membership.follow_moves``)."""
    from meshctl.mesh import atomic_write

    folder = mesh.path / RECORDS
    folder.mkdir(mode=0o700, exist_ok=True)
    record = {"node": name, "instance": ref, "host": host, "port": port,
              "host_keys": hostkeys.keys_of(mesh.known_hosts, host, port)}  # fmt: skip
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
    return {"instance": record["instance"], "host_keys": keys}


def read_record(mesh: Mesh, head: Node, mesh_vars: dict, name: str) -> dict | None:
    """The head's relaunch record of NAME, read over SSH from its copy of the mesh (None when the
    head has none or cannot be asked)."""
    folder = mesh.setting("power_save_control_dir", mesh_vars,
                          resources.role_defaults("power_save")["power_save_control_dir"])  # fmt: skip
    path = f"{folder}/{RECORDS}/{name}.json"
    command = ("" if head.user == "root" else "sudo -n ") + f"cat {shlex.quote(path)}"
    argv = ssh.ssh_argv(head.host, head.user, head.port, head.ssh_key, mesh.known_hosts)
    done = ssh.run(argv, command, timeout=30)
    return parse_record(done.stdout[:MAX_SPEC_BYTES], name) if done.rc == 0 else None


def read_plain_file(path: Path, limit: int = MAX_SPEC_BYTES) -> str:
    """PATH's text, read as root from a folder a less privileged user (SlurmUser) can write: never
    through a symlink, never from a FIFO or a device (no hanging, no endless read), at most LIMIT bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(f"{path} is over {limit} bytes")
    return data.decode("utf-8")


def read_spec(path: Path) -> dict:
    try:
        spec = json.loads(read_plain_file(path))
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot read the launch spec {path}: {exc}",
            hint="the node was not terminated by meshctl-power; start it with `meshctl launch`",
        ) from None
    plain = cloud.common().PLAIN_RE  # what the suspend accepted from the provider
    if not all(isinstance(spec.get(k), str) and plain.fullmatch(spec[k]) for k in ("instance_type", "region")):
        raise UsageError(f"{path} names no instance type and region (plain names)",
                         hint="launch the node with `meshctl launch`")  # fmt: skip
    return spec


def relaunch_node(mesh: Mesh, name: str, spec_file: Path, key_file: Path, authorized: Path | None, converge,
                  say=print, launch_timeout: float = cloud.LAUNCH_TIMEOUT) -> Node:  # fmt: skip
    """Launch NAME again as its spec says, reach it with the head's key (KEY_FILE), authorize the
    control machine's key on it (AUTHORIZED), record it in the head's mesh and converge it and the
    head: ``converge(mesh, nodes, mesh_vars, NAME)`` (the command passes ``apply --limit NAME``).
    A new instance that cannot be set up is terminated (it would bill)."""
    spec = read_spec(spec_file)
    with mesh.lock(f"relaunch {name}", wait=600):
        nodes, mesh_vars = mesh.load()
        node = next((n for n in nodes if n.name == name), None)
        provider = cloud.provider_of(node) if node is not None else None
        if provider not in cloud.RELAUNCHED:
            raise UsageError(f"{name} is no node the head launches again (its provider can stop it, or it has "
                             "no instance)", hint="`meshctl status` lists the nodes")  # fmt: skip
        api = cloud.account(mesh, mesh_vars, provider)
        public = Path(f"{key_file}.pub").read_text(encoding="utf-8").strip()
        key = register_key(api, public)
        say(f"{name}: launching {spec['instance_type']} in {spec['region']} at {provider} (key {key})")
        inst = cloud.launch(mesh, mesh_vars, provider, spec["instance_type"], name,
                            {"region": spec["region"], "ssh_key_names": [key]}, timeout=launch_timeout)  # fmt: skip
        ref = cloud.instance_ref(inst)
        try:
            cloud.wait_for_ssh(inst["ssh_host"], inst["ssh_port"], launch_timeout)
            hostkeys.forget(mesh.known_hosts, node.host, node.port)
            hostkeys.forget(mesh.known_hosts, inst["ssh_host"], inst["ssh_port"])
            node.move_to(inst["ssh_host"], int(inst["ssh_port"]), ref)
            node.user, node.ssh_key = inst["ssh_user"], str(key_file)
            if authorized is not None and authorized.is_file():
                argv = ssh.ssh_argv(node.host, node.user, node.port, node.ssh_key, mesh.known_hosts)
                done = ssh.run(argv, "umask 077; mkdir -p ~/.ssh; cat >> ~/.ssh/authorized_keys",
                               stdin=authorized.read_text(encoding="utf-8").strip() + "\n")  # fmt: skip
                if done.rc != 0:
                    what, todo = ssh.explain_failure(done.stderr, node.user, node.host, node.port)
                    raise UsageError(f"{name}: cannot reach the new instance {ref}: {what}", hint=todo)
            mesh.save(nodes, mesh_vars)
            write_record(mesh, name, ref, node.host, node.port)
            say(f"{name}: {ref} runs at {node.host}:{node.port}; setting it up (apply --limit {name})")
            converge(mesh, nodes, mesh_vars, name)
        except MeshctlError as exc:
            try:
                cloud.terminate(mesh, mesh_vars, ref)
                exc.hint = (exc.hint + "; " if exc.hint else "") + f"the new instance {ref} was terminated"
            except MeshctlError as gone:
                exc.hint = (exc.hint + "; " if exc.hint else "") + f"terminate {ref} by hand: {gone}"
            raise
    spec_file.unlink(missing_ok=True)
    return node


def mark_down(name: str, reason: str, scontrol: str = "scontrol") -> None:
    """Slurm's reason for a node the head could not launch again (as meshctl-power says it), cleaned."""
    reason = resources.plugin("module_utils.mesh_text").slurm_reason(reason)
    subprocess.run([scontrol, "update", f"nodename={name}", "state=down", f"reason=meshctl: {reason}"],
                   capture_output=True, check=False)  # fmt: skip
