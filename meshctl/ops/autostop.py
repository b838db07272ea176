"""`meshctl autostop`: a rented node's idle stop (its ``idle_stop`` in mesh.yml) set or cancelled,
and the head converged only when its power plan changes (Slurm's power saving lives there)."""

from __future__ import annotations

from dataclasses import dataclass

from meshctl import core, runner
from meshctl.errors import UsageError
from meshctl.model import head_of, node_named
from meshctl.ops import apply, work

OFF = ("off", "never", "false", "0", "none")


@dataclass
class Autostop:
    """What ``autostop`` did: the node, its idle time in seconds (0: never), and whether the head
    was converged (False: its power plan was already so)."""

    name: str
    seconds: int
    converged: bool


def seconds_of(duration: str) -> int:
    """DURATION (30m, 1h30m, 90s, 30 minutes) in seconds; 0 for off; a UsageError naming the forms."""
    if duration.strip().lower() in OFF:
        return 0
    power = core.power_save
    try:
        return power.duration_seconds(duration, what="", never="off")
    except power.PowerSaveError as exc:
        raise UsageError(str(exc), hint="write it as 30m, 1h30m, 90s or 30 minutes, or off") from None


def autostop(w: work.Work, name: str, duration: str, verbosity: int = 0) -> Autostop:
    """Write NAME's idle_stop (refused before anything changes for the head, a node not set up yet, or
    a node its provider cannot stop and bring back) and converge the head when the power plan
    changed; a converge that fails puts the old idle_stop back."""
    power = core.power_save
    seconds = seconds_of(duration)
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    node = node_named(nodes, name)
    if "head" in node.roles:
        raise UsageError(f"{name} cannot be stopped when idle: the head is never stopped (every node needs it)",
                         hint="give a rented compute node its autostop instead (`meshctl status` shows each "
                         "node's role)")  # fmt: skip
    if node.state != "active":
        raise UsageError(f"{name} is not set up yet ({node.state}): its autostop is set once it is a node",
                         hint=f"finish it first (`meshctl add-node {node.host}` again), then set it")  # fmt: skip
    by_provider = mesh.setting("mesh_idle_stop_by_provider", mesh_vars)
    if seconds:
        plan = power.power_plan({name: {**node.hostvars(), "idle_stop": duration}}, by_provider)
        if name in plan["refused"]:
            raise UsageError(f"{name} cannot be stopped when idle: {plan['refused'][name]}",
                             hint="`meshctl machines` shows where each node runs")  # fmt: skip
    before = node.extra.get("idle_stop")
    planned = power.power_plan({n.name: n.hostvars() for n in nodes}, by_provider)["nodes"]
    node.extra["idle_stop"] = duration if seconds else False
    changes = power.power_plan({n.name: n.hostvars() for n in nodes}, by_provider)["nodes"] != planned
    # The write inside the try: a Ctrl+C that lands just after it puts the old idle time back too.
    try:
        w.save()
        if changes:
            apply.apply(w, runner.Progress(), head_of(nodes).name, verbosity=verbosity)
    except BaseException:
        if before is None:
            node.extra.pop("idle_stop", None)
        else:
            node.extra["idle_stop"] = before
        w.save()  # as it was: the head did not take the new idle time
        raise
    return Autostop(name, seconds, changes)
