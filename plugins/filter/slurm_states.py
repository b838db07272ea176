# Copyright: meshctl contributors; Apache-2.0
"""Slurm's node state words for the roles: the collection's one list of them (module_utils
``mesh_slurm``), as filters.

``slurm_not_ready``: of ``sinfo --format=%N|%T`` lines (or bare state words), those whose node does
not take jobs or does not answer Slurm. ``slurm_powering_down``: of such lines, the names of the
nodes Slurm is stopping (SuspendProgram run). ``slurm_state``: one word read (base, flags, known).
``slurm_power_flags``: the flags of power saving, for the health check's shell pattern.
"""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_slurm


def slurm_not_ready(lines):
    """The lines (``name|state`` or ``state``) whose state is not ready (``mesh_slurm.ready``)."""
    return [line for line in lines or [] if not mesh_slurm.ready(str(line).rsplit("|", 1)[-1])]


def slurm_powering_down(lines):
    """The names of the ``name|state`` lines whose node Slurm is stopping (``mesh_slurm.powering_down``)."""
    return mesh_slurm.powering_down_names(lines)


def slurm_power_flags(_ignored=None):
    """The flag characters of power saving (``mesh_slurm.POWER_FLAGS``), for a shell pattern."""
    return mesh_slurm.POWER_FLAGS


def slurm_state(word):
    """``{"state", "base", "flags", "known"}`` of one state word (``mesh_slurm.parse``)."""
    return mesh_slurm.parse(word)


class FilterModule:
    def filters(self):
        return {
            "slurm_not_ready": slurm_not_ready,
            "slurm_powering_down": slurm_powering_down,
            "slurm_state": slurm_state,
            "slurm_power_flags": slurm_power_flags,
        }
