# Copyright: meshctl contributors; Apache-2.0
"""Filters of the roles for ``job_users``: thin adapters of the shared core
(``plugins/module_utils/mesh_job_users.py``, which meshctl imports too)."""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_job_users import (
    getent_tables,
    job_users_conflicts,
    job_users_pending,
    job_users_problems,
)


class FilterModule:
    def filters(self):
        return {
            "job_users_problems": job_users_problems,
            "job_users_conflicts": job_users_conflicts,
            "job_users_pending": job_users_pending,
            "getent_tables": getent_tables,
        }
