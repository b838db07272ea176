"""A node whose provider cannot stop (capability ``relaunch``), terminated while idle, launched again
and set up from scratch by the head.

A node of such a provider that opts in (``idle_terminate: true`` beside its ``idle_stop``) is
terminated by Slurm's power saving when idle, and a job that needs it has the head launch a new
instance of the same type in the same region, named as the node, and converge it as ``meshctl
apply --limit NODE`` would: the same roles, the head's copy of the mesh (role power_save).

On the control machine, every run with such a node hands role power_save what the head needs
for that (``meshctl.headcopy.control_vars``): meshctl's own code as one archive whose bytes depend only on the
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

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from meshctl import cloud, core, headcopy, hostkeys, runner, ssh
from meshctl.errors import MeshctlError, UsageError
from meshctl.mesh import Mesh
from meshctl.model import Node
from meshctl.ops import apply, work

KEY_NAME = "meshctl-head-"  # + the first 12 hex digits of the head key's sha256: its name at the provider


def key_name(public_key: str) -> str:
    return KEY_NAME + hashlib.sha256(" ".join(public_key.split()[:2]).encode()).hexdigest()[:12]


def register_key(api, public_key: str) -> str:
    """The head's key's name at the provider, registered first when it is not (one key per launch)."""
    return cloud.call(api.register_key, key_name(public_key), public_key)


def read_plain_file(path: Path, limit: int = headcopy.MAX_SPEC_BYTES) -> str:
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


def converge(w: work.Work, name: str) -> None:
    """The new instance and the head set up: ``apply --limit NAME``."""
    apply.apply(w, runner.Progress(), limit=name)


def relaunch_node(mesh: Mesh, name: str, spec_file: Path, key_file: Path, authorized: Path | None,
                  converge=converge, say=print, launch_timeout: float = cloud.LAUNCH_TIMEOUT) -> Node:  # fmt: skip
    """Launch NAME again as its spec says, reach it with the head's key (KEY_FILE), authorize the
    control machine's key on it (AUTHORIZED), record it in the head's mesh and set it and the head
    up: ``converge(work, NAME)`` (``apply --limit NAME``; a test passes its own).
    A new instance that cannot be set up is terminated (it would bill)."""
    spec = read_spec(spec_file)
    with work.changing(mesh, f"relaunch {name}", 600) as w:
        nodes, mesh_vars = w.nodes, w.mesh_vars
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
            w.save()
            headcopy.write_record(mesh, name, ref, node.host, node.port)
            say(f"{name}: {ref} runs at {node.host}:{node.port}; setting it up (apply --limit {name})")
            converge(w, name)
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
    reason = core.mesh_text.slurm_reason(reason)
    done = subprocess.run([scontrol, "update", f"nodename={name}", "state=down", f"reason=meshctl: {reason}"],
                          capture_output=True, check=False)  # fmt: skip
    if done.returncode:  # said in the relaunch service's journal: the node stays as Slurm has it
        print(
            f"meshctl: scontrol update nodename={name} state=down failed (exit {done.returncode}): "
            f"{(done.stderr or b'').decode(errors='replace').strip()[:300]}",
            file=sys.stderr,
        )
