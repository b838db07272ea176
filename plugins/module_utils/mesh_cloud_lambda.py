# Copyright: meshctl contributors; Apache-2.0
"""Lambda's Cloud API (https://cloud.lambda.ai/api/v1, "Lambda Cloud API" v1): instances.

Used: GET /instances, GET /instances/{id}, GET /instance-types, POST /instance-operations/launch,
POST /instance-operations/terminate, GET /ssh-keys, POST /ssh-keys. Lambda has no stop: an
instance runs (and bills) until it is terminated. About one request a second and one launch
every 12 seconds (5 a minute) are allowed. Errors are ``{"error": {"code", "message", "suggestion"}}``.
"""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import (
    PLAIN_RE,
    Capabilities,
    CloudError,
    Http,
    api_url,
    instance,
    message_of,
    offer,
)

NAME = "lambda"
CAPABILITIES = Capabilities(
    name=NAME,
    title="Lambda",
    api="Lambda Cloud API v1",
    default_url="https://cloud.lambda.ai/api/v1",
    document="https://docs.lambda.ai/api/cloud (the Cloud API reference: instances, instance types, SSH keys)",
    checked="2026-11-25",
    keys_url="https://cloud.lambda.ai/api-keys",
    ssh_user="ubuntu",
    can_stop=False,
    keeps_disk=False,
    keeps_volume=False,
    stopped_bills="",
    keeps_address=False,
    relaunch=True,
    pod=False,
    price="api",
    gpu_names="an instance type (gpu_1x_a10, gpu_8x_h100_sxm5)",
    launch_needs=("region", "ssh_key_names"),
    marks={"env": "", "words": ("lambda",)},
    registers_keys=True,
)
LAUNCH_INTERVAL = 12.0  # seconds between two launches (5 a minute)
STATUS = {"active": "running", "booting": "starting", "unhealthy": "unhealthy", "terminating": "stopping",
          "terminated": "terminated", "preempted": "preempted"}  # fmt: skip


def describe(status, payload):
    """(message, kind) from Lambda's error answer: {"error": {"code", "message", "suggestion"}}."""
    error = payload.get("error") if isinstance(payload, dict) else None
    code = str(error.get("code", "")) if isinstance(error, dict) else ""
    message = message_of(payload, ("error", "message"))
    suggestion = message_of(payload, ("error", "suggestion"))
    if suggestion != "no message":
        message += f" ({suggestion})"
    if "insufficient-capacity" in code:
        return message, "capacity"
    if "quota" in code:
        return message, "quota"
    if code == "global/invalid-address":  # 403 on a launch: the billing address, not the key
        return message, "billing"
    if "invalid-api-key" in code or "unauthorized" in code or "account-inactive" in code:
        return message, "auth"
    if "not-found" in code or "object-does-not-exist" in code:
        return message, "not-found"
    if code == "global/invalid-parameters":
        return message, "invalid"
    return message, "error"


def normalize(data):
    """One instance of GET /instances in meshctl's shape."""
    if not isinstance(data, dict):
        raise CloudError("lambda answered an instance that is not an object", kind="bad-answer")
    kind = data.get("instance_type") if isinstance(data.get("instance_type"), dict) else {}
    specs = kind.get("specs") if isinstance(kind.get("specs"), dict) else {}
    cents = kind.get("price_cents_per_hour")
    return instance(
        NAME,
        data.get("id"),
        data.get("name") or "",
        STATUS.get(str(data.get("status")), "unknown"),
        data.get("status"),
        ssh_host=data.get("ip"),
        ssh_port=22,
        ssh_user=CAPABILITIES.ssh_user,
        gpus=specs.get("gpus", 0),
        gpu_type=kind.get("gpu_description") or kind.get("name") or "",
        price_per_hour=cents / 100 if isinstance(cents, (int, float)) else None,
    )


def type_offers(answer):
    """GET /instance-types as offers: one per instance type, its regions those with capacity now."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, dict):
        raise CloudError("lambda answered GET /instance-types without a data object", kind="bad-answer")
    found = []
    for item in data.values():
        kind = item.get("instance_type") if isinstance(item, dict) else None
        if not isinstance(kind, dict):
            continue
        specs = kind.get("specs") if isinstance(kind.get("specs"), dict) else {}
        cents = kind.get("price_cents_per_hour")
        regions = [r.get("name") for r in item.get("regions_with_capacity_available") or [] if isinstance(r, dict)]
        made = offer(NAME, kind.get("name"), kind.get("gpu_description") or kind.get("description") or "",
                     specs.get("gpus", 0), cents / 100 if isinstance(cents, (int, float)) else None, regions,
                     bool(regions), vcpus=specs.get("vcpus"), memory_gb=specs.get("memory_gib"))  # fmt: skip
        if made:
            found.append(made)
    return found


class Client:
    name = NAME
    capabilities = CAPABILITIES

    def __init__(self, key, http=None, environ=None, prices=None):
        self.http = http or Http(NAME, api_url(NAME, CAPABILITIES.default_url, environ), key, describe,
                                 min_interval=1.0)  # fmt: skip
        self._last_launch = None

    def list(self):
        answer = self.http.request("GET", "/instances")
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list):
            raise CloudError("lambda answered GET /instances without a data list", kind="bad-answer")
        return [normalize(item) for item in data]

    def get(self, instance_id):
        answer = self.http.request("GET", f"/instances/{instance_id}")
        return normalize(answer.get("data") if isinstance(answer, dict) else None)

    def launch(self, request):
        """Launch one instance of ``type`` in ``region`` named ``name``, reached with the registered key
        ``ssh_key_names``; returns its id. Lambda allows one launch every 12 seconds."""
        if not request.get("region") or not request.get("ssh_key_names"):
            raise CloudError("a Lambda launch needs a region and a key registered at Lambda",
                             hint="pass --region (`meshctl offers --provider lambda` lists where there is capacity) "
                             "and --ssh-key-name", kind="invalid")  # fmt: skip
        if self._last_launch is not None:
            wait = self._last_launch + LAUNCH_INTERVAL - self.http.clock()
            if wait > 0:
                self.http.sleep(wait)
        body = {"region_name": request["region"], "instance_type_name": request["type"],
                "ssh_key_names": list(request["ssh_key_names"]), "name": request["name"]}  # fmt: skip
        try:
            answer = self.http.request("POST", "/instance-operations/launch", body)
        except CloudError as exc:
            if exc.kind != "not-found":
                raise
            # On a launch, global/object-does-not-exist names what the body points at: the
            # instance type, the region or a key name Lambda does not know, not an instance.
            raise CloudError(exc.message, hint=f"Lambda knows no {request['type']} in {request['region']} or no key "
                             f"named {', '.join(request['ssh_key_names'])}: `meshctl offers --provider lambda` lists "
                             "types and regions; register the key in Lambda's console", kind="invalid",
                             status=exc.status) from None  # fmt: skip
        self._last_launch = self.http.clock()
        ids = ((answer or {}).get("data") or {}).get("instance_ids") if isinstance(answer, dict) else None
        if not isinstance(ids, list) or len(ids) != 1 or not isinstance(ids[0], str):
            raise CloudError("lambda answered a launch without one instance id", kind="bad-answer")
        return ids[0]

    def spec(self, instance_id):
        """What a launch of the same machine needs: ``{"instance_type", "region", "name"}`` of the
        instance (GET /instances/{id}), each checked to be a plain name."""
        answer = self.http.request("GET", f"/instances/{instance_id}")
        data = answer.get("data") if isinstance(answer, dict) else None
        data = data if isinstance(data, dict) else {}
        kind = data.get("instance_type") if isinstance(data.get("instance_type"), dict) else {}
        region = data.get("region") if isinstance(data.get("region"), dict) else {}
        spec = {"instance_type": kind.get("name"), "region": region.get("name"), "name": data.get("name") or ""}
        for part in ("instance_type", "region", "name"):
            if not isinstance(spec[part], str) or not PLAIN_RE.fullmatch(spec[part] or "x"):
                raise CloudError(f"lambda answered instance {instance_id} without a plain {part}", kind="bad-answer")
        return spec

    def ssh_keys(self):
        """The names of the SSH keys registered at Lambda (GET /ssh-keys), each with its public key."""
        answer = self.http.request("GET", "/ssh-keys")
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list):
            raise CloudError("lambda answered GET /ssh-keys without a data list", kind="bad-answer")
        return {str(k.get("name")): str(k.get("public_key") or "").strip() for k in data if isinstance(k, dict)}

    def add_ssh_key(self, name, public_key):
        """Register PUBLIC_KEY at Lambda as NAME (POST /ssh-keys), for launches to name."""
        self.http.request("POST", "/ssh-keys", {"name": name, "public_key": public_key})

    def register_key(self, key_name, public_key):
        """KEY_NAME registered with PUBLIC_KEY (registered now when it is not); refused when Lambda holds
        another key of that name."""
        known = self.ssh_keys()
        if key_name not in known:
            self.add_ssh_key(key_name, public_key)
        elif known[key_name].split()[:2] != public_key.split()[:2]:
            raise CloudError(f"Lambda holds another key named {key_name}",
                             hint=f"delete {key_name} in Lambda's console", kind="conflict")  # fmt: skip
        return key_name

    def offers(self, count=None):  # an instance type has its GPUs: COUNT picks among them (meshctl.cloud.offers)
        return type_offers(self.http.request("GET", "/instance-types"))

    def terminate(self, instance_id):
        self.http.request("POST", "/instance-operations/terminate", {"instance_ids": [instance_id]})

    def stop(self, instance_id):
        raise CloudError(f"Lambda has no stop: instance {instance_id} runs until it is terminated",
                         hint="terminate it (`meshctl remove-node NAME --terminate`) or let it run",
                         kind="unsupported")  # fmt: skip

    def start(self, instance_id):
        raise CloudError(f"Lambda has no start: instance {instance_id} runs until it is terminated, and a "
                         "terminated one cannot come back",
                         hint="a booting instance runs by itself in a few minutes: wait; a terminated one: launch a "
                         "new one (`meshctl launch lambda --type T --name N`)", kind="unsupported")  # fmt: skip
