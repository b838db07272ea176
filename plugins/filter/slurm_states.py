# Copyright: meshctl contributors; Apache-2.0
"""Slurm's node state words for the roles: the collection's one list of them (module_utils
``mesh_slurm``), as filters.

``slurm_not_ready``: of ``sinfo --format=%N|%T`` lines (or bare state words), those whose node does
not take jobs or does not answer Slurm. ``slurm_state``: one word read (base, flags, known).
"""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_slurm


def slurm_not_ready(lines):
    """The lines (``name|state`` or ``state``) whose state is not ready (``mesh_slurm.ready``)."""
    return [line for line in lines or [] if not mesh_slurm.ready(str(line).rsplit("|", 1)[-1])]


def slurm_state(word):
    """``{"state", "base", "flags", "known"}`` of one state word (``mesh_slurm.parse``)."""
    return mesh_slurm.parse(word)


class FilterModule:
    def filters(self):
        return {"slurm_not_ready": slurm_not_ready, "slurm_state": slurm_state}
