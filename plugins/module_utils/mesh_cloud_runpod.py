# Copyright: meshctl contributors; Apache-2.0
"""Runpod's REST API v2 (https://api.runpod.io/v2, OpenAPI "Runpod REST API" 2.0.0): Pods and the GPU catalog.

Used: GET /pods, GET /pods/{id}, POST /pods, PATCH /pods/{id} (``args`` only), POST /pods/{id}/action
(``{"action": "stop"|"start"}``; 409 when the pod's status does not allow it now), DELETE /pods/{id},
GET /catalog/gpus (``include=AVAILABILITY&product=POD``), GET /network-volumes, DELETE
/network-volumes/{id}. Lists come wrapped (``{"pods": [...]}``, one
answer: the document gives the list no pages); errors are RFC 9457 problems (``{title, status, detail,
errors}``); every answer may carry ``RateLimit`` headers and a 429 ``Retry-After``.

A pod reaches SSH directly at ``ssh.direct`` (host, port, user), or through its ``22/tcp`` entry of
``runtime.ports``, only while it runs; the port may change when it starts again. Stopping keeps the
pod's volume and wipes its container disk, so before it starts a stopped pod again the head gives it
a start command (``args``) that brings the node back from its volume (``prepare_start``; sent only
when it differs, and never to a running pod: "Editing a running Pod resets it completely", the
document's Manage Pods page). ``cost`` is the $/h billed now (0 while stopped); the catalog's ``price`` is
per GPU, per cloud (Secure: Runpod's data centres; Community: hosts run by third parties).
"""

from __future__ import annotations

import json
import math
import shlex

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import (
    GONE,
    Capabilities,
    CloudError,
    Http,
    api_url,
    instance,
    launch_option,
    message_of,
    number,
    offer,
    problem_message,
    volume,
)

NAME = "runpod"
CAPABILITIES = Capabilities(
    name=NAME,
    title="Runpod",
    api="Runpod REST API v2 (OpenAPI 2.0.0)",
    default_url="https://api.runpod.io/v2",
    document="https://api.runpod.io/v2/openapi.json (docs.runpod.io/api-reference-v2; runpod/docs "
    "api-reference-v2/openapi.json of 2026-08-20, and pods/create-a-pod.mdx pinned at 4962c60a)",
    checked="2026-12-01",
    keys_url="https://console.runpod.io/user/settings (API Keys)",
    ssh_user="root",
    can_stop=True,
    keeps_disk=False,
    keeps_volume=True,
    stopped_bills='its volume disk, at twice the running rate ("stopped Pods are charged $0.20 per GB per month for '
    'volume storage", $0.10 while running: docs.runpod.io get-started/billing-information)',
    network_volumes=True,
    keeps_address=False,
    relaunch=False,
    pod=True,
    price="api",
    gpu_names="a GPU type id of the catalog (NVIDIA GeForce RTX 4090)",
    launch_needs=(),
    marks={"env": "RUNPOD_", "words": ()},
    registers_keys=False,
)
STATUS = {"PROVISIONING": "starting", "STARTING": "starting", "RUNNING": "running", "EXITED": "stopped",
          "ERROR": "unhealthy", "TERMINATED": "terminated"}  # fmt: skip
CLOUDS = ("SECURE", "COMMUNITY")
LAUNCH_OPTIONS = (
    launch_option(
        "image", "--image", "Runpod: the container image (default: an official PyTorch image that starts sshd)."
    ),
    launch_option(
        "cloud",
        "--cloud",
        "Runpod: Secure Cloud (Runpod's data centres, the default) or Community Cloud (hosts run by third parties).",
        choices=CLOUDS,
    ),
)
IMAGE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"  # an official image: it starts sshd with PUBLIC_KEY
VOLUME_PATH = "/workspace"
MAX_BODY = 102400  # bytes: a larger request gets 413 before authentication (the create's description)
CAPACITY_WORDS = ("no longer any instances available", "not enough free gpus", "no available", "out of capacity",
                  "could not be placed", "no capacity", "capacity")  # fmt: skip


def describe(status, payload):
    """(message, kind) from Runpod's problem answer (``{title, status, detail, errors}``)."""
    message = problem_message(payload)
    if message == "no message":  # an answer from something in front of the API
        message = message_of(payload, ("error",), ("message",))
    lowered = message.lower()
    if status == 402 or "balance" in lowered:  # the create's table: insufficient balance, stop
        return message, "billing"
    if "spend limit" in lowered or "quota" in lowered:
        return message, "quota"
    if status == 409:
        return message, "conflict"
    if status in (413, 422):  # 413: over MAX_BODY bytes, refused before anything else
        return message, "invalid"
    if status == 400 and any(word in lowered for word in CAPACITY_WORDS):
        return message, "capacity"
    return message, "error"


def ssh_of(data):
    """(host, port, user) of a pod's direct SSH, or its 22/tcp runtime port; Nones when it has none."""
    ssh = data.get("ssh") if isinstance(data.get("ssh"), dict) else {}
    direct = ssh.get("direct") if isinstance(ssh.get("direct"), dict) else None
    if direct:
        return direct.get("host"), direct.get("port"), direct.get("username") or CAPABILITIES.ssh_user
    runtime = data.get("runtime") if isinstance(data.get("runtime"), dict) else {}
    for port in runtime.get("ports") or []:
        if isinstance(port, dict) and port.get("private") == 22 and port.get("public") and port.get("ip"):
            return port["ip"], port["public"], CAPABILITIES.ssh_user
    return None, None, CAPABILITIES.ssh_user


def normalize(data):
    """One Pod of GET /pods in meshctl's shape."""
    if not isinstance(data, dict):
        raise CloudError("runpod answered a pod that is not an object", kind="bad-answer")
    gpu = data.get("gpu") if isinstance(data.get("gpu"), dict) else {}
    status = str(data.get("status"))
    host, port, user = ssh_of(data) if status == "RUNNING" else (None, None, CAPABILITIES.ssh_user)
    return instance(
        NAME,
        data.get("id"),
        data.get("name") or "",
        STATUS.get(status, "unknown"),
        status,
        ssh_host=host,
        ssh_port=port,
        ssh_user=user,
        gpus=gpu.get("count", 1) if gpu else 0,
        gpu_type=gpu.get("id") or "",
        price_per_hour=data.get("cost"),
        cloud=data.get("cloud") if data.get("cloud") in CLOUDS else "",
        volume=(network_volume(data) or {}).get("volumeId", ""),
    )


# A network volume's storage, by the month, whether or not a pod uses it (docs.runpod.io
# storage/network-volumes, "Pricing", runpod/docs a900806e): standard storage $0.07/GB for the first
# TB, $0.05/GB beyond; high-performance storage "at a premium" the page gives no figure for (None).
VOLUME_PRICES = {"STANDARD": ((1024, 0.07), (None, 0.05))}


def volume_price(size_gb, tier):
    """$/month of a network volume of SIZE_GB in TIER, or None when the document gives no price."""
    bands = VOLUME_PRICES.get(tier or "STANDARD")
    if bands is None or not isinstance(size_gb, int) or isinstance(size_gb, bool):
        return None
    total, left = 0.0, size_gb
    for band, rate in bands:
        part = left if band is None else min(left, band)
        total, left = total + part * rate, left - part
    return round(total, 2)


def normalize_volume(data):
    """One NetworkVolume of GET /network-volumes in meshctl's shape."""
    if not isinstance(data, dict):
        raise CloudError("runpod answered a network volume that is not an object", kind="bad-answer")
    tier = data.get("type") if data.get("type") in ("STANDARD", "HIGH_PERFORMANCE") else ""
    size = data.get("size")
    return volume(NAME, data.get("id"), data.get("name") or "", size, data.get("dataCenter") or "", tier,
                  volume_price(size, tier))  # fmt: skip


def gpu_offers(answer, clouds=CLOUDS):
    """The GPU catalog (GET /catalog/gpus with availability) as offers: one per GPU type and cloud of
    CLOUDS it is offered in, for a single GPU (a launch asks for ``gpus``; its price is that many
    times this). Its availability is for the cloud and GPU count the catalog was asked for."""
    gpus = answer.get("gpus") if isinstance(answer, dict) else None
    if not isinstance(gpus, list):
        raise CloudError("runpod answered GET /catalog/gpus without a gpus list", kind="bad-answer")
    found = []
    for item in gpus:
        if not isinstance(item, dict):
            continue
        price = item.get("price") if isinstance(item.get("price"), dict) else {}
        most = item.get("maxCount") if isinstance(item.get("maxCount"), dict) else {}
        centres = [c.get("id") for c in item.get("dataCenters") or [] if isinstance(c, dict)]
        for cloud in clouds:
            key = cloud.lower()
            if not item.get(key) or number(price.get(key), 0.0001) is None:
                continue
            made = offer(NAME, item.get("id"), item.get("name") or item.get("id"), 1, price[key], centres,
                         item.get("availability") not in (None, "NONE"), cloud,
                         number(most.get(key), 1, 64) or 1)  # fmt: skip
            if made:
                found.append(made)
    return found


def gpu_count(answer):
    """The GPUs a pod has (its ``gpu.count``; a pod answered without ``gpu`` has none)."""
    gpu = answer.get("gpu") if isinstance(answer, dict) else None
    count = gpu.get("count", 1) if isinstance(gpu, dict) else 0
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0


def network_volume(answer):
    """A pod's network volume mount (``mounts.network[0]``: ``volumeId``, ``path``), or None."""
    mounts = answer.get("mounts") if isinstance(answer, dict) else None
    network = mounts.get("network") if isinstance(mounts, dict) else None
    first = network[0] if isinstance(network, list) and network else None
    if not isinstance(first, dict) or not all(isinstance(first.get(k), str) for k in ("volumeId", "path")):
        return None
    return {"volumeId": first["volumeId"], "path": first["path"]}


def replacement(pod, name, start_command, volume):
    """The create (POST /pods) of a new pod for the node of POD: its image, GPUs, cloud, ports,
    environment and container disk, its network VOLUME, in the volume's data centre (the pod's),
    running START_COMMAND."""
    gpu = pod.get("gpu") if isinstance(pod.get("gpu"), dict) else {}
    if not isinstance(gpu.get("id"), str) or not isinstance(pod.get("image"), str):
        raise CloudError(f"runpod answered pod {pod.get('id')} without its GPU type or image", kind="bad-answer")
    body = {
        "name": name,
        "image": pod["image"],
        "gpu": {"id": gpu["id"], "count": max(1, gpu_count(pod))},
        "cloud": pod.get("cloud") if pod.get("cloud") in CLOUDS else "SECURE",
        "ports": [p for p in pod.get("ports") or [] if isinstance(p, str)] or ["22/tcp"],
        "mounts": {"network": [volume]},
        "args": shlex.join(start_command),
    }
    if isinstance(pod.get("env"), dict) and pod["env"]:
        body["env"] = {str(k): str(v) for k, v in pod["env"].items()}
    if isinstance(pod.get("disk"), int) and not isinstance(pod.get("disk"), bool) and pod["disk"] > 0:
        body["disk"] = pod["disk"]
    if isinstance(pod.get("dataCenterId"), str) and pod["dataCenterId"]:
        body["dataCenterIds"] = [pod["dataCenterId"]]  # "an existing NetworkVolume in the same data center"
    return body


def args_of(answer):
    """A pod's start command as a list of words (empty: the image's own start), from its deconstructed
    ``entrypoint`` and ``cmd`` where the answer has them (the document: responses carry both), else
    from ``args``: a bare shell string (CMD), or a JSON object ``{"entrypoint": [...], "cmd": [...]}``."""
    if not isinstance(answer, dict):
        return []
    parts = (answer.get("entrypoint"), answer.get("cmd"))
    if all(isinstance(p, list) and all(isinstance(w, str) for w in p) for p in parts):
        return [*parts[0], *parts[1]]
    args = answer.get("args")
    if args in (None, ""):
        return []
    if not isinstance(args, str):
        raise CloudError("runpod answered args that are not a string", kind="bad-answer")
    if args.lstrip().startswith("{"):
        try:
            form = json.loads(args)
        except ValueError:
            form = None
        words = [form.get(k) or [] for k in ("entrypoint", "cmd")] if isinstance(form, dict) else None
        if not words or not all(isinstance(p, list) and all(isinstance(w, str) for w in p) for p in words):
            raise CloudError("runpod answered args meshctl cannot read", kind="bad-answer")
        return [*words[0], *words[1]]
    try:
        return shlex.split(args)
    except ValueError:
        raise CloudError("runpod answered args meshctl cannot read", kind="bad-answer") from None


def sized(body, what):
    """BODY, refused before it is sent when its JSON is over MAX_BODY bytes (Runpod answers 413
    before authentication): the error says what is that large."""
    size = len(json.dumps(body).encode())
    if size > MAX_BODY:
        heavy = max(("env", "args", "image", "ports"), key=lambda k: len(json.dumps(body.get(k, ""))))
        raise CloudError(f"runpod refuses a request over {MAX_BODY} bytes: {what} would be {size} bytes, most of "
                         f"it its {heavy}", hint=f"shorten the pod's {heavy} (its environment variables or start "
                         "command)", kind="invalid", status=413)  # fmt: skip
    return body


def per_gpu(total, gpus):
    """TOTAL (of the whole machine) as a placement filter for each of GPUS: at least 1, rounded up."""
    return max(1, math.ceil(float(total) / max(1, int(gpus))))


class Client:
    name = NAME
    capabilities = CAPABILITIES

    def __init__(self, key, http=None, environ=None, prices=None):
        self.http = http or Http(NAME, api_url(NAME, CAPABILITIES.default_url, environ), key, describe,
                                 min_interval=0.2)  # fmt: skip

    def list(self):
        answer = self.http.request("GET", "/pods")
        pods = answer.get("pods") if isinstance(answer, dict) else None
        if not isinstance(pods, list):
            raise CloudError("runpod answered GET /pods without a pods list", kind="bad-answer")
        return [normalize(item) for item in pods]

    def get(self, instance_id):
        return normalize(self.http.request("GET", f"/pods/{instance_id}"))

    def launch(self, request):
        """Create a pod (POST /pods): ``type`` a GPU type id, ``gpus``, ``image``, ``cloud`` (SECURE or
        COMMUNITY), ``region`` a data centre id (``dataCenterIds``), ``volume_gb`` at /workspace,
        ``public_key`` authorized by the image (its PUBLIC_KEY); 22/tcp published. Returns its id."""
        cloud = (request.get("cloud") or "SECURE").upper()
        if cloud not in CLOUDS:
            raise CloudError(f"runpod has no cloud {request.get('cloud')!r}", hint="use SECURE or COMMUNITY",
                             kind="invalid")  # fmt: skip
        gpus = int(request.get("gpus") or 1)
        gpu = {"id": request["type"], "count": gpus}
        # What the machine must have, as placement filters (the document: "not a resource request";
        # the pod's gpu.vcpuCount and gpu.memory say what it got): per GPU, rounded up.
        if request.get("cpus"):
            gpu["minVcpuCountPerGpu"] = per_gpu(request["cpus"], gpus)
        if request.get("memory_gb"):
            gpu["minRamPerGpu"] = per_gpu(request["memory_gb"], gpus)
        body = {
            "name": request["name"],
            "image": request.get("image") or IMAGE,
            "gpu": gpu,
            "cloud": cloud,
            "ports": ["22/tcp"],
            "mounts": {"persistent": {"size": int(request.get("volume_gb") or 20), "path": VOLUME_PATH}},
            "startSsh": True,
        }
        if request.get("public_key"):
            body["env"] = {"PUBLIC_KEY": request["public_key"]}
        if request.get("region"):  # a data centre the user named (--region): placed there or refused
            body["dataCenterIds"] = [request["region"]]
        try:
            return normalize(self.http.request("POST", "/pods", sized(body, "the create")))["id"]
        except CloudError as exc:
            # The create's own table (its description in the v2 document): a 400 is a broken rule or a
            # GPU that could not be placed (only the detail tells): try the next candidate; a 403 is
            # a pool the account cannot access: skip it.
            if exc.status == 403:
                hint = f"this account cannot rent {request['type']} in {cloud} Cloud: another GPU type or cloud may do"
                raise CloudError(exc.message, hint=hint, kind="pool", status=403) from None
            if exc.status == 400 and exc.kind in ("error", "capacity"):
                # "capacity exhaustion currently carries no machine-readable code of its own": only the
                # detail's words tell, so the refusal may be the request's (launch_first reads every
                # candidate's 400 so).
                hint = (
                    exc.hint
                    if exc.kind == "capacity"
                    else ("Runpod could not place it, or the request breaks a rule: the detail says which")
                )
                refused = CloudError(exc.message, hint=hint, kind="capacity", status=400)
                refused.request_or_capacity = True
                raise refused from None
            raise

    def start_command(self, instance_id):
        """The pod's ``args`` as a list of words (empty: the image's own start)."""
        return args_of(self.http.request("GET", f"/pods/{instance_id}"))

    def prepare_start(self, instance_id, start_command):
        """Give a stopped pod ``start_command`` (its ``args``) unless it has it already; True when changed.
        A pod that runs is left alone (an edit would reset it): False."""
        answer = self.http.request("GET", f"/pods/{instance_id}")
        if not start_command or normalize(answer)["status"] != "stopped" or args_of(answer) == list(start_command):
            return False
        self.http.request("PATCH", f"/pods/{instance_id}", sized({"args": shlex.join(start_command)}, "the edit"))
        return True

    def _action(self, instance_id, action):
        return self.http.request("POST", f"/pods/{instance_id}/action", {"action": action})

    def stop(self, instance_id):
        self._action(instance_id, "stop")

    def start(self, instance_id):
        self._action(instance_id, "start")

    def start_or_replace(self, instance_id, name, start_command):
        """Start a stopped pod; when its host has no GPU left for it, put the node on a new pod of the
        same network volume instead. Returns the id of the pod that runs the node now.

        A stopped pod stays tied to its host (the Zero GPU Pods page): its start is refused when the
        host's GPUs were rented meanwhile ("not enough free GPUs on the host machine", a 400), or it
        comes back with fewer GPUs than it had (the console's zero-GPU start). The page's way out is a
        new pod on the same network volume: created in the volume's data centre with the pod's own
        settings and START_COMMAND (the volume's rejoin script), named NAME, then the old pod is
        terminated (the volume is only detached). A pod with a host-bound volume has no such way:
        it is left stopped and the error says what to do."""
        before = self.http.request("GET", f"/pods/{instance_id}")
        wanted = gpu_count(before)
        try:
            after = self._action(instance_id, "start")
        except CloudError as exc:
            if exc.kind != "capacity":
                raise
            return self._replace(before, name, start_command, "its host has no free GPU", f" (runpod: {exc.message})")
        if gpu_count(after) >= wanted:
            return instance_id
        self._action(instance_id, "stop")  # a pod without its GPUs bills and runs no job
        return self._replace(before, name, start_command, f"it started with {gpu_count(after)} of {wanted} GPUs")

    def _replace(self, pod, name, start_command, why, said=""):
        volume = network_volume(pod)
        if volume is None:
            raise CloudError(
                f"pod {pod.get('id')} cannot start: {why}, and its volume is tied to that host{said}",
                hint="try again later (scontrol update nodename=NODE state=resume), or move the node to a pod "
                "with a network volume (docs/providers.md, Runpod)",
                kind="capacity",
            )
        body = sized(replacement(pod, name, start_command, volume), "the new pod's create")
        try:
            new = normalize(self.http.request("POST", "/pods", body))["id"]
        except CloudError as exc:
            maybe_done = exc.kind == "unreachable" or (exc.status or 0) >= 500
            # its fate unknown: a pod of that name made since is the new one (never two for one node)
            made = [p for p in self.list() if p["name"] == name and p["id"] != pod.get("id")
                    and p["status"] not in GONE] if maybe_done else []  # fmt: skip
            if len(made) != 1:
                raise CloudError(
                    f"pod {pod.get('id')} cannot start: {why}, nor could a new pod of its network volume be "
                    f"created: {exc.message}{said}",
                    hint=exc.hint or "try again later (scontrol update nodename=NODE state=resume)",
                    kind=exc.kind,
                ) from None
            new = made[0]["id"]
        self.terminate(pod.get("id"))
        return new

    def terminate(self, instance_id):
        self.http.request("DELETE", f"/pods/{instance_id}")

    def volumes(self):
        """The account's network volumes (GET /network-volumes, one wrapped list): each bills by its
        size whether or not a pod mounts it."""
        answer = self.http.request("GET", "/network-volumes")
        found = answer.get("networkVolumes") if isinstance(answer, dict) else None
        if not isinstance(found, list):
            raise CloudError("runpod answered GET /network-volumes without a networkVolumes list", kind="bad-answer")
        return [normalize_volume(item) for item in found]

    def delete_volume(self, volume_id):
        """Delete a network volume and its data (DELETE /network-volumes/{id})."""
        self.http.request("DELETE", f"/network-volumes/{volume_id}")

    def offers(self, count=None):
        """The catalog asked once per cloud, for COUNT GPUs when given: its availability is Secure
        Cloud's for one GPU unless the cloud and the count are asked (GET /catalog/gpus, `cloud`,
        `count`), and a ceiling (``maxCount``) is no stock."""
        found = []
        for cloud in CLOUDS:
            query = {"include": "AVAILABILITY", "product": "POD", "cloud": cloud}
            if count:
                query["count"] = str(int(count))
            found += gpu_offers(self.http.request("GET", "/catalog/gpus", query=query), (cloud,))
        return found

    def register_key(self, key_name, public_key):
        raise CloudError("runpod takes a pod's key at its launch (PUBLIC_KEY), not as a registered key",
                         kind="unsupported")  # fmt: skip
