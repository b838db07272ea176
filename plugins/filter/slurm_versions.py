# Copyright: meshctl contributors; Apache-2.0
"""Filters of the roles for ``slurm_versions``: thin adapters of the shared core
(``plugins/module_utils/mesh_slurm_versions.py``, which meshctl imports too)."""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_slurm_versions import (
    apt_policy_version,
    slurm_build_files,
    slurm_build_folder,
    slurm_builds,
    slurm_effective_versions,
    slurm_major,
    slurm_membership,
    slurm_plugins,
    slurm_version_problems,
)


class FilterModule:
    def filters(self):
        return {
            "slurm_builds": slurm_builds,
            "slurm_effective_versions": slurm_effective_versions,
            "slurm_major": slurm_major,
            "slurm_version_problems": slurm_version_problems,
            "apt_policy_version": apt_policy_version,
            "slurm_membership": slurm_membership,
            "slurm_plugins": slurm_plugins,
            "slurm_build_folder": slurm_build_folder,
            "slurm_build_files": slurm_build_files,
        }
