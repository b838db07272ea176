# Copyright: meshctl contributors; Apache-2.0
"""Which nodes Slurm may stop when idle, and after how long (plain functions, unit-tested).

A node is stopped when idle only if it asks (``idle_stop: 30m`` as a host variable, or its
provider's entry in ``mesh_idle_stop_by_provider``), is a provider's instance meshctl knows
(``meshctl_instance``), and its provider's capabilities (``mesh_cloud.capabilities``) let it come back
intact: a provider that stops an instance with its disk (``keeps_disk``), or one that keeps only a
volume (``keeps_volume``: a pod) when the node runs in pod mode (``mesh_pod``), where role pod keeps the
node's setup; such an entry carries the start command (the volume's ``rejoin`` script) the head gives
the instance before it stops it. Never the head or a desktop. A provider that cannot stop
(``relaunch``): only when the node opts in (``idle_terminate: true``) is it terminated when idle, and
launched again and set up from scratch by the head when a job needs it (its entry says ``relaunch``).
"""

from __future__ import annotations

import re

from ansible_collections.meshctl.mesh.plugins.module_utils import mesh_burst
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import PROVIDERS, capabilities

PART = re.compile(r"(\d+)\s*([a-z]*)\s*")
UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
}
SAY = "a duration (30m, 1h30m, 90s, 30 minutes)"
MINIMUM = 60  # seconds: Slurm's power-saving thread looks about once a minute
MAXIMUM = 365 * 86400  # a year: Slurm keeps SuspendTime in 32 bits (50000d wrapped around)


class PowerSaveError(ValueError):
    pass


def duration_seconds(value, what="idle_stop", never="false"):
    """``30m`` -> 1800, ``90`` or ``90s`` -> 90, ``2h``, ``1d``, ``1h30m``, ``30 minutes``, ``2 hours``;
    off (``false``, ``0``, none, "") -> 0. WHAT names the value in an error, NEVER the word that
    says never where the value comes from (mesh.yml's ``false``, the command line's ``off``; None
    where there is none)."""
    said = f"{what} {value!r}" if what else repr(value)
    forms = f"{SAY} or {never}" if never else SAY
    if value is None or value is False or value == "" or value == 0:
        return 0
    if value is True or not isinstance(value, (int, str)):
        raise PowerSaveError(f"{said} is not {forms}")
    text = str(value).strip().lower()
    parts = PART.findall(text)
    bare = len(parts) == 1 and parts[0][1] == ""  # a plain number: seconds
    if (
        not parts
        or "".join(f"{n}{u}" for n, u in parts) != re.sub(r"\s+", "", text)
        or (not bare and any(unit not in UNITS for _n, unit in parts))
        or any(len(n) > 9 for n, _u in parts)
    ):
        raise PowerSaveError(f"{said} is not {forms}")
    seconds = int(parts[0][0]) if bare else sum(int(n) * UNITS[u] for n, u in parts)
    if 0 < seconds < MINIMUM:
        raise PowerSaveError(f"{said} is under {MINIMUM} s: Slurm cannot stop a node that soon")
    if seconds > MAXIMUM:
        raise PowerSaveError(f"{said} is over a year (365d)" + (f": use {never} to never stop it" if never else ""))
    return seconds


def power_plan(nodes, by_provider=None, pod_volume="/workspace", pod_keep=".meshctl", pools=None):
    """The nodes to stop when idle: ``{name: {"instance", "provider", "id", "idle_stop"}}`` (and
    ``start_command`` for a pod), and the ones that asked but cannot be: ``{name: why}``.

    Every node of a burst pool (POOLS: ``burst_pools``) is in the plan, whether the mesh holds its
    machine now or not: ``{"pool", "idle_stop", "instance", "provider", "id"}`` (the last three as
    recorded, or empty); Slurm resumes it by renting a machine and terminates that when idle.

    ``nodes``: ``{name: hostvars}`` (``meshctl_roles``, ``mesh_provider``, ``meshctl_instance``,
    ``idle_stop``, ``idle_terminate``, ``mesh_pod``, ``mesh_pod_volume``); ``by_provider``: ``{provider: duration}``
    for nodes that set none themselves; ``pod_volume`` and ``pod_keep``: role mesh's
    ``mesh_pod_volume`` (for pods that set none) and ``mesh_pod_keep``.
    """
    plan, refused = {}, {}
    members = mesh_burst.pool_nodes(pools)
    for name, pool in sorted(members.items()):
        instance = str(((nodes or {}).get(name) or {}).get("meshctl_instance") or "")
        kind, _, instance_id = instance.partition(":")
        idle = mesh_burst.idle_seconds(pool["idle"])
        plan[name] = {"instance": instance, "provider": kind, "id": instance_id, "idle_stop": idle,
                      "pool": pool["name"]}  # fmt: skip
    for name, hv in sorted((nodes or {}).items()):
        if name in members:
            continue
        provider = hv.get("mesh_provider", "generic")
        volume = str(hv.get("mesh_pod_volume", pod_volume) or "").rstrip("/")
        asked = hv["idle_stop"] if "idle_stop" in hv else (by_provider or {}).get(provider)
        seconds = duration_seconds(asked)
        if not seconds:
            continue
        instance = hv.get("meshctl_instance") or ""
        kind, _, instance_id = instance.partition(":")
        can = capabilities(kind) if kind in PROVIDERS else None
        entry = {"instance": instance, "provider": kind, "id": instance_id, "idle_stop": seconds}
        if "head" in (hv.get("meshctl_roles") or []):
            refused[name] = "the head is never stopped (every node needs it)"
        elif not instance or can is None:
            refused[name] = "it is no provider's instance meshctl knows (add it as PROVIDER:NAME)"
        elif can.relaunch and hv.get("idle_terminate") is True:
            plan[name] = {**entry, "relaunch": True}
        elif can.relaunch:
            refused[name] = (
                f"{can.title} has no stop (an instance bills until it is terminated): `idle_terminate: true` lets "
                "Slurm terminate it when idle and the head launch and set up a new one when a job needs it"
            )
        elif not can.can_stop:
            refused[name] = f"{can.title} cannot stop and start an instance"
        elif not can.keeps_disk and not (hv.get("mesh_pod") and volume):
            refused[name] = (
                f"a stopped {can.title} instance keeps only its volume: meshctl brings a node back from there in "
                "pod mode (mesh_pod: true) with a volume (mesh_pod_volume)"
            )
        else:
            plan[name] = entry
            if not can.keeps_disk:
                plan[name]["start_command"] = ["bash", f"{volume}/{pod_keep}/rejoin"]
    return {"nodes": plan, "refused": refused, "watched": watched(nodes, plan)}


def watched(nodes, plan):
    """The nodes whose machine the head's watch asks the providers about (``meshctl-power watch``):
    every burst pool's node (found by its name) and every other node that is a provider's instance
    meshctl knows, the head's excepted: ``{name: {"instance", "provider", "id"}}``, plus ``pool``
    for a pool's, ``by_name`` for one the head launches again (a new instance, named as the node,
    each time) and ``since`` (when meshctl took the instance in, ``meshctl_instance_since``) for one
    it does not: what a machine taken away had cost by then."""
    found = {name: {k: entry[k] for k in ("instance", "provider", "id", "pool")}
             for name, entry in plan.items() if entry.get("pool")}  # fmt: skip
    for name, hv in sorted((nodes or {}).items()):
        instance = str(hv.get("meshctl_instance") or "")
        kind, _, instance_id = instance.partition(":")
        if name in found or "head" in (hv.get("meshctl_roles") or []) or kind not in PROVIDERS or not instance_id:
            continue
        found[name] = {"instance": instance, "provider": kind, "id": instance_id}
        since = hv.get("meshctl_instance_since")
        if (plan.get(name) or {}).get("relaunch"):  # launched again under its name: a new id each time
            found[name]["by_name"] = True
        elif isinstance(since, int) and not isinstance(since, bool) and since >= 0:
            found[name]["since"] = since
    return found


def head_copy(inventory, head, key_file, relaunched, leaving=(), drop_vars=("meshctl_vault_id",)):
    """The head's copy of the mesh's inventory (``mesh.yml``, as data), for its relaunch service:
    the head is reached locally, the nodes it may launch again with its own key (KEY_FILE), every
    other node as recorded but with no key file (the control machine's paths mean nothing on the
    head, which never reaches those nodes); the secrets are plain files there (no vault). The
    nodes LEAVING (``meshctl remove-node``, whose run comes before mesh.yml is saved without them)
    are left out."""
    if not isinstance(inventory, dict) or not isinstance((inventory.get("all") or {}).get("hosts"), dict):
        raise PowerSaveError("mesh.yml has no all.hosts")
    copy = {"all": dict(inventory["all"])}
    copy["all"]["vars"] = {k: v for k, v in (inventory["all"].get("vars") or {}).items() if k not in drop_vars}
    copy["all"]["vars"]["meshctl_head_copy"] = True  # meshctl there hands no copy on (meshctl/headcopy.py)
    hosts = {}
    for name, hv in inventory["all"]["hosts"].items():
        if name in leaving:
            continue
        hv = {k: v for k, v in (hv or {}).items() if k != "ansible_ssh_private_key_file"}
        if name == head:
            hv["ansible_connection"] = "local"
        elif name in relaunched:
            hv["ansible_ssh_private_key_file"] = key_file
        hosts[name] = hv
    copy["all"]["hosts"] = hosts
    return copy


def head_copy_leftovers(found, control_dir, local_files, authorized, relaunched, leaving=()):
    """The files FOUND in the head's copy (its host_vars/, facts/, authorized/, relaunched/) that the
    mesh no longer has: a node's settings or facts the control machine does not hold (LOCAL_FILES,
    its paths), or holds for a node LEAVING; the control machine's key of a node the head no longer
    launches again (AUTHORIZED: the nodes it does); a relaunch record of such a node."""
    kept = set()
    for path in local_files:
        folder, _, name = str(path).rstrip("/").rpartition("/")
        if name.split(".", 1)[0] not in leaving:
            kept.add(f"{control_dir}/{folder.rpartition('/')[2]}/{name}")
    kept |= {f"{control_dir}/authorized/{node}.pub" for node in authorized if node not in leaving}
    kept |= {f"{control_dir}/relaunched/{node}.json" for node in relaunched if node not in leaving}
    return sorted(str(path) for path in found if str(path) not in kept)
