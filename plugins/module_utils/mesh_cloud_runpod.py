# Copyright: meshctl contributors; Apache-2.0
"""Runpod's REST API (https://rest.runpod.io/v1, OpenAPI "Runpod API" 0.1.0): Pods.

Used: GET /pods, GET /pods/{podId}, POST /pods, PATCH /pods/{podId} (``dockerStartCmd`` only),
POST /pods/{podId}/stop, POST /pods/{podId}/start, DELETE /pods/{podId}. A Pod reaches SSH through
a public IP and a mapped port (``portMappings["22"]``) that may change when it starts again;
stopping wipes its container disk (the volume is kept), so before a stop the head gives the pod a
start command that brings the node back from its volume (``prepare_stop``; an update may reset
the pod, which is why it is sent only when the command differs, and only to an idle pod).
"""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import (
    CloudError,
    Http,
    api_url,
    instance,
    message_of,
)

NAME = "runpod"
DEFAULT_URL = "https://rest.runpod.io/v1"
SSH_USER = "root"
CAN_STOP = True
STATUS = {"RUNNING": "running", "EXITED": "stopped", "TERMINATED": "terminated"}
CAPACITY_WORDS = ("no longer any instances available", "not enough free gpus", "no available", "out of capacity")


def describe(status, payload):
    """(message, kind) from Runpod's error answer ({"error": "..."} or {"message": "..."})."""
    message = message_of(payload, ("error",), ("message",), ("error", "message"))
    lowered = message.lower()
    if any(word in lowered for word in CAPACITY_WORDS):
        return message, "capacity"
    if "quota" in lowered or "spend limit" in lowered or "balance" in lowered:
        return message, "quota"
    return message, "error"


def normalize(data):
    """One Pod of GET /pods in meshctl's shape (SSH through the public IP and port 22's mapping)."""
    if not isinstance(data, dict):
        raise CloudError("runpod answered a pod that is not an object", kind="bad-answer")
    gpu = data.get("gpu") if isinstance(data.get("gpu"), dict) else {}
    ports = data.get("portMappings") if isinstance(data.get("portMappings"), dict) else {}
    price = data.get("adjustedCostPerHr", data.get("costPerHr"))
    running = data.get("desiredStatus") == "RUNNING"
    return instance(
        NAME,
        data.get("id"),
        data.get("name") or "",
        STATUS.get(str(data.get("desiredStatus")), "unknown"),
        data.get("desiredStatus"),
        ssh_host=data.get("publicIp") if running else None,
        ssh_port=ports.get("22") if running else None,
        ssh_user=SSH_USER,
        gpus=gpu.get("count", data.get("gpuCount", 0)),
        gpu_type=gpu.get("displayName") or gpu.get("id") or "",
        price_per_hour=price,
    )


class Client:
    name = NAME
    can_stop = CAN_STOP

    def __init__(self, key, http=None, environ=None):
        self.http = http or Http(NAME, api_url(NAME, DEFAULT_URL, environ), key, describe, min_interval=0.2)

    def list(self):
        answer = self.http.request("GET", "/pods")
        if not isinstance(answer, list):
            raise CloudError("runpod answered GET /pods without a list", kind="bad-answer")
        return [normalize(item) for item in answer]

    def get(self, instance_id):
        return normalize(self.http.request("GET", f"/pods/{instance_id}"))

    def launch(self, gpu_type, name, image, gpu_count=1, volume_gb=20, env=None):
        body = {"name": name, "imageName": image, "gpuTypeIds": [gpu_type], "gpuCount": gpu_count,
                "ports": ["22/tcp"], "volumeInGb": volume_gb, "volumeMountPath": "/workspace",
                "env": dict(env or {})}  # fmt: skip
        return normalize(self.http.request("POST", "/pods", body))["id"]

    def start_command(self, instance_id):
        """The pod's ``dockerStartCmd`` (an empty list: the image's own)."""
        answer = self.http.request("GET", f"/pods/{instance_id}")
        command = answer.get("dockerStartCmd") if isinstance(answer, dict) else None
        if command is None:
            return []
        if not isinstance(command, list) or not all(isinstance(part, str) for part in command):
            raise CloudError("runpod answered a dockerStartCmd that is not a list of strings", kind="bad-answer")
        return command

    def prepare_stop(self, instance_id, start_command):
        """Give the pod ``start_command`` unless it has it already; True when it was changed."""
        if not start_command or self.start_command(instance_id) == list(start_command):
            return False
        self.http.request("PATCH", f"/pods/{instance_id}", {"dockerStartCmd": list(start_command)})
        return True

    def stop(self, instance_id):
        self.http.request("POST", f"/pods/{instance_id}/stop")

    def start(self, instance_id):
        self.http.request("POST", f"/pods/{instance_id}/start")

    def terminate(self, instance_id):
        self.http.request("DELETE", f"/pods/{instance_id}")
