"""`meshctl remove-node`: the node drained and taken out of Slurm and the head's files, then out of
mesh.yml (its instance deleted with ``--terminate``); no other node is contacted."""

from __future__ import annotations

from dataclasses import dataclass, field

from meshctl import burst, cloud, runner
from meshctl.errors import MeshctlError, ProviderError, UsageError
from meshctl.model import head_of, node_named
from meshctl.ops.work import Work


@dataclass
class TerminatePlan:
    """What ``--terminate`` deletes besides the machine: its network volume (``volume``) when the
    user said ``--delete-volume`` and nothing else mounts it; ``others``: what else mounts it."""

    volume: cloud.VolumeRow | None = None
    choice: str | None = None  # "delete", "keep" or None
    others: list[str] = field(default_factory=list)

    @property
    def deletes_volume(self) -> bool:
        return self.volume is not None and self.choice == "delete" and not self.others


def terminate_plan(w: Work, name: str, terminate: bool, choice: str | None) -> TerminatePlan:
    """Before anything changes: the node's network volume, and the user's word on it. A machine
    that mounts one is refused without --delete-volume or --keep-volume (the volume bills on
    whether or not anything uses it: never left behind unasked)."""
    if choice and not terminate:
        raise UsageError(f"--{choice}-volume goes with --terminate",
                         hint=f"`meshctl remove-node {name} --terminate --{choice}-volume`")  # fmt: skip
    node = next((n for n in w.nodes if n.name == name), None)
    if not terminate or node is None or not node.instance or "head" in node.roles:
        return TerminatePlan(choice=choice)
    cloud.stored_key(w.mesh, w.mesh_vars, node.instance.partition(":")[0])  # the account, before anything changes
    volume, others = cloud.volume_of(w.mesh, w.mesh_vars, node.instance)
    if volume is not None and choice is None:
        raise UsageError(
            f"{name}'s machine {node.instance} mounts {volume.words()}, which bills until it is deleted, "
            "whether or not anything uses it" + (f" (also mounted by {', '.join(others)})" if others else ""),
            hint=f"say what becomes of it: `meshctl remove-node {name} --terminate --delete-volume` (its data is "
            f"lost) or `--keep-volume` (it bills on; `meshctl machines` lists it)",
        )
    return TerminatePlan(volume, choice, others)


def remove_node(w: Work, name: str, force: bool, timeout: float, progress, say=print, verbosity: int = 0,
                terminate: bool = False, plan: TerminatePlan | None = None):  # fmt: skip
    """Drain the node and wait for its jobs (head), stop its slurmd and take it off the tailnet (the
    node, when it can be reached), delete it from Slurm and the head's files (head), then from mesh.yml.
    No other node is contacted. With TERMINATE, its machine is deleted at its provider, and its
    network volume as PLAN says (``terminate_plan``, asked before anything changes)."""
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    node = node_named(nodes, name)
    if "head" in node.roles:
        raise UsageError(f"{name} is the head; removing it would end the mesh", hint="remove the other nodes first")
    if terminate and not node.instance:
        raise UsageError(
            f"--terminate: {name} is no provider's instance meshctl knows of",
            hint="delete the machine where you rented it (nodes added as PROVIDER:NAME record theirs)",
        )
    if terminate and plan is None:
        plan = terminate_plan(w, name, terminate, None)
    head = head_of(nodes)
    remaining = [n for n in nodes if n.name != name]
    extravars = {"slurm_controller_drain_force": bool(force), "slurm_controller_drain_timeout": int(timeout)}
    gone = cloud.machine_gone(mesh, mesh_vars, node)  # its provider's word: no SSH waits on what is not there
    if gone:
        extravars["meshctl_leaving_gone"] = True
    # The run's inventory is the mesh without the leaving node, which the run reaches as ``leaving``.
    result = Work(mesh, remaining, mesh_vars).run("remove_node.yml", progress, targets=[head], leaving=[node],
                                                  extravars=extravars, verbosity=verbosity)  # fmt: skip
    if result.failed or head.name in result.unreachable:
        again = runner.again(f"meshctl remove-node {name}")
        retry = f"{name} is still in the mesh; fix the problem and run `{again}` again"
        runner.raise_for(result, retry, done=f"{name} is still in the mesh", head=head.name)
    if gone:
        say(
            f"{name}: its machine is {gone}: its slurmd, Tailscale login, munge key and MLflow account were left "
            "as they are; delete the machine at its provider if it may boot again (it would register with Slurm "
            "again), and run `meshctl rotate-munge-key`: with the mesh's munge key it can act as any user in Slurm"
        )
    elif name in result.unreachable:
        say(
            f"{name}: could not be reached: its slurmd, Tailscale login, munge key and MLflow account were left "
            "as they are; delete the machine at its provider (it would register with Slurm again if it booted), "
            "and run `meshctl rotate-munge-key`: with the mesh's munge key it can act as any user in Slurm"
        )
    w.save(remaining)
    mesh.forget_facts(name)
    say(f"{name}: removed from {mesh.inventory.name}")
    if burst.pool_of(mesh_vars, name) is not None and not terminate:
        # A pool's machine is never kept: the head's power program terminates it as Slurm powers the
        # node down; here too, whatever runs under the node's name, so that nothing bills on.
        done = burst.terminate_named(mesh, mesh_vars, name, say)
        say(f"{name}: pool {burst.pool_of(mesh_vars, name)['name']}'s node: "
            + (f"its machine {', '.join(done)} is terminated" if done else "no machine of it runs")
            + "; the pool keeps the node (idle~; `meshctl burst remove` takes the pool out)")  # fmt: skip
    if terminate:
        try:
            cloud.terminate(mesh, mesh_vars, node.instance)
        except MeshctlError as exc:
            raise ProviderError(
                f"{name} left the mesh, but its instance {node.instance} was not deleted: {exc}",
                hint=exc.hint or "delete it at the provider (it bills until then)",
            ) from None
        say(f"{name}: instance {node.instance} deleted at its provider")
        forget_volume(w, name, plan, say)
    return result


def forget_volume(w: Work, name: str, plan: TerminatePlan, say) -> None:
    """The terminated machine's network volume, as the user said: deleted, or kept (and said so)."""
    volume = plan.volume
    if volume is None:
        return
    if plan.choice == "keep" or plan.others:
        why = f"mounted by {', '.join(plan.others)} too" if plan.others else "as --keep-volume said"
        say(f"{name}: {volume.words()} kept, {why}: it bills until it is deleted (`meshctl machines` lists it)")
        return
    try:
        cloud.delete_volume(w.mesh, w.mesh_vars, volume)
    except MeshctlError as exc:
        raise ProviderError(
            f"{name} left the mesh and its instance was deleted, but {volume.words()} was not: {exc}",
            hint=exc.hint or f"delete it at {cloud.capabilities(volume.provider).title} (it bills until then)",
        ) from None
    say(f"{name}: {volume.words()} deleted at its provider")
