# Copyright: meshctl contributors; Apache-2.0
"""Which nodes Slurm may stop when idle, and after how long (plain functions, unit-tested).

A node is stopped when idle only if it asks (``idle_stop: 30m`` as a host variable, or its
provider's entry in ``mesh_idle_stop_by_provider``), is a provider's instance meshctl knows
(``meshctl_instance``), and its provider can stop and start it again with the node intact:
Paperspace (a stopped machine keeps its disk), and a Runpod pod in pod mode (``mesh_pod``): a
stopped pod loses its container disk but keeps its volume, where role pod keeps the node's setup;
its plan entry carries the start command (the volume's ``rejoin`` script) the head gives the pod
before it stops it. Never the head, a desktop or a Lambda instance (Lambda has no stop).
"""

from __future__ import annotations

import re

CAN_RESUME = ("paperspace", "runpod")
WHY_NOT = {
    "lambda": "Lambda has no stop (an instance bills until it is terminated)",
}
KEEPS_ON_VOLUME = ("runpod",)  # stopped, the instance keeps only its volume: the setup comes back from there
DURATION = re.compile(r"^(\d+)\s*(s|m|h|d)?$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
MINIMUM = 60  # seconds: Slurm's power-saving thread looks about once a minute


class PowerSaveError(ValueError):
    pass


def duration_seconds(value):
    """``30m`` -> 1800, ``90`` or ``90s`` -> 90, ``2h``, ``1d``; off (``false``, ``0``, none, "") -> 0."""
    if value is None or value is False or value == "" or value == 0:
        return 0
    if value is True or not isinstance(value, (int, str)):
        raise PowerSaveError(f"idle_stop {value!r} is not a duration (30m, 2h, 900s) or false")
    match = DURATION.match(str(value).strip())
    if not match:
        raise PowerSaveError(f"idle_stop {value!r} is not a duration (30m, 2h, 900s) or false")
    seconds = int(match.group(1)) * UNITS[match.group(2)]
    if 0 < seconds < MINIMUM:
        raise PowerSaveError(f"idle_stop {value!r} is under {MINIMUM} s: Slurm cannot stop a node that soon")
    return seconds


def power_plan(nodes, by_provider=None, pod_volume="/workspace", pod_keep=".meshctl"):
    """The nodes to stop when idle: ``{name: {"instance", "provider", "id", "idle_stop"}}`` (and
    ``start_command`` for a pod), and the ones that asked but cannot be: ``{name: why}``.

    ``nodes``: ``{name: hostvars}`` (``meshctl_roles``, ``mesh_provider``, ``meshctl_instance``,
    ``idle_stop``, ``mesh_pod``, ``mesh_pod_volume``); ``by_provider``: ``{provider: duration}``
    for nodes that set none themselves; ``pod_volume`` and ``pod_keep``: role mesh's
    ``mesh_pod_volume`` (for pods that set none) and ``mesh_pod_keep``.
    """
    plan, refused = {}, {}
    for name, hv in sorted((nodes or {}).items()):
        provider = hv.get("mesh_provider", "generic")
        volume = str(hv.get("mesh_pod_volume", pod_volume) or "").rstrip("/")
        asked = hv["idle_stop"] if "idle_stop" in hv else (by_provider or {}).get(provider)
        seconds = duration_seconds(asked)
        if not seconds:
            continue
        instance = hv.get("meshctl_instance") or ""
        if "head" in (hv.get("meshctl_roles") or []):
            refused[name] = "the head is never stopped (every node needs it)"
        elif not instance:
            refused[name] = "it is no provider's instance meshctl knows (add it as PROVIDER:NAME)"
        elif instance.split(":", 1)[0] not in CAN_RESUME:
            refused[name] = WHY_NOT.get(instance.split(":", 1)[0], "its provider cannot stop and start it")
        elif instance.split(":", 1)[0] in KEEPS_ON_VOLUME and not (hv.get("mesh_pod") and volume):
            refused[name] = (
                "a stopped Runpod pod keeps only its volume: meshctl brings a node back from there in pod mode "
                "(mesh_pod: true) with a volume (mesh_pod_volume)"
            )
        else:
            kind, _, instance_id = instance.partition(":")
            plan[name] = {"instance": instance, "provider": kind, "id": instance_id, "idle_stop": seconds}
            if kind in KEEPS_ON_VOLUME:
                plan[name]["start_command"] = ["bash", f"{volume}/{pod_keep}/rejoin"]
    return {"nodes": plan, "refused": refused}


class FilterModule:
    def filters(self):
        return {"duration_seconds": duration_seconds, "power_plan": power_plan}
