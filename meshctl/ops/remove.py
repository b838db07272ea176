"""`meshctl remove-node`: the node drained and taken out of Slurm and the head's files, then out of
mesh.yml (its instance deleted with ``--terminate``); no other node is contacted."""

from __future__ import annotations

from meshctl import burst, cloud, runner
from meshctl.errors import MeshctlError, ProviderError, UsageError
from meshctl.model import head_of, node_named
from meshctl.ops.work import Work


def remove_node(w: Work, name: str, force: bool, timeout: float, progress, say=print, verbosity: int = 0,
                terminate: bool = False):  # fmt: skip
    """Drain the node and wait for its jobs (head), stop its slurmd and take it off the tailnet (the
    node, when it can be reached), delete it from Slurm and the head's files (head), then from mesh.yml.
    No other node is contacted."""
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    node = node_named(nodes, name)
    if "head" in node.roles:
        raise UsageError(f"{name} is the head; removing it would end the mesh", hint="remove the other nodes first")
    if terminate and not node.instance:
        raise UsageError(
            f"--terminate: {name} is no provider's instance meshctl knows of",
            hint="delete the machine where you rented it (nodes added as PROVIDER:NAME record theirs)",
        )
    if terminate:
        cloud.stored_key(mesh, mesh_vars, node.instance.partition(":")[0])  # the account, before anything changes
    head = head_of(nodes)
    remaining = [n for n in nodes if n.name != name]
    extravars = {"slurm_controller_drain_force": bool(force), "slurm_controller_drain_timeout": int(timeout)}
    # The run's inventory is the mesh without the leaving node, which the run reaches as ``leaving``.
    result = Work(mesh, remaining, mesh_vars).run("remove_node.yml", progress, targets=[head], leaving=[node],
                                                  extravars=extravars, verbosity=verbosity)  # fmt: skip
    if result.failed or head.name in result.unreachable:
        again = runner.again(f"meshctl remove-node {name}")
        retry = f"{name} is still in the mesh; fix the problem and run `{again}` again"
        runner.raise_for(result, retry, done=f"{name} is still in the mesh", head=head.name)
    if name in result.unreachable:
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
    return result
