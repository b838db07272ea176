# Copyright: meshctl contributors; Apache-2.0
"""Paperspace's API (https://api.paperspace.com/v1, "Paperspace API" v1, DigitalOcean): machines.

Used: GET /machines (pages: ``after``, ``hasMore``, ``nextPage``), GET /machines/{id}, POST /machines,
PATCH /machines/{id}/start, PATCH /machines/{id}/stop (each with ``{}`` as its JSON body, as
Paperspace's own CLI sends), DELETE /machines/{id}. A stopped machine keeps its disk; its public IP
may change when it starts again (a dynamic IP). A machine's GPUs are its ``accelerators``
(``[{name, count, memory}]``; a CPU machine has none or null). The machine object has a
``usageRate`` the document calls only "the usage rate of the machine" (no unit, no currency), and the
API lists no machine types or prices: meshctl shows a price only where the mesh sets one per machine
type (``paperspace_prices`` in group_vars/all.yml), and offers only those types: each in the
datacenters GET /machine-availability says have one now (REGIONS). Errors are ``{code, message,
details}``.
"""

from __future__ import annotations

import re

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import (
    Capabilities,
    CloudError,
    Http,
    api_url,
    instance,
    launch_option,
    message_of,
    offer,
)

NAME = "paperspace"
CAPABILITIES = Capabilities(
    name=NAME,
    title="Paperspace",
    api="Paperspace API v1 (DigitalOcean)",
    default_url="https://api.paperspace.com/v1",
    document="https://docs.digitalocean.com/reference/paperspace/ and its OpenAPI types as Paperspace's own CLI "
    "carries them (Paperspace/cli api/openapi.ts of 2026-02-08)",
    checked="2026-12-01",
    keys_url="https://console.paperspace.com/settings/apikeys",
    ssh_user="paperspace",
    can_stop=True,
    keeps_disk=True,
    keeps_volume=False,
    stopped_bills="its disk may: the API gives each machine a storage rate (storageRate) apart from its usage "
    "rate, and a stopped machine keeps its disk",
    network_volumes=False,
    keeps_address=False,
    relaunch=False,
    pod=False,
    price="setting",
    gpu_names="a machine type (A4000, A100-80Gx8)",
    launch_needs=("region", "template_id"),
    marks={"env": "", "words": ("paperspace",)},
    registers_keys=False,
)
LAUNCH_OPTIONS = (launch_option("template_id", "--template-id", "Paperspace: the OS template's id."),)
PAGE = 120  # the most machines one page holds
STATUS = {"ready": "running", "serviceready": "starting", "starting": "starting", "provisioning": "starting",
          "restarting": "starting", "upgrading": "starting", "stopping": "stopping", "off": "stopped",
          "failed": "unhealthy"}  # fmt: skip
# The datacenters Paperspace's GPU machines run in, by the names its API and CLI take for a region
# ("Machines Availability", docs.digitalocean.com/products/paperspace/machines/details/availability,
# read 2026-12-02: NY2, AMS1, CA1; the names as Paperspace's create examples give them).
REGIONS = ("East Coast (NY2)", "Europe (AMS1)", "West Coast (CA1)")
TYPE_RE = re.compile(r"[A-Za-z0-9+-]{1,32}")  # a machine type's name (A4000, A100-80Gx8, GPU+)
CPU_TYPES = re.compile(r"^(C\d+|Air|Standard|Pro|Advanced)\Z", re.IGNORECASE)


def describe(status, payload):
    """(message, kind) from Paperspace's error answer: {"code", "message", "details"}."""
    message = message_of(payload, ("message",), ("error",))
    lowered = message.lower()
    if "capacity" in lowered or "out of stock" in lowered or "no machines available" in lowered:
        return message, "capacity"
    if "quota" in lowered or re.search(r"\b(machine|instance|gpu|account|spend|resource) limit\b", lowered):
        return message, "quota"
    if status == 409:  # "This machine is currently starting.": not now, in its state
        return message, "conflict"
    return message, "error"


def gpu_count(machine_type):
    """GPUs of a machine type by its name, for a machine that reports no accelerators: ``A100-80Gx8``
    has 8, ``A6000`` 1, a CPU type (``C5``) none."""
    if not machine_type or CPU_TYPES.match(machine_type):
        return 0
    match = re.search(r"x(\d{1,4})\Z", machine_type)
    return int(match.group(1)) if match else 1


def gpu_name(machine_type):
    """The GPU of a machine type by its name: ``A100-80Gx8`` is an A100-80G machine with 8."""
    return re.sub(r"x\d{1,4}\Z", "", machine_type)


def accelerators(data):
    """(GPU count, GPU name) from a machine's ``accelerators``; None when it reports none (absent or null)."""
    items = data.get("accelerators")
    if not isinstance(items, list):
        return None
    items = [a for a in items if isinstance(a, dict) and isinstance(a.get("count"), int) and a["count"] > 0]
    return sum(a["count"] for a in items), " + ".join(str(a.get("name") or "") for a in items)


def normalize(data, prices=None):
    """One machine of GET /machines in meshctl's shape."""
    if not isinstance(data, dict):
        raise CloudError("paperspace answered a machine that is not an object", kind="bad-answer")
    kind = str(data.get("machineType") or "")
    reported = accelerators(data)
    gpus, gpu_type = reported if reported is not None else (gpu_count(kind), kind)
    return instance(
        NAME,
        data.get("id"),
        data.get("name") or "",
        STATUS.get(str(data.get("state")), "unknown"),
        data.get("state"),
        ssh_host=data.get("publicIp"),
        ssh_port=22,
        ssh_user=CAPABILITIES.ssh_user,
        gpus=gpus,
        gpu_type=gpu_type or kind,
        price_per_hour=(prices or {}).get(kind),
    )


class Client:
    name = NAME
    capabilities = CAPABILITIES

    def __init__(self, key, http=None, environ=None, prices=None):
        self.http = http or Http(NAME, api_url(NAME, CAPABILITIES.default_url, environ), key, describe,
                                 min_interval=0.2)  # fmt: skip
        self.prices = prices if isinstance(prices, dict) else {}

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

    def launch(self, request):
        """Create a machine of ``type`` in ``region`` from the OS template ``template_id``; returns its id."""
        if not request.get("region") or not request.get("template_id"):
            raise CloudError("a Paperspace launch needs a region and an OS template",
                             hint="pass --region (ny2, ams1 ...) and --template-id (an OS template's id)",
                             kind="invalid")  # fmt: skip
        if not self.available(request["type"], request["region"]):  # asked first: a create would fail so
            raise CloudError(f"paperspace has no {request['type']} free in {request['region']} now "
                             "(GET /machine-availability)", hint="try another type or region, or later",
                             kind="capacity")  # fmt: skip
        body = {"name": request["name"], "machineType": request["type"], "region": request["region"],
                "templateId": request["template_id"], "diskSize": int(request.get("volume_gb") or 100),
                "publicIpType": "dynamic", "startOnCreate": True,
                # Paperspace mails the machine's password by default: nobody logs in with it here.
                "emailPassword": False}  # fmt: skip
        answer = self.http.request("POST", "/machines", body)
        data = answer.get("data", answer) if isinstance(answer, dict) else None
        return normalize(data, self.prices)["id"]

    def available(self, kind, region):
        """Whether a machine of KIND can be created in REGION now (GET /machine-availability)."""
        answer = self.http.request("GET", "/machine-availability", query={"machineType": kind, "region": region})
        found = answer.get("available") if isinstance(answer, dict) else None
        if not isinstance(found, bool):
            raise CloudError(
                "paperspace answered GET /machine-availability without a plain available", kind="bad-answer"
            )
        return found

    def stop(self, instance_id):
        self.http.request("PATCH", f"/machines/{instance_id}/stop", {})

    def start(self, instance_id):
        """Start a stopped machine. A 409 ("This machine is currently starting.") is no failure when
        the machine is on its way or up (asked again: Paperspace says the state, not which state)."""
        try:
            self.http.request("PATCH", f"/machines/{instance_id}/start", {})
        except CloudError as exc:
            if exc.kind != "conflict" or self.get(instance_id)["status"] not in ("starting", "running"):
                raise

    def terminate(self, instance_id):
        self.http.request("DELETE", f"/machines/{instance_id}")

    def offers(self, count=None):
        """The GPU machine types the mesh prices (``paperspace_prices``: the API lists no types or
        prices), each in the datacenters that have one now (one GET /machine-availability per type
        and region); a type it does not price is never offered."""
        found = []
        for kind, price in sorted(self.prices.items()):
            if not isinstance(kind, str) or not TYPE_RE.fullmatch(kind) or not gpu_count(kind):
                continue
            regions = [region for region in REGIONS if self.available(kind, region)]
            made = offer(NAME, kind, gpu_name(kind), gpu_count(kind), price, regions, bool(regions))
            if made:
                found.append(made)
        return found

    def register_key(self, key_name, public_key):
        raise CloudError("paperspace takes a machine's keys from its OS template, not from meshctl",
                         kind="unsupported")  # fmt: skip
