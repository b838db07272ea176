# Copyright: meshctl contributors; Apache-2.0
"""Slurm's node state words and flags: the one place that knows them.

What ``sinfo --Node --format=%T`` prints for a node: a base state in lower case and at most one flag
character after it (``idle~``, ``down*``, ``mixed-``). Written from Slurm's own printer of a node's
state (``node_state_string()`` in ``src/common/slurm_protocol_defs.c``, read 2026-11-26 in
SchedMD's repository, the same in 22.05 and 24.11) and checked against real ``sinfo`` output of
both versions (``tests/fixtures/sinfo/``, recorded on this project's Docker nodes).

Read by the status filter (``plugins/module_utils/mesh_node_status.py``), by role slurm (filter
``slurm_state``: the wait for nodes after a change) and by meshctl (``meshctl/slurm.py``:
which node SSH cannot reach is meant to be off). Plain functions, no Ansible.
"""

from __future__ import annotations

import re

# The flag Slurm appends to a state word, and what it says (one at most, in this order of precedence).
FLAGS = {
    "$": "in a maintenance reservation",
    "^": "reboot issued",
    "@": "reboot requested",
    "#": "powering up (a job asked for it)",
    "%": "powering down",
    "~": "powered down (power saving)",
    "!": "to be powered down",
    "*": "not responding",
    "+": "completing",
    "-": "planned by the backfill scheduler",
}

# Every base state Slurm prints (lower case, as sinfo's %T shows them).
BASE_STATES = (
    "allocated",
    "blocked",
    "cancel_reboot",
    "cloud",
    "completing",
    "down",
    "drained",
    "draining",
    "fail",
    "failing",
    "future",
    "idle",
    "inval",
    "maint",
    "mixed",
    "perfctrs",
    "planned",
    "power_down",
    "power_up",
    "powered_down",
    "powering_down",
    "powering_up",
    "reboot",
    "reboot_issued",
    "reserved",
    "resume",
    "unknown",
)

# States in which a node takes or runs jobs (planned: idle, held for a job the scheduler plans;
# reserved: idle, in a reservation).
READY = ("idle", "mixed", "allocated", "completing", "planned", "reserved")
# States in which Slurm (or an admin, or the health check) took the node out.
TAKEN_OUT = ("down", "drained", "draining", "fail", "failing", "inval")

# Taken out by a person or by Slurm's own checks, and kept so across restarts of slurmd and
# slurmctld until someone resumes the node: a converge changes none of them.
KEPT_OUT = ("drained", "draining", "fail", "failing")

FLAG_CHARS = "".join(FLAGS)
# The flags of power saving: a node stopped, being stopped, to be stopped, or being started.
POWER_FLAGS = "~%!#"
# A state word as sinfo prints one (a base state and its flag), or a word meshctl writes itself
# (absent, unknown): letters, digits, '_' and the flags.
WORD_RE = re.compile("[A-Za-z0-9][A-Za-z0-9._:" + re.escape(FLAG_CHARS) + "]{0,39}")
_SPLIT_RE = re.compile("^(.*?)([" + re.escape(FLAG_CHARS) + r"]*)\Z")


def parse(word):
    """``{"state", "base", "flags", "known"}`` of one state word (``idle~`` -> base ``idle``, flags
    ``~``; ``known``: the base is one Slurm prints). A word that is not one gives base ``unknown``."""
    word = str(word).strip() if word is not None else ""
    if not WORD_RE.fullmatch(word):
        return {"state": "unknown", "base": "unknown", "flags": "", "known": False}
    base, flags = _SPLIT_RE.match(word).groups()
    base = base.lower()
    return {"state": word, "base": base, "flags": flags, "known": base in BASE_STATES}


def base(word):
    """The state less its flag: ``down*`` -> ``down``."""
    return parse(word)["base"]


def ready(word):
    """It takes or runs jobs and answers Slurm (``idle``, ``mixed-``; not ``idle*`` or ``drained``).
    A node power saving stopped (``idle~``) counts: it is meant to be off, and starts for a job."""
    state = parse(word)
    return state["base"] in READY and "*" not in state["flags"]


def taken_out(word):
    """Slurm, an admin or the health check took it out: DOWN, DRAINED, DRAINING, FAIL, FAILING, an
    invalid registration (INVAL), or not in Slurm at all (``absent``). Not its reason: Slurm 24.11
    keeps a resumed node's reason beside ``idle`` (tests/fixtures/sinfo/slurm-24.11/powered_down.txt),
    so a reason says whose a state is only while the state is one of these."""
    return base(word) in TAKEN_OUT or base(word) == "absent"


def resting(word):
    """Why a node SSH cannot reach is meant to be off, or None: stopped by power saving while idle
    (``~``), being stopped (``%``, ``!``), or being started for a job (``#``). A node taken out
    (DOWN, DRAINED, ...: ``down~`` is a refused start, ``draining!`` an admin's power_down_asap) is
    not resting."""
    if taken_out(word):
        return None
    flags = parse(word)["flags"]
    if "~" in flags:
        return "stopped while idle (idle_stop)"
    if "%" in flags or "!" in flags:  # SuspendProgram runs (or is about to): the machine goes away
        return "being stopped while idle (idle_stop)"
    if "#" in flags:
        return "starting: a job asked for it"
    return None


def kept_out(word):
    """Drained or failed (KEPT_OUT), whatever its flag: only a resume brings it back."""
    return base(word) in KEPT_OUT


def _wait_fields(line):
    """``name|state[|since|reason]`` (or ``state``) as ``(name, state, since, reason)``: since, the
    time of the node's reason in seconds (0 where none is known)."""
    parts = str(line).split("|", 3)
    if len(parts) == 1:
        return "", parts[0], 0, ""
    since = parts[2] if len(parts) > 2 else ""
    return parts[0], parts[1], int(since) if since.isdigit() else 0, parts[3] if len(parts) > 3 else ""


def kept_lines(lines, before=0):
    """Of ``name|state|since|reason`` lines (role slurm_ready's wait), those of a node drained or
    failed (``kept_out``) with a reason set before BEFORE (the run's start, in seconds): taken out
    before the run, not by it, and left so by it (only a resume brings such a node back)."""
    kept = []
    for line in lines or []:
        _name, state, since, _reason = _wait_fields(line)
        if kept_out(state) and 0 < since < int(before or 0):
            kept.append(line)
    return kept


def not_ready_lines(lines, before=0):
    """The lines (``name|state``, ``name|state|since|reason`` or ``state``) whose state is not
    ``ready``, less those ``kept_lines`` keeps as they were before BEFORE."""
    kept = kept_lines(lines, before)
    return [line for line in lines or [] if not ready(_wait_fields(line)[1]) and line not in kept]


def kept_notes(lines, before=0):
    """What to tell the user of each ``kept_lines`` line: the node stays as it was, why, and the fix."""
    notes = []
    for line in kept_lines(lines, before):
        name, state, _since, reason = _wait_fields(line)
        why = f" ({reason})" if reason and reason != "none" else ""
        notes.append(f"{name} stays {base(state)} as before this run{why}: once its cause is gone, "
                     f"`scontrol update nodename={name} state=resume` on the head gives it jobs again "
                     "(the health check's own drain lifts itself)")  # fmt: skip
    return notes


def powering(word):
    """Slurm powers the node up or down, or has it powered down or to be (a power saving flag):
    power saving at work, meshctl's suspend or resume."""
    return any(flag in POWER_FLAGS for flag in parse(word)["flags"])


def powered_down(word):
    """Power saving has stopped it (``idle~``, ``down~``: its SuspendProgram ran, SuspendTimeout over)."""
    return "~" in parse(word)["flags"]


def not_responding(word):
    """Slurm's ping of its slurmd failed (``idle*``, ``drained*``): within SlurmdTimeout, or past it."""
    return "*" in parse(word)["flags"]


def powering_down(word):
    """Slurm has run SuspendProgram for it and waits (SuspendTimeout) for the machine to go (``%``),
    whatever else its state says (``drained%``)."""
    return "%" in parse(word)["flags"]


def powering_down_names(lines):
    """Of ``sinfo --format=%N|%T`` lines, the names of the nodes Slurm is stopping, each once."""
    found = [str(line).rsplit("|", 1) for line in lines or [] if "|" in str(line)]
    return list(dict.fromkeys(name for name, word in found if powering_down(word)))


def meaning(word):
    """A state word in words: ``idle~`` -> ``idle, powered down (power saving)``."""
    state = parse(word)
    return ", ".join([state["base"]] + [FLAGS[flag] for flag in state["flags"]])
