# Copyright: meshctl contributors; Apache-2.0
"""Paperspace's API (https://api.paperspace.com/v1, "Paperspace API" v1, DigitalOcean): machines.

Used: GET /machines (pages: ``after``, ``hasMore``, ``nextPage``), GET /machines/{id}, POST /machines,
PATCH /machines/{id}/start, PATCH /machines/{id}/stop, DELETE /machines/{id}. A stopped machine
keeps its disk; its public IP may change when it starts again (a dynamic IP). The machine object
carries no price: meshctl shows none unless the mesh sets one per machine type
(``paperspace_prices`` in group_vars/all.yml).
"""

from __future__ import annotations

import re

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import (
    CloudError,
    Http,
    api_url,
    instance,
    message_of,
)

NAME = "paperspace"
DEFAULT_URL = "https://api.paperspace.com/v1"
SSH_USER = "paperspace"
CAN_STOP = True
PAGE = 120  # the most machines one page holds
STATUS = {"ready": "running", "serviceready": "starting", "starting": "starting", "provisioning": "starting",
          "restarting": "starting", "upgrading": "starting", "stopping": "stopping", "off": "stopped",
          "failed": "unhealthy"}  # fmt: skip
CPU_TYPES = re.compile(r"^(C\d+|Air|Standard|Pro|Advanced)$", re.IGNORECASE)


def describe(status, payload):
    """(message, kind) from Paperspace's error answer: {"code", "message", "details"}."""
    message = message_of(payload, ("message",), ("error",))
    lowered = message.lower()
    if "capacity" in lowered or "out of stock" in lowered or "no machines available" in lowered:
        return message, "capacity"
    if "quota" in lowered or "limit" in lowered:
        return message, "quota"
    return message, "error"


def gpu_count(machine_type):
    """GPUs of a machine type: ``A100-80Gx8`` has 8, ``A6000`` 1, a CPU type (``C5``) none."""
    if not machine_type or CPU_TYPES.match(machine_type):
        return 0
    match = re.search(r"x(\d+)$", machine_type)
    return int(match.group(1)) if match else 1


def normalize(data, prices=None):
    """One machine of GET /machines in meshctl's shape."""
    if not isinstance(data, dict):
        raise CloudError("paperspace answered a machine that is not an object", kind="bad-answer")
    kind = str(data.get("machineType") or "")
    return instance(
        NAME,
        data.get("id"),
        data.get("name") or "",
        STATUS.get(str(data.get("state")), "unknown"),
        data.get("state"),
        ssh_host=data.get("publicIp"),
        ssh_port=22,
        ssh_user=SSH_USER,
        gpus=gpu_count(kind),
        gpu_type=kind,
        price_per_hour=(prices or {}).get(kind),
    )


class Client:
    name = NAME
    can_stop = CAN_STOP

    def __init__(self, key, http=None, environ=None, prices=None):
        self.http = http or Http(NAME, api_url(NAME, DEFAULT_URL, environ), key, describe, min_interval=0.2)
        self.prices = prices or {}

    def list(self):
        machines, after = [], None
        for _ in range(100):  # at most 12000 machines: a bound, not a limit anyone meets
            answer = self.http.request("GET", "/machines", query={"limit": PAGE, **({"after": after} if after else {})})
            items = answer.get("items") if isinstance(answer, dict) else None
            if not isinstance(items, list):
                raise CloudError("paperspace answered GET /machines without items", kind="bad-answer")
            machines += [normalize(item, self.prices) for item in items]
            after = answer.get("nextPage")
            if not answer.get("hasMore") or not after:
                return machines
        raise CloudError("paperspace kept answering more pages of machines", kind="bad-answer")

    def get(self, instance_id):
        return normalize(self.http.request("GET", f"/machines/{instance_id}"), self.prices)

    def launch(self, machine_type, name, region, template_id, disk_size=100):
        body = {"name": name, "machineType": machine_type, "region": region, "templateId": template_id,
                "diskSize": disk_size, "publicIpType": "dynamic", "startOnCreate": True}  # fmt: skip
        answer = self.http.request("POST", "/machines", body)
        data = answer.get("data", answer) if isinstance(answer, dict) else None
        return normalize(data, self.prices)["id"]

    def stop(self, instance_id):
        self.http.request("PATCH", f"/machines/{instance_id}/stop")

    def start(self, instance_id):
        self.http.request("PATCH", f"/machines/{instance_id}/start")

    def terminate(self, instance_id):
        self.http.request("DELETE", f"/machines/{instance_id}")
