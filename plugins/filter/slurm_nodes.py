# Copyright: meshctl contributors; Apache-2.0
"""Filters of the roles for ``slurm_nodes``: thin adapters of the shared core
(``plugins/module_utils/mesh_slurm_nodes.py``, which meshctl imports too)."""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_slurm_nodes import (
    features_to_update,
    head_runs_jobs,
    slurm_gres_lines,
    slurm_node_line,
    slurm_node_params,
)


class FilterModule:
    def filters(self):
        return {
            "features_to_update": features_to_update,
            "head_runs_jobs": head_runs_jobs,
            "slurm_node_params": slurm_node_params,
            "slurm_node_line": slurm_node_line,
            "slurm_gres_lines": slurm_gres_lines,
        }
