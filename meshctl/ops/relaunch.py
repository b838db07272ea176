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
for (``meshctl.ops.relaunch_node``), which launches it again (``meshctl.ops.machine.relaunch``,
from the spec read here, ``read_spec``). Its failure marks the node DOWN with the reason
(``mark_down``), as a resume the provider refuses does. The control machine's next run finds the
node's new instance by the node's name (``cloud.moved``) and reaches it with its own key; its host
key is learnt on that first contact, as for any new machine.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from meshctl import cloud, core, headcopy
from meshctl.errors import UsageError


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
