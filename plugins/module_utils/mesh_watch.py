# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Which rented nodes lost their machine (plain functions, unit-tested): what the head's watch
(``meshctl-power watch``, role power_save's timer) reads from the providers' instance lists and
Slurm's node states, and what it does about each.

A machine is lost when its provider took it away (Lambda's ``preempted``, a pod ``terminated`` or
no longer listed, a machine stopped outside meshctl) or when it stopped answering: Slurm marked
the node DOWN for not responding (``SlurmdTimeout``, the grace Slurm gives a node) while its
provider still runs it. A node Slurm is powering up or down, or has powered down, is meshctl's own
doing (a resume, a suspend) and never lost; a provider that could not be asked loses nobody.

Each loss says what to do:

- a burst pool's node: its machine is given back where it still exists (nothing left billing),
  the node is set DOWN with the reason (Slurm requeues its jobs at once), powered down, and offered
  to Slurm again once it is (``reoffer``): the requeued job resumes it and the pool rents a
  replacement;
- any other rented node: DOWN with the reason and the fix (its jobs requeue); its machine is the
  user's, never given back here, and a silent one is left to Slurm (it is DOWN already).
"""

from __future__ import annotations

import re

from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_node_status, mesh_slurm, mesh_status_read
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import GONE

NOT_RESPONDING = "Not responding"  # Slurm's reason for a node it set DOWN after SlurmdTimeout
# Slurm's reason for a node whose slurmd registered fewer GPUs than slurm.conf gives it: slurmctld
# sets it INVAL and drains it, and requeues its jobs (tests/fixtures/sinfo/slurm-22.05/gpus_short.txt).
# `sinfo %T` then says ``inval`` whatever Slurm does with its power (no mark).
GPUS_SHORT = "gres/gpu count reported lower than configured"
# A pool node's machines in a row that registered too few GPUs before its pool stops renting for it
# (a provider's image without the driver, a setup that fails the same way: each one billed).
SHORT_AT_MOST = 2
OURS = "meshctl: "  # the reasons meshctl gives Slurm begin so
# In the power program's state folder: <node>.json, the last end of a node's machine (given back
# when idle, or lost), written by meshctl-power, read by the head's rent (what the machine it
# replaces cost) and by `meshctl status` (what was lost).
ENDED = "ended"
SINFO = mesh_status_read.SINFO  # Slurm's node rows, read as `meshctl status` reads them
# The nodes Slurm holds DOWN and that do not answer, whatever word their state prints: a drained
# node past SlurmdTimeout prints ``drained*`` with its drain's reason, not DOWN's "Not responding"
# (tests/fixtures/sinfo/*/silent-down/, recorded). Asked only when a row leaves it open (``ask_silent``).
SILENT_DOWN = ["sinfo", "--noheader", "--Node", "--dead", "--states=down", "--format=%N"]


def parse_sinfo(text):
    """``{node: {"state", "reason"}}`` from SINFO's output, as the status filter reads it
    (``mesh_node_status.slurm_rows``: a line that is not a node's is left out)."""
    return {name: {"state": row["state"], "reason": row["reason"]}
            for name, row in mesh_node_status.slurm_rows({"stdout": text or ""}).items()}  # fmt: skip


def powering(state):
    """Whether Slurm powers the node up or down, or has it powered down (meshctl's doing)."""
    return mesh_slurm.powering(state)


def parse_silent(text):
    """The node names SILENT_DOWN's output lists (a set; a line that is no node name is left out)."""
    names = (line.strip() for line in str(text or "").splitlines())
    return {name for name in names if mesh_node_status.NAME.fullmatch(name)}


def _silent_past_grace(name, node, silent):
    """Slurm set the node DOWN for not answering past SlurmdTimeout (the grace Slurm gives it):
    ``down*`` with Slurm's reason, or (a node drained or failed before it went silent, whose word
    stays ``drained*``) listed by SILENT_DOWN."""
    if mesh_slurm.base(node["state"]) == "down" and node["reason"].startswith(NOT_RESPONDING):
        return True
    return name in (silent or ()) and mesh_slurm.not_responding(node["state"])


def ask_silent(watched, slurm):
    """Whether a watched pool node's row leaves open if Slurm holds it DOWN: taken out (drained,
    failed) and not answering, with a reason not Slurm's DOWN's nor meshctl's. Only then does
    the watch run SILENT_DOWN."""
    for name, entry in (watched or {}).items():
        node = (slurm or {}).get(name)
        if not isinstance(entry, dict) or not entry.get("pool") or node is None or ours(node):
            continue
        state = node["state"]
        if mesh_slurm.taken_out(state) and mesh_slurm.not_responding(state) and not _silent_past_grace(name, node, ()):
            return True
    return False


def ours(node):
    """Whether the node is DOWN or drained with a reason meshctl gave (acted on already)."""
    return node["reason"].startswith(OURS) and mesh_slurm.taken_out(node["state"])


def _counted(slurm_reason):
    """``0 of its 1`` from Slurm's ``... (0 < 1)``; ``fewer than its`` when it says no counts."""
    found = re.search(r"\((\d+) < (\d+)\)", slurm_reason)
    return f"{found.group(1)} of its {found.group(2)}" if found else "fewer than its"


def gpus_short(node):
    """Whether Slurm refused the node's registration for fewer GPUs than its record (Slurm's reason)."""
    return mesh_slurm.taken_out(node["state"]) and node["reason"].startswith(GPUS_SHORT)


def _found(entry, name, listed):
    """The provider instances that ran NAME (``[(provider, instance)]``), or None when a provider
    that may hold it could not be asked. A pool node's machine is found by the node's name at every
    provider, one the head launches again (``by_name``) by its name at its provider; any other
    node's by its recorded instance."""
    if entry.get("pool"):
        if any(answer is None for answer in listed.values()):
            return None
        return [(p, i) for p, answer in sorted(listed.items()) for i in answer if i.get("name") == name]
    provider = entry.get("provider") or ""
    if listed.get(provider) is None:
        return None
    if entry.get("by_name"):
        return [(provider, i) for i in listed[provider] if i.get("name") == name]
    return [(provider, i) for i in listed[provider] if i.get("id") == entry.get("id")]


def losses(watched, listed, slurm, silent=()):
    """Each node of WATCHED whose machine is lost, as ``{"node", "instance", "why", "give_back",
    "pool"}``: ``give_back`` the id of a pool machine to delete ("" when there is none to),
    ``instance`` ``provider:id`` of the lost machine ("" when none is known).

    WATCHED: ``{node: {"provider", "id", "instance", "pool"?, "by_name"?}}`` (the power plan's
    ``watched``; a pod the power program moved to a new pod carries that one's id);
    LISTED: ``{provider: [instances] or None}`` (``mesh_cloud.instance`` dicts; None: could not be
    asked); SLURM: ``parse_sinfo``'s; SILENT: ``parse_silent``'s, where ``ask_silent`` asked for it."""
    found = []
    for name, entry in sorted((watched or {}).items()):
        node = (slurm or {}).get(name)
        if not isinstance(entry, dict) or node is None or ours(node):
            continue
        pool = entry.get("pool") or ""
        # A pool's machine whose slurmd registered too few GPUs (Slurm drained the node, its jobs
        # requeued): no use to its pool, given back and replaced. Slurm may be powering such a
        # node down already; sinfo shows no mark for it (``inval``).
        short = bool(pool) and gpus_short(node)
        if powering(node["state"]) and not short:
            continue
        mine = _found(entry, name, listed or {})
        if mine is None:
            continue
        live = [(p, i) for p, i in mine if i.get("status") not in GONE]
        loss = {"node": name, "pool": pool, "give_back": "", "instance": "", "why": ""}
        if short:
            provider, inst = (live or mine or [("", {})])[-1]
            loss.update(instance=f"{provider}:{inst['id']}" if provider else "",
                        why=f"registered {_counted(node['reason'])} GPUs",
                        give_back=inst["id"] if live else "", short=True)  # fmt: skip
            found.append(_priced(loss, entry, inst))
            continue
        if not live:
            provider, inst = mine[-1] if mine else ("", None)
            if mine:
                loss.update(instance=f"{provider}:{inst['id']}", why=f"{inst['status']} by {provider}",
                            give_back=inst["id"] if pool and inst.get("status") != "terminated" else "")  # fmt: skip
            elif pool:
                loss["why"] = "its machine is gone (no provider lists it)"
            else:
                loss.update(instance=entry.get("instance") or "",
                            why=f"terminated by {entry.get('provider')} (no longer listed)")  # fmt: skip
            found.append(_priced(loss, entry, inst))
            continue
        provider, inst = live[0]
        loss["instance"] = f"{provider}:{inst['id']}"
        if inst.get("status") in ("stopped", "stopping"):
            loss.update(why="stopped outside meshctl", give_back=inst["id"] if pool else "")
            found.append(_priced(loss, entry, inst))
        elif pool and _silent_past_grace(name, node, silent):
            loss.update(why="stopped answering", give_back=inst["id"])
            found.append(_priced(loss, entry, inst))
    return found


def _priced(loss, entry, inst):
    """LOSS with what its machine cost an hour (its provider's listing) and since when meshctl had
    it (the watched entry's ``since``, a node that is no pool's), where known."""
    price = (inst or {}).get("price_per_hour")
    if isinstance(price, (int, float)) and not isinstance(price, bool) and price >= 0:
        loss["price"] = float(price)
    since = entry.get("since")
    if not loss["pool"] and isinstance(since, int) and not isinstance(since, bool) and since >= 0:
        loss["since"] = since
    return loss


def cost(record, now=None):
    """``(hours, price, dollars)`` a lost machine ran and cost by its end, from the power program's
    record of it (``ENDED``: ``at``, ``price``, ``since``); None when the record does not say."""
    if not isinstance(record, dict):
        return None
    at, since, price = record.get("at", now), record.get("since"), record.get("price")
    numbers = (at, since, price)
    if any(isinstance(n, bool) or not isinstance(n, (int, float)) for n in numbers) or price < 0 or at < since:
        return None
    hours = (at - since) / 3600
    return hours, float(price), round(hours * price, 2)


REQUEUED = "its jobs requeued"  # in every reason the watch gives Slurm (``is_loss`` finds them by it)


def reason(loss):
    """Slurm's reason for a lost node (meshctl-power adds ``meshctl: ``). A pool node whose machines
    registered too few GPUs SHORT_AT_MOST times in a row (``loss["short"]``, counted by the
    program) is not offered again: the reason says how to."""
    what = f"{loss['instance']} {loss['why']}" if loss["instance"] else loss["why"]
    if loss["pool"] and int(loss.get("short") or 0) >= SHORT_AT_MOST:
        return (
            f"{what}; {REQUEUED}; {loss['short']} machines in a row: no more rented until "
            f"`scontrol update nodename={loss['node']} state=idle`"
        )
    if loss["pool"]:
        return f"{what}; {REQUEUED}, pool {loss['pool']} rents a replacement"
    return f"{what}; {REQUEUED}: `meshctl launch` it again, or `meshctl remove-node {loss['node']}`"


def is_loss(slurm_reason):
    """Whether Slurm's reason for a node is the watch's: its machine was lost (the reason says what
    to do)."""
    return str(slurm_reason or "").startswith(OURS) and f"; {REQUEUED}" in str(slurm_reason)


def reoffer(ended, slurm):
    """The pool nodes of ENDED (``{node: record}``, the records meshctl-power wrote as a node's
    machine ended) whose machine the watch found lost, that Slurm has powered down since and still
    holds DOWN with meshctl's reason: offered to Slurm again now, so the requeued job resumes one
    and its pool rents a replacement."""
    ready = []
    for name, record in sorted((ended or {}).items()):
        node = (slurm or {}).get(name)
        if (
            not isinstance(record, dict)
            or not record.get("lost")
            or not record.get("pool")
            or record.get("offered")
            or int(record.get("short") or 0) >= SHORT_AT_MOST
            or node is None
        ):
            continue
        if mesh_slurm.powered_down(node["state"]) and ours(node):
            ready.append(name)
    return ready
