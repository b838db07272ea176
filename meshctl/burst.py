"""Burst pools as the mesh holds them (``burst_pools``, module_utils/mesh_burst.py) and their
machines as the providers list them: what ``meshctl.ops.burst`` (rent, add, remove) and
``meshctl.ops.apply`` (following a pool's machine into mesh.yml) share."""

from __future__ import annotations

from collections.abc import Callable

from meshctl import cloud, core
from meshctl.errors import ProviderError, UsageError
from meshctl.mesh import Mesh


def pools(mesh_vars: dict) -> list[dict]:
    return core.mesh_burst.check_pools(mesh_vars.get("burst_pools"), cloud.PROVIDERS)


def pool_of(mesh_vars: dict, name: str) -> dict | None:
    return core.mesh_burst.pool_of(name, pools(mesh_vars))


def limit_of(mesh: Mesh, mesh_vars: dict) -> float | None:
    """``burst_max_spend`` from mesh.yml's vars, else group_vars/all.yml (None: not set)."""
    return core.mesh_burst.max_spend(mesh.setting("burst_max_spend", mesh_vars))


def live_named(mesh: Mesh, mesh_vars: dict, providers: list[str], names: set[str]) -> tuple[list[dict], dict]:
    """The instances PROVIDERS run (not gone) named as one of NAMES, and the providers that could not say."""
    answers, problems = {}, {}
    for provider in providers:
        try:
            answers[provider] = cloud.call(cloud.account(mesh, mesh_vars, provider).list)
        except (ProviderError, UsageError) as exc:
            problems[provider] = exc.message
    found = [i for listed in answers.values() for i in listed
             if i["name"] in names and i["status"] not in core.mesh_cloud.GONE]  # fmt: skip
    return found, problems


def terminate_named(mesh: Mesh, mesh_vars: dict, name: str, say: Callable[[str], None]) -> list[str]:
    """Terminate every instance the pool's providers run named NAME; returns their references."""
    pool = pool_of(mesh_vars, name)
    if pool is None:
        return []
    providers = core.mesh_burst.providers_of(pool, cloud.configured(mesh))
    found, problems = live_named(mesh, mesh_vars, providers, {name})
    done = []
    for inst in found:
        ref = cloud.instance_ref(inst)
        cloud.terminate(mesh, mesh_vars, ref)
        say(f"{name}: terminated {ref}")
        done.append(ref)
    if problems:
        said = "; ".join(f"{p} ({m})" for p, m in problems.items())
        raise ProviderError(f"{name}: could not ask {said} for instances named so",
                            hint="`meshctl machines` shows them; terminate by hand")  # fmt: skip
    return done


def pool_machines(rows: list, mesh_vars: dict) -> list:
    """ROWS (``cloud.machines``) with each machine a pool rented for one of its nodes marked as that
    node's (``h100-1 (pool h100)``): the head rented it, the control machine's mesh.yml need not
    name it."""
    import dataclasses

    members = core.mesh_burst.pool_nodes(pools(mesh_vars))
    return [dataclasses.replace(r, node=f"{r.name} (pool {members[r.name]['name']})")
            if r.node is None and r.name in members and r.status not in core.mesh_cloud.GONE else r
            for r in rows]  # fmt: skip
