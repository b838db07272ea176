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


def _fields(line):
    """``name|state[|since|reason]`` (or ``state``) as ``(name, state, since, reason)``: since, the
    time of the node's reason in seconds (0 where none is known)."""
    parts = str(line).split("|", 3)
    if len(parts) == 1:
        return "", parts[0], 0, ""
    since = parts[2] if len(parts) > 2 else ""
    return parts[0], parts[1], int(since) if since.isdigit() else 0, parts[3] if len(parts) > 3 else ""


def slurm_kept(lines, before=0):
    """Of ``name|state|since|reason`` lines, the ones of a node drained or failed (``mesh_slurm.kept_out``)
    with a reason set before BEFORE (the run's start, in seconds): taken out before the run, not by it,
    and left so by it (only a resume brings such a node back)."""
    kept = []
    for line in lines or []:
        _name, state, since, _reason = _fields(line)
        if mesh_slurm.kept_out(state) and 0 < since < int(before or 0):
            kept.append(line)
    return kept


def slurm_not_ready(lines, before=0):
    """The lines (``name|state``, ``name|state|since|reason`` or ``state``) whose state is not ready
    (``mesh_slurm.ready``), less those ``slurm_kept`` keeps as they were before BEFORE."""
    kept = slurm_kept(lines, before)
    return [line for line in lines or [] if not mesh_slurm.ready(_fields(line)[1]) and line not in kept]


def slurm_kept_notes(lines, before=0):
    """What to tell the user of each ``slurm_kept`` line: the node stays as it was, why, and the fix."""
    notes = []
    for line in slurm_kept(lines, before):
        name, state, _since, reason = _fields(line)
        why = f" ({reason})" if reason and reason != "none" else ""
        notes.append(f"{name} stays {mesh_slurm.base(state)} as before this run{why}: once its cause is gone, "
                     f"`scontrol update nodename={name} state=resume` on the head gives it jobs again "
                     "(the health check's own drain lifts itself)")  # fmt: skip
    return notes


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
