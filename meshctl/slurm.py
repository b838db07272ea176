"""Slurm's words for meshctl: its node state words and flags, read from the collection's one place
(``plugins/module_utils/mesh_slurm.py``), which role slurm's filters read too."""

from __future__ import annotations

from meshctl import core

WORDS = core.mesh_slurm


def base(state: str) -> str:
    """A node's state word without Slurm's flags (``idle~`` -> ``idle``)."""
    return WORDS.base(state)


def resting_state(in_slurm: dict) -> str | None:
    """Why a node SSH cannot reach is meant to be off (Slurm's view of it: ``state``), or None."""
    return WORDS.resting(in_slurm.get("state") or "")


def taken_out(state: str) -> bool:
    """Slurm, an admin or the health check took the node out (DOWN, DRAINED, FAIL, ...), or it is absent."""
    return WORDS.taken_out(state)
