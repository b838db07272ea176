"""meshctl autostop: set or cancel a rented node's idle stop (mesh.yml's idle_stop), on the head only."""

from __future__ import annotations

import click

from meshctl import completion, core, display, runner
from meshctl.errors import UsageError
from meshctl.mesh import Mesh
from meshctl.model import head_of, node_named
from meshctl.ops import apply
from meshctl.options import mesh_option, verbose_option, wait_option


@click.command("autostop")
@click.argument("name", shell_complete=completion.node_names)
@click.argument("duration")
@mesh_option
@wait_option
@verbose_option
def command(name, duration, mesh_dir, wait, verbosity) -> None:
    """Stop NAME after DURATION idle (30m, 1h30m, 90s, 30 minutes), or never (off).

    Writes the node's idle_stop in mesh.yml (refused before anything changes when its provider cannot
    stop it and bring it back, for the head, and for a node not set up yet) and converges the head
    only, and only when its power plan changes: Slurm's power saving lives there.
    """
    power = core.power_save
    off = duration.strip().lower() in ("off", "never", "false", "0", "none")
    try:
        seconds = 0 if off else power.duration_seconds(duration)
    except power.PowerSaveError as exc:
        raise UsageError(str(exc), hint="write it as 30m, 1h30m, 90s or 30 minutes, or off") from None
    mesh = Mesh.find(mesh_dir)
    with mesh.lock(f"autostop {name} {duration}", wait=wait):
        nodes, mesh_vars = mesh.load()
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
            hostvars = {**node.hostvars(), "idle_stop": duration}
            plan = power.power_plan({name: hostvars}, by_provider)
            if name in plan["refused"]:
                raise UsageError(f"{name} cannot be stopped when idle: {plan['refused'][name]}",
                                 hint="`meshctl machines` shows where each node runs")  # fmt: skip
        before = node.extra.get("idle_stop")
        planned = power.power_plan({n.name: n.hostvars() for n in nodes}, by_provider)["nodes"]
        node.extra["idle_stop"] = False if off else duration
        changes = power.power_plan({n.name: n.hostvars() for n in nodes}, by_provider)["nodes"] != planned
        mesh.save(nodes, mesh_vars)
        if changes:
            try:
                apply.apply(mesh, nodes, mesh_vars, runner.Progress(), head_of(nodes).name, verbosity=verbosity)
            except BaseException:
                if before is None:
                    node.extra.pop("idle_stop")
                else:
                    node.extra["idle_stop"] = before
                mesh.save(nodes, mesh_vars)  # as it was: the head did not take the new idle time
                raise
    said = "never stopped when idle" if off else f"stopped after {duration} idle ({seconds} s)"
    display.echo(f"{name}: {said}" + ("" if changes else " (the head's power plan was already so: nothing run)"))
