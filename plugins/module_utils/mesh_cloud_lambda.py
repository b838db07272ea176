# Copyright: meshctl contributors; Apache-2.0
"""Lambda's Cloud API (https://cloud.lambda.ai/api/v1, "Lambda Cloud API" v1): instances.

Used: GET /instances, GET /instances/{id}, GET /instance-types, POST /instance-operations/launch,
POST /instance-operations/terminate, GET /ssh-keys, POST /ssh-keys. Lambda has no stop: an
instance runs (and bills) until it is terminated. About one request a second and one launch
every 12 seconds (5 a minute) are allowed. Errors are ``{"error": {"code", "message", "suggestion"}}``.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import stat
import time
from typing import ClassVar

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import (
    PLAIN_RE,
    Capabilities,
    CloudError,
    Http,
    api_url,
    instance,
    launch_option,
    message_of,
    offer,
)

NAME = "lambda"
CAPABILITIES = Capabilities(
    name=NAME,
    title="Lambda",
    api="Lambda Cloud API v1",
    default_url="https://cloud.lambda.ai/api/v1",
    document="https://docs.lambda.ai/api/cloud (the Cloud API reference: instances, instance types, SSH keys; its "
    "OpenAPI document, info.version 1.10.0)",
    checked="2026-12-01",
    keys_url="https://cloud.lambda.ai/api-keys",
    ssh_user="ubuntu",
    can_stop=False,
    keeps_disk=False,
    keeps_volume=False,
    stopped_bills="",
    network_volumes=False,
    keeps_address=False,
    relaunch=True,
    pod=False,
    price="api",
    gpu_names="an instance type (gpu_1x_a10, gpu_8x_h100_sxm5)",
    launch_needs=("region", "ssh_key_names"),
    marks={"env": "", "words": ("lambda",)},
    registers_keys=True,
)
LAUNCH_OPTIONS = (
    launch_option(
        "ssh_key_names",
        "--ssh-key-name",
        "Lambda: the SSH key registered at Lambda the instance takes (exactly one).",
        multiple=True,
    ),
)
LAUNCH_INTERVAL = 12.0  # seconds between two launches (5 a minute): the account's, across every client
LAUNCH_TRIES = 3  # a launch answered with a provider/ code (upstream, passing) is sent again this often
HOSTNAME_RE = re.compile(r"[a-z0-9][0-9a-z-]{0,62}")  # the launch's hostname (its pattern in the document)


class LaunchPacer:
    """One launch every LAUNCH_INTERVAL seconds for one account, whichever client, candidate or
    process sends it: the time of the account's last launch is kept in a file of this user's
    (``<folder>/lambda-launch-<sha256 of the key, 16 digits>``, 0600 in a 0700 folder, neither a
    link), locked while a launch waits its turn and is sent. Without such a folder (a user without
    a home), the spacing holds within this process only."""

    _last: ClassVar[dict] = {}  # (folder, account) -> wall time of its last launch, in this process
    wall = staticmethod(time.time)  # the time every process of the account agrees on
    sleep = staticmethod(time.sleep)

    def __init__(self, key, folder=None, interval=LAUNCH_INTERVAL):
        self.account = hashlib.sha256(str(key).encode()).hexdigest()[:16]
        self.folder = folder or os.path.join(os.path.expanduser("~"), ".cache", "meshctl")
        self.interval = interval
        self._fd = None

    def _open(self):
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            info = os.lstat(self.folder)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
                return None
            return os.open(os.path.join(self.folder, f"lambda-launch-{self.account}"),
                           os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)  # fmt: skip
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EROFS, errno.ELOOP, errno.ENOENT, errno.EPERM, errno.ENOTDIR):
                return None
            raise

    def __enter__(self):
        self._fd = self._open()
        last = self._last.get((self.folder, self.account))
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                recorded = float(os.pread(self._fd, 64, 0).decode() or "nan")
                last = recorded if last is None or recorded > last else last
            except ValueError:
                pass
        if last is not None:
            wait = min(last + self.interval - self.wall(), self.interval)  # a clock set back waits no longer
            if wait > 0:
                self.sleep(wait)
        return self

    def __exit__(self, *exc):
        now = self.wall()  # sent or refused, a launch counts against the limit
        self._last[(self.folder, self.account)] = now
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, repr(now).encode(), 0)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None
        return False


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
    if code.startswith("provider/"):  # from Lambda's upstream ("provider/internal-unavailable": try again shortly)
        return message, "transient"
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

    def __init__(self, key, http=None, environ=None, prices=None, pacer=None):
        self.http = http or Http(NAME, api_url(NAME, CAPABILITIES.default_url, environ), key, describe,
                                 min_interval=1.0)  # fmt: skip
        self.pacer = pacer or LaunchPacer(key, folder=(environ or os.environ).get("MESHCTL_PACE_DIR"))

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
        """Launch one instance of ``type`` in ``region`` named ``name`` (its hostname too, where the name
        is one), reached with the one registered key ``ssh_key_names``; returns its id. Launches are
        spaced LAUNCH_INTERVAL apart across the account (LaunchPacer); one answered with an upstream
        provider/ code is sent again, unless an instance of that name appeared meanwhile."""
        keys = list(request.get("ssh_key_names") or [])
        if not request.get("region") or not keys:
            raise CloudError("a Lambda launch needs a region and a key registered at Lambda",
                             hint="pass --region (`meshctl offers --provider lambda` lists where there is capacity) "
                             "and --ssh-key-name", kind="invalid")  # fmt: skip
        if len(keys) != 1:
            raise CloudError(f"a Lambda launch takes exactly one SSH key ({len(keys)} given: {', '.join(keys)})",
                             hint="give one --ssh-key-name; add more keys on the machine once it runs",
                             kind="invalid")  # fmt: skip
        body = {"region_name": request["region"], "instance_type_name": request["type"],
                "ssh_key_names": keys, "name": request["name"]}  # fmt: skip
        if HOSTNAME_RE.fullmatch(str(request["name"])):  # the VM's hostname is its Slurm name from boot
            body["hostname"] = request["name"]
        for attempt in range(LAUNCH_TRIES):
            try:
                with self.pacer:
                    answer = self.http.request("POST", "/instance-operations/launch", body)
                break
            except CloudError as exc:
                if exc.kind == "transient" and attempt + 1 < LAUNCH_TRIES and not self._named(request["name"]):
                    continue
                if exc.kind != "not-found":
                    raise
                # On a launch, global/object-does-not-exist names what the body points at: the
                # instance type, the region or a key name Lambda does not know, not an instance.
                raise CloudError(exc.message, hint=f"Lambda knows no {request['type']} in {request['region']} or "
                                 f"no key named {keys[0]}: `meshctl offers --provider lambda` lists types and "
                                 "regions; register the key in Lambda's console", kind="invalid",
                                 status=exc.status) from None  # fmt: skip
        ids = ((answer or {}).get("data") or {}).get("instance_ids") if isinstance(answer, dict) else None
        if not isinstance(ids, list) or len(ids) != 1 or not isinstance(ids[0], str):
            raise CloudError("lambda answered a launch without one instance id", kind="bad-answer")
        return ids[0]

    def _named(self, name):
        """Whether an instance named NAME exists now (a launch that failed may have been done)."""
        return any(i["name"] == name and i["status"] not in ("terminated", "preempted") for i in self.list())

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
