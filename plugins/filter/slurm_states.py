# Copyright: meshctl contributors; Apache-2.0
"""Slurm's node state words for the roles: the collection's one list of them (module_utils
``mesh_slurm``), as filters.

``slurm_not_ready``: of ``sinfo --format=%N|%T`` lines (or bare state words), those whose node does
not take jobs or does not answer Slurm, less a node drained or failed before the run began
(``slurm_kept``, with ``name|state|since|reason`` lines: a converge does not resume it;
``slurm_kept_notes`` says so and the fix). ``slurm_powering_down``: of such lines, the names of the
nodes Slurm is stopping (SuspendProgram run). ``slurm_state``: one word read (base, flags, known).
``slurm_power_flags``: the flags of power saving, for the health check's shell pattern.
"""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_slurm


def slurm_kept(lines, before=0):
    """The lines of a node drained or failed since before BEFORE (``mesh_slurm.kept_lines``)."""
    return mesh_slurm.kept_lines(lines, before)


def slurm_not_ready(lines, before=0):
    """The lines whose node is not ready, less the ones kept as before BEFORE (``mesh_slurm.not_ready_lines``)."""
    return mesh_slurm.not_ready_lines(lines, before)


def slurm_kept_notes(lines, before=0):
    """What to tell the user of each ``slurm_kept`` line (``mesh_slurm.kept_notes``)."""
    return mesh_slurm.kept_notes(lines, before)


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
            "slurm_kept": slurm_kept,
            "slurm_kept_notes": slurm_kept_notes,
            "slurm_powering_down": slurm_powering_down,
            "slurm_state": slurm_state,
            "slurm_power_flags": slurm_power_flags,
        }
