# Copyright: meshctl contributors; Apache-2.0
"""Filters of the roles for ``power_save``: thin adapters of the shared core
(``plugins/module_utils/mesh_power_save.py``, which meshctl imports too)."""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_power_save import (
    duration_seconds,
    head_copy,
    head_copy_leftovers,
    power_plan,
)


class FilterModule:
    def filters(self):
        return {"duration_seconds": duration_seconds, "power_plan": power_plan, "head_copy": head_copy,
                "head_copy_leftovers": head_copy_leftovers}  # fmt: skip
