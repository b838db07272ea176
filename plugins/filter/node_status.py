# Copyright: meshctl contributors; Apache-2.0
"""Filters of the roles for ``node_status``: thin adapters of the shared core
(``plugins/module_utils/mesh_node_status.py``, which meshctl imports too)."""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_node_status import (
    node_status,
    slurm_rows,
)


class FilterModule:
    def filters(self):
        return {"node_status": node_status, "slurm_rows": slurm_rows}
