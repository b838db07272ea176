# Copyright: meshctl contributors; Apache-2.0
"""Burst pools for the roles: thin adapters of module_utils/mesh_burst.py (the logic and its tests live there)."""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_burst
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import PROVIDERS


def burst_pools(pools):
    """``burst_pools`` checked (a run refuses what `meshctl check` refuses, with the same words)."""
    return mesh_burst.check_pools(pools, PROVIDERS)


def burst_nodes(pools):
    """Every pool node's name, sorted."""
    return sorted(mesh_burst.pool_nodes(pools))


def burst_slurm_lines(pools, features=(), power_prefix="meshctl_idle_", access=""):
    return mesh_burst.slurm_lines(pools, features, power_prefix, access)


def burst_gres_lines(pools):
    return mesh_burst.gres_lines(pools)


def burst_providers(pools, configured):
    return mesh_burst.burst_providers(pools, configured)


class FilterModule:
    def filters(self):
        return {"burst_pools": burst_pools, "burst_nodes": burst_nodes, "burst_slurm_lines": burst_slurm_lines,
                "burst_gres_lines": burst_gres_lines, "burst_providers": burst_providers}  # fmt: skip
