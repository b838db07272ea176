"""TEST DOUBLE: stand-ins for the Lambda, Runpod and Paperspace APIs meshctl calls.

One local HTTP server per provider, answering the documented endpoints meshctl uses with the
documented response shapes (Lambda Cloud API v1, Runpod REST API v2, Paperspace API v1), over a
``Backend`` of instances: in memory for unit tests, or Docker nodes of the local mesh (launch =
a new container, stop = docker stop, terminate = docker rm) for end-to-end tests. What it answers
and what it accepts follow the schema files written from each provider's document
(tests/schemas/<provider>.json, checked by tests/api_schemas.py): a request that does not match
is refused as the provider refuses it (Runpod: 422 problem), every field the document requires
is answered, lists are paged where the API pages them (Paperspace), errors have the documented
shapes (Runpod: RFC 9457 problems). The quirks the real services have are reproduced: Lambda has
no stop; a Runpod pod's SSH port changes when it starts again and its container disk is wiped;
an action a pod's status does not allow is a 409; 429s on demand, with Runpod's RateLimit and
Retry-After headers; launches with no capacity; a create that fails with a 5xx though it made
the instance (``fail_create_after``); a machine taken away from outside meshctl, as each provider
does it, or one that silently stops answering (``take_away``).

Never used by meshctl itself: tests point it here with MESHCTL_<PROVIDER>_API_URL.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests import api_schemas

PROVIDERS = ("lambda", "runpod", "paperspace")
KEY = "standin-key-0123456789"  # the one key each stand-in accepts
# How each provider takes a machine away from outside meshctl (its document's status words).
TAKEN_AWAY = {"lambda": "preempted", "runpod": "terminated", "paperspace": "stopped"}
# Seconds a terminated machine's `docker rm -f -v` may take (in the background), and a test waits
# for it: under the suite's load on two cores one took over 120 s (2026-12-03).
REMOVAL_TIMEOUT = 600


@dataclass
class Machine:
    id: str
    name: str
    kind: str  # Lambda instance type, Runpod GPU type id, Paperspace machine type
    gpus: int
    price: float
    state: str = "running"  # running, stopped, booting, terminated
    ip: str = "100.100.60.10"
    port: int = 22
    disk: dict = field(default_factory=dict)  # a Runpod pod's container disk: wiped on stop
    args: str = ""  # a Runpod pod's args (its start command; "": the image's)
    env: dict = field(default_factory=dict)  # a Runpod pod's environment (PUBLIC_KEY: the key its image authorizes)
    region: str = "us-east-1"  # a Lambda instance's region (a Paperspace machine's too)
    template: str = ""  # a Paperspace machine's OS template (its keys are the template's)
    keys: list = field(default_factory=list)  # a Lambda instance's SSH key names, and the public keys they name
    public_keys: list = field(default_factory=list)
    cloud: str = "SECURE"  # a Runpod pod's cloud
    # A Runpod pod's volume: host-bound (`persistent`, the default) or a network volume (`network`).
    mounts: dict = field(default_factory=lambda: {"persistent": {"size": 20, "path": "/workspace"}})
    data_center: str = "US-KS-2"  # a Runpod pod's data centre
    per_gpu: tuple = (16, 62)  # a Runpod pod's vCPUs and GB of RAM per GPU (a filter above places nothing)
    hostname: str = ""  # a Lambda instance's hostname, as its launch gave it ("": an address-based one)
    # A stopped Runpod pod whose host's GPUs were rented meanwhile (the Zero GPU Pods page): its start
    # is refused ("refuse") or gives it none ("zero": running, answered without `gpu`).
    host_full: str = ""
    without_gpus: bool = False
    silent: bool = False  # taken away without a word: it runs at the provider, and answers nothing

    @property
    def start_cmd(self) -> list[str]:
        """A pod's start command as words ([]: the image's own)."""
        return shlex.split(self.args)


class MemoryBackend:
    """Instances as records: what the APIs answer, without machines behind them."""

    def __init__(self):
        self.machines: dict[str, Machine] = {}
        self._ids = itertools.count(1)
        self._ports = itertools.count(10022)
        self.capacity = 100  # launches left before "no capacity"
        self.refusal = "Machine type is out of capacity in this region"  # Paperspace's words for it

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):04d}"

    def launch(self, prefix: str, name: str, kind: str, gpus: int, price: float) -> Machine:
        machine = Machine(self.new_id(prefix), name, kind, gpus, price, ip=f"100.100.60.{10 + len(self.machines)}")
        self.machines[machine.id] = machine
        return machine

    def stop(self, machine: Machine) -> None:
        machine.state = "stopped"

    def start(self, machine: Machine, new_port: bool = False) -> None:
        machine.state = "running"
        if new_port:
            machine.port = next(self._ports)

    def terminate(self, machine: Machine) -> None:
        machine.state = "terminated"

    def reset(self, machine: Machine) -> None:
        """A running Runpod pod updated (PATCH): its container is made anew (disk wiped), running."""
        machine.disk.clear()

    def created(self, machine: Machine) -> None:
        """A launch the API accepted, with its settings (env) filled in: nothing more in memory."""

    def take_away(self, machine: Machine, state: str) -> None:
        """The provider took MACHINE away (STATE: its status now), or it stopped answering ("silent":
        still running at the provider)."""
        machine.silent = state == "silent"
        if state != "silent":
            machine.state = state


class DockerFailed(Exception):
    """A docker command of the stand-in's that failed, with what docker said."""

    def __init__(self, returncode: int, command: list[str], stdout: str, stderr: str):
        super().__init__(f"{' '.join(command)} exited {returncode}: {stderr or stdout}")
        self.returncode, self.command, self.stdout, self.stderr = returncode, command, stdout, stderr


class DockerBackend(MemoryBackend):
    """Instances that are Docker nodes of the local mesh: stop is `docker stop`, start `docker
    start` (the container keeps its disk and address, as a Paperspace machine does), terminate
    `docker rm -f`. ``attach(container, ...)`` makes an existing node one of the instances;
    ``create(machine)``, given by a test that launches, makes a launched instance's container (a
    new machine: a Lambda launch) and returns its name."""

    def __init__(self, create=None):
        super().__init__()
        self.containers: dict[str, str] = {}  # instance id -> container name
        self.create = create
        self._removals: list[threading.Thread] = []
        self._removal_errors: list[str] = []

    def created(self, machine: Machine) -> None:
        if self.create is not None:
            self.settle()  # a new machine never meets one still being removed
            self.containers[machine.id] = self.create(machine)

    def _remove_later(self, container: str) -> None:
        """A terminate as the providers answer it: at once, the machine going after (Lambda's
        terminate lists it `terminating`, Runpod's DELETE answers before the pod is gone). A `docker
        rm -f` of a busy node took more than the clients' 30 s under the suite's load, and the API
        answered after its client had given up."""

        def remove() -> None:
            try:  # in the background: a removal under the suite's load took over 120 s
                self._docker("rm", "-f", "-v", container, timeout=REMOVAL_TIMEOUT)
            except Exception as exc:  # said by settle(), in the test's thread
                self._removal_errors.append(f"docker rm {container}: {exc}")

        thread = threading.Thread(target=remove, name=f"terminate {container}", daemon=True)
        thread.start()
        self._removals.append(thread)

    def settle(self, timeout: float = REMOVAL_TIMEOUT) -> None:
        """Wait until the machines terminated so far are gone (their containers removed): before a
        test looks for what is left, and before a new machine is made."""
        for thread in self._removals:
            thread.join(timeout)
        self._removals = [t for t in self._removals if t.is_alive()]
        errors, self._removal_errors = self._removal_errors, []
        assert not self._removals and not errors, (
            [t.name for t in self._removals], errors)  # fmt: skip

    def attach(self, container: str, prefix: str, name: str, kind: str, gpus: int, price: float, ip: str) -> Machine:
        machine = Machine(self.new_id(prefix), name, kind, gpus, price, ip=ip)
        self.machines[machine.id] = machine
        self.containers[machine.id] = container
        return machine

    def _docker(self, *args: str, timeout: float = 120) -> None:
        import subprocess

        done = subprocess.run(["docker", *args], capture_output=True, text=True, check=False, timeout=timeout)
        if done.returncode != 0:
            raise DockerFailed(done.returncode, ["docker", *args], done.stdout, done.stderr.strip())

    def _pause(self, container: str, attempts: int = 5) -> None:
        """Pause CONTAINER. The kernel's freezer cannot freeze a process in the middle of some calls
        (runc then says "unable to freeze" and thaws the container again: seen once under the suite's
        load, 2026-12-04); a VM that stops answering has no such refusal, so the pause is asked again."""
        import time

        for attempt in range(attempts):
            try:
                return self._docker("pause", container)
            except DockerFailed as error:
                if "unable to freeze" not in (error.stderr or "") or attempt == attempts - 1:
                    raise
                time.sleep(2)

    def stop(self, machine: Machine) -> None:
        self._docker("stop", "-t", "5", self.containers[machine.id])
        super().stop(machine)

    def start(self, machine: Machine, new_port: bool = False) -> None:
        self._docker("start", self.containers[machine.id])
        super().start(machine, new_port)

    def take_away(self, machine: Machine, state: str) -> None:
        """As the provider takes it: a preempted or terminated machine's container is gone, a stopped
        one stopped; a silent one paused (no answer, no SSH, still running)."""
        container = self.containers[machine.id]
        if state == "silent":
            self._pause(container)
        elif state == "stopped":
            self._docker("stop", "-t", "5", container)
        else:
            self._docker("rm", "-f", "-v", container)
        super().take_away(machine, state)

    def terminate(self, machine: Machine) -> None:
        container = self.containers[machine.id]
        others = [i for i, c in self.containers.items() if c == container and i != machine.id
                  and self.machines[i].state != "terminated"]  # fmt: skip
        if not others and machine.state not in TAKEN_AWAY.values():  # taken away: its container is gone already
            self._remove_later(container)  # (one a newer instance took over, a pod's volume's, stays)
        super().terminate(machine)


class PodBackend(DockerBackend):
    """Runpod pods that are Docker containers. Stop is `docker stop`; a start after a stop, or an
    update of a running pod, makes the container anew from its image (its container disk wiped)
    with the same volume and address, running the pod's start command: ``recreate(machine)``, given
    by the test, which knows how its pod is run (image, network, volume)."""

    def __init__(self, recreate, create=None):
        super().__init__(create)  # create(machine): a launched pod's first container
        self.recreate = recreate

    def start(self, machine: Machine, new_port: bool = False) -> None:
        MemoryBackend.start(self, machine, new_port)  # its new SSH port first: the new container maps it
        self.recreate(machine)

    def reset(self, machine: Machine) -> None:
        super().reset(machine)
        self.recreate(machine)


class Server(ThreadingHTTPServer):
    """Python's server, with a listen backlog a busy test's bursts fit in (socketserver's 5 made a
    client's connect reset under load: a provider's API never does that for a handful of requests)."""

    request_queue_size = 128
    daemon_threads = True


class Standin:
    """One provider's API on <bind>:<port> (127.0.0.1 unless a Docker node must reach it: then the
    network's gateway); ``url`` is its base URL (what MESHCTL_*_API_URL takes)."""

    def __init__(self, provider: str, backend=None, bind: str = "127.0.0.1"):
        assert provider in PROVIDERS
        self.provider = provider
        self.bind = bind
        self.backend = backend or MemoryBackend()
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request, in order
        self.bodies: list[tuple[str, str, object]] = []  # (method, path, JSON body) of every request
        self.answers: list[tuple[str, str, int, object]] = []  # (method, path, status, body) of every answer
        self.fail_next: list[tuple[int, dict, dict]] = []  # (status, body, headers) answered before the real one
        self.fail_create_after: int | None = None  # a create is done, then answered with this 5xx
        # Creates refused for one offer: (the body's fields that pick it, status, answer), each used once.
        self.refuse_create: list[tuple[dict, int, object]] = []
        # Lambda: "one request per 12 seconds" for launches, the account's (0: not enforced here, for
        # tests whose clients pace on a fake clock); clock() is the stand-in's time, settable with it.
        self.launch_spacing = 0.0
        self.clock = time.time
        self.launched_at: float | None = None
        self.emailed: list[bool] = []  # Paperspace: each create's emailPassword (mailed unless false)
        self.patched_running: list[str] = []  # Runpod: pods edited while they ran (each such edit resets one)
        self.page_size = 2  # Paperspace: the most machines one page holds here (its limit is honoured below it)
        self.rate_limit: str | None = None  # Runpod: the RateLimit header of every answer (None: not sent)
        # What can be rented: Lambda's instance types (regions with capacity), Runpod's GPU catalog.
        self.instance_types = {
            "gpu_1x_a10": ("NVIDIA A10 (24 GB PCIe)", 1, 75, ["us-east-1", "us-west-1"]),
            "gpu_8x_h100_sxm5": ("NVIDIA H100 (80 GB SXM5)", 8, 2392, ["us-south-2"]),
            "gpu_1x_h100_pcie": ("NVIDIA H100 (80 GB PCIe)", 1, 249, []),
        }
        self.gpu_types = [  # id, name, $/h secure, $/h community, max secure, max community, availability
            ("NVIDIA RTX A5000", "RTX A5000", 0.27, 0.16, 8, 4, "HIGH"),
            ("NVIDIA H100 80GB HBM3", "H100 SXM", 2.69, 0.0, 8, 0, "LOW"),
            ("NVIDIA A100 80GB PCIe", "A100 PCIe", 1.64, 1.19, 8, 8, "NONE"),
        ]
        # Paperspace: where a machine type can be had now, type -> regions (a type not named: anywhere
        # while the backend has capacity), as GET /machine-availability answers for one type and region.
        self.availability: dict[str, set[str]] = {}
        # Runpod: GPUs of a type free now in a cloud, (id, cloud) -> count; its ceiling when not said.
        self.stock: dict[tuple[str, str], int] = {}
        # Runpod: the account's network volumes, id -> NetworkVolume (add_volume); each bills by its size.
        self.network_volumes: dict[str, dict] = {}
        self.ssh_keys: dict[str, str] = {"meshctl": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBgx6l3standin meshctl"}
        self.lock = threading.Lock()
        self.server = Server((bind, 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.bind}:{self.server.server_port}{api_schemas.load(self.provider)['base']}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def add(self, name: str, kind: str, gpus: int, price: float, state: str = "running") -> Machine:
        prefix = {"lambda": "0920582c7ff041399e34823a0be", "runpod": "pod", "paperspace": "ps"}[self.provider]
        machine = self.backend.launch(prefix, name, kind, gpus, price)
        machine.state = state
        return machine

    def take_away(self, machine: Machine, silent: bool = False) -> None:
        """The provider takes MACHINE away, as it does: Lambda preempts an instance (listed
        ``preempted``, its VM gone), Runpod terminates a pod (a zero balance, a community host gone:
        no longer listed), a Paperspace machine is stopped from outside (``off``). SILENT: the
        machine stops answering and still runs at the provider (its container paused)."""
        with self.lock:
            self.backend.take_away(machine, "silent" if silent else TAKEN_AWAY[self.provider])

    def add_volume(self, volume_id: str, data_center: str, size: int = 20, tier: str = "STANDARD") -> dict:
        """A Runpod network volume of the account (the console's New Network Volume)."""
        made = {"id": volume_id, "name": f"volume-{volume_id}", "size": size, "dataCenter": data_center, "type": tier}
        self.network_volumes[volume_id] = made
        return made

    def refuse(self, match: dict, why: str) -> None:
        """Refuse the next create whose body has MATCH's fields: ``capacity`` (no machine free, in the
        provider's words) or ``pool`` (Runpod's 403: the account may not rent what was asked)."""
        if why == "pool":
            answer = (403, self._error(403, "create pod: forbidden", code="FORBIDDEN"))
        else:
            answer = {
                "lambda": (400, {"error": {"code": "instance-operations/launch/insufficient-capacity",
                                           "message": "Not enough capacity to fulfill launch request."}}),
                "runpod": (400, self._error(400, "create pod: There are no longer any instances available with "
                                            "the requested specifications. Please refresh and try again.")),
                "paperspace": (400, {"code": "BAD_REQUEST", "message": self.backend.refusal}),
            }[self.provider]  # fmt: skip
        self.refuse_create.append((match, *answer))

    def refusal_for(self, method: str, path: str, body) -> tuple[int, object] | None:
        creates = {"lambda": "/instance-operations/launch", "runpod": "/v2/pods", "paperspace": "/machines"}
        if method != "POST" or not path.split("?")[0].endswith(creates[self.provider]):
            return None
        for index, (match, status, answer) in enumerate(self.refuse_create):
            if isinstance(body, dict) and all(body.get(k) == v for k, v in match.items()):
                del self.refuse_create[index]
                return status, answer
        return None

    def throttle(self, times: int = 1, retry_after: str = "0") -> None:
        """The next TIMES requests get 429 Too Many Requests."""
        body = {
            "lambda": {"error": {"code": "global/too-many-requests", "message": "Too many requests"}},
            "runpod": self._error(429, "rate limit exceeded for the minute window"),
            "paperspace": {"code": "TOO_MANY_REQUESTS", "message": "Rate limit exceeded"},
        }[self.provider]
        headers = {"Retry-After": retry_after}
        if self.provider == "runpod":
            headers["RateLimit"] = f'"minute";r=0;t={retry_after}, "hour";r=2800;t=1812'
            headers["RateLimit-Policy"] = '"minute";q=60;w=60, "hour";q=3000;w=3600'
        self.fail_next += [(429, body, headers)] * times

    # --- rendering, in each API's documented shape -------------------------------------------

    def render(self, m: Machine) -> dict:
        if self.provider == "lambda":
            status = {"running": "active", "booting": "booting", "terminated": "terminated"}.get(m.state, m.state)
            return {
                "id": m.id, "name": m.name, "ip": m.ip, "private_ip": "10.19.0.2", "status": status,
                "ssh_key_names": list(m.keys or ["meshctl"]), "file_system_names": [],
                "hostname": m.hostname or m.ip.replace(".", "-"),
                "region": {"name": m.region, "description": "Virginia, USA"},
                "instance_type": {"name": m.kind, "description": f"{m.gpus}x {m.kind}",
                                  "gpu_description": m.kind.removeprefix("gpu_").split("_", 1)[-1].upper(),
                                  "price_cents_per_hour": round(m.price * 100),
                                  "specs": {"vcpus": 30, "memory_gib": 200, "storage_gib": 1400, "gpus": m.gpus}},
                "jupyter_token": "x", "jupyter_url": "https://jupyter.example", "tags": [],
                "actions": {action: {"available": True} if status == "active" or action == "terminate" else
                            {"available": False, "reason_code": "vm-has-not-launched"}
                            for action in ("migrate", "rebuild", "restart", "cold_reboot", "terminate")},
            }  # fmt: skip
        if self.provider == "runpod":
            status = {"running": "RUNNING", "stopped": "EXITED", "booting": "STARTING", "error": "ERROR",
                      "terminated": "TERMINATED"}.get(m.state, "RUNNING")  # fmt: skip
            actions = {"RUNNING": ["stop", "restart", "terminate"], "EXITED": ["start", "terminate"],
                       "ERROR": ["start", "terminate"], "STARTING": ["stop", "terminate"],
                       "TERMINATED": []}[status]  # fmt: skip
            words = shlex.split(m.args) if m.args and not m.args.lstrip().startswith("{") else []
            form = json.loads(m.args) if m.args.lstrip().startswith("{") else {}
            running = m.state == "running"
            direct = {"host": m.ip, "port": m.port, "username": "root", "command": f"ssh root@{m.ip} -p {m.port}"}
            return {
                "id": m.id, "name": m.name, "status": status, "actions": actions,
                "image": "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404", "args": m.args, "disk": 50,
                "entrypoint": form.get("entrypoint", []), "cmd": form.get("cmd", words),
                "mounts": m.mounts, "ports": ["22/tcp"],
                "env": {k: v for k, v in m.env.items() if k != "PUBLIC_KEY"}, "registry": None,
                "cloud": m.cloud, "dataCenterId": m.data_center,
                "cudaVersion": "12.8",
                "ssh": {"proxy": {"host": "ssh.runpod.io", "port": 22, "username": f"{m.id}-64411eb2",
                                  "command": f"ssh {m.id}-64411eb2@ssh.runpod.io"},
                        "direct": direct if running else None},
                "template": None, "cost": m.price if running else 0.0, "locked": False,
                "globalNetworking": {"enabled": False},
                "runtime": {"uptime": 60, "ports": [{"private": 22, "public": m.port, "type": "tcp", "ip": m.ip}]}
                if running else None,
                "createdAt": "2026-11-24T10:00:00Z", "startedAt": "2026-11-24T10:02:00Z" if running else None,
            } | ({} if running and m.without_gpus else {"gpu": {"id": m.kind, "count": m.gpus,
                                                                   "vcpuCount": m.per_gpu[0] * m.gpus,
                                                                   "memory": m.per_gpu[1] * m.gpus}})  # fmt: skip
        state = {"running": "ready", "stopped": "off", "booting": "starting", "terminated": "off"}.get(m.state, m.state)
        return {
            "id": m.id, "name": m.name, "state": state, "machineType": m.kind, "os": "Ubuntu 22.04",
            "agentType": "LinuxMachine", "publicIp": m.ip, "publicIpType": "dynamic", "privateIp": "10.64.0.2",
            "networkId": None, "region": "ny2", "cpus": 8, "ram": 48 * 2**30, "storageTotal": 100 * 2**30,
            "storageUsed": 12 * 2**30, "storageRate": 7, "usageRate": 0.76, "updatesPending": False,
            "accelerators": [{"name": m.kind, "count": m.gpus, "memory": 16}] if m.gpus else None,
            "autoShutdownEnabled": False, "dtCreated": "2026-11-24T10:00:00Z",
        }  # fmt: skip

    # --- the HTTP side ------------------------------------------------------------------------

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, body, headers: dict | None = None):
                raw = json.dumps(body).encode() if body is not None else b""
                problem = standin.provider == "runpod" and status >= 400
                self.send_response(status)
                self.send_header("Content-Type", "application/problem+json" if problem else "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self, method: str):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                with standin.lock:
                    standin.requests.append((method, self.path))
                    standin.bodies.append((method, self.path, body))
                    if standin.provider == "runpod" and len(raw) > 102400:  # before authentication
                        return self._reply(method, 413, standin._error(413, "request body too large"))
                    if self.headers.get("Authorization") != f"Bearer {KEY}":
                        return self._reply(method, 401, standin._unauthorized())
                    if standin.fail_next:
                        status, payload, headers = standin.fail_next.pop(0)
                        return self._reply(method, status, payload, headers)
                    if raw and self.headers.get("Content-Type") != "application/json":
                        return self._reply(method, 415, standin._error(415, "the body must be application/json"))
                    wrong = api_schemas.request_problems(standin.provider, method, self.path, body)
                    if wrong:
                        return self._reply(method, 422 if standin.provider == "runpod" else 400,
                                           standin._error(422 if standin.provider == "runpod" else 400,
                                                          "the request does not match", wrong))  # fmt: skip
                    refused = standin.refusal_for(method, self.path, body)
                    if refused is not None:
                        return self._reply(method, *refused)
                    status, payload = standin.route(method, self.path, body or {})
                    headers = {"RateLimit": standin.rate_limit} if standin.rate_limit else {}
                return self._reply(method, status, payload, headers)

            def _reply(self, method: str, status: int, payload, headers: dict | None = None):
                standin.answers.append((method, self.path, status, payload))
                return self._answer(status, payload, headers)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

            def do_DELETE(self):
                self._handle("DELETE")

        return Handler

    def _error(self, status: int, message: str, errors: list[str] | None = None, code: str = "") -> dict:
        """An error answer in the provider's documented shape."""
        if self.provider == "runpod":
            titles = {400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
                      404: "Not Found", 409: "Conflict", 415: "Unsupported Media Type", 422: "Unprocessable Entity",
                      413: "Payload Too Large", 429: "Too Many Requests", 500: "Internal Server Error",
                      502: "Bad Gateway"}  # fmt: skip
            problem = {"title": titles.get(status, "Error"), "status": status, "detail": message}
            return {**problem, "errors": errors} if errors else problem
        if self.provider == "lambda":
            return {"error": {"code": code or "global/invalid-parameters", "message": message}}
        return {"code": code or "BAD_REQUEST", "message": message}

    def _unauthorized(self) -> dict:
        if self.provider == "lambda":
            return {"error": {"code": "global/invalid-api-key", "message": "API key was invalid, expired, or deleted.",
                              "suggestion": "Check your API key or create a new one"}}  # fmt: skip
        return self._error(401, "invalid api key", code="UNAUTHORIZED")

    def _not_found(self, what: str) -> tuple[int, dict]:
        return 404, self._error(404, f"{what} not found", code="global/object-does-not-exist"
                                if self.provider == "lambda" else "NOT_FOUND")  # fmt: skip

    def _live(self) -> list[Machine]:
        return [m for m in self.backend.machines.values() if m.state != "terminated"]

    def route(self, method: str, path: str, body) -> tuple[int, object]:
        from urllib.parse import parse_qsl

        path, _, query = path.partition("?")
        if self.provider == "paperspace":
            return self._route_paperspace(method, path, body or {}, dict(parse_qsl(query)))
        if self.provider == "runpod":
            return self._route_runpod(method, path, body or {}, dict(parse_qsl(query)))
        return getattr(self, f"_route_{self.provider}")(method, path, body or {})

    def _route_lambda(self, method, path, body):
        if path == "/api/v1/instances" and method == "GET":
            return 200, {"data": [self.render(m) for m in self._live()]}
        if (m := re.fullmatch(r"/api/v1/instances/([\w-]+)", path)) and method == "GET":
            machine = self.backend.machines.get(m.group(1))
            return (200, {"data": self.render(machine)}) if machine else self._not_found("Instance")
        if path == "/api/v1/instance-operations/launch" and method == "POST":
            now = self.clock()
            if self.launched_at is not None and now - self.launched_at < self.launch_spacing:
                self.launched_at = now  # a refused request counts against the limit too
                return 429, {"error": {"code": "global/too-many-requests", "message": "Too many requests"}}
            self.launched_at = now
            if self.backend.capacity <= 0:
                return 400, {"error": {"code": "instance-operations/launch/insufficient-capacity",
                                       "message": "Not enough capacity to fulfill launch request.",
                                       "suggestion": "Choose an instance type with more availability, or try "
                                       "again later."}}  # fmt: skip
            names = body.get("ssh_key_names")
            if not isinstance(names, list) or len(names) != 1 or names[0] not in self.ssh_keys:
                return 400, {"error": {"code": "global/invalid-parameters", "message": "Exactly one SSH key, "
                                       "registered in this account, must be specified."}}  # fmt: skip
            self.backend.capacity -= 1
            kind = body.get("instance_type_name", "gpu_1x_a10")
            # The instance bills its type's price (GET /instances: instance_type.price_cents_per_hour).
            cents = self.instance_types[kind][2] if kind in self.instance_types else 129
            machine = self.add(body.get("name") or "", kind, int(re.search(r"_(\d+)x_", kind).group(1)), cents / 100)
            machine.region, machine.keys = body.get("region_name") or "us-east-1", list(names)
            machine.hostname = body.get("hostname") or ""
            machine.public_keys = [self.ssh_keys[n] for n in names]
            self.backend.created(machine)
            return 200, {"data": {"instance_ids": [machine.id]}}
        if path == "/api/v1/instance-types" and method == "GET":
            return 200, {"data": {
                name: {"instance_type": {"name": name, "description": f"{gpus}x {gpu}", "gpu_description": gpu,
                                         "price_cents_per_hour": cents,
                                         "specs": {"vcpus": 30 * gpus, "memory_gib": 200 * gpus,
                                                   "storage_gib": 1400, "gpus": gpus}},
                       "regions_with_capacity_available": [{"name": r, "description": r} for r in regions]}
                for name, (gpu, gpus, cents, regions) in self.instance_types.items()}}  # fmt: skip
        if path == "/api/v1/ssh-keys" and method == "GET":
            return 200, {"data": [{"id": f"key{i}", "name": name, "public_key": key}
                                  for i, (name, key) in enumerate(sorted(self.ssh_keys.items()))]}  # fmt: skip
        if path == "/api/v1/ssh-keys" and method == "POST":
            name, key = body.get("name"), body.get("public_key")
            if not isinstance(name, str) or not name or name in self.ssh_keys or not isinstance(key, str):
                return 400, {"error": {"code": "global/invalid-parameters", "message": "SSH key name already in use "
                                       "or public key missing"}}  # fmt: skip
            self.ssh_keys[name] = key.strip()
            return 200, {"data": {"id": f"key{len(self.ssh_keys)}", "name": name, "public_key": key.strip()}}
        if path == "/api/v1/instance-operations/terminate" and method == "POST":
            done = []
            for instance_id in body.get("instance_ids", []):
                machine = self.backend.machines.get(instance_id)
                if machine is None:
                    return self._not_found("Instance")
                self.backend.terminate(machine)
                done.append(self.render(machine))
            return 200, {"data": {"terminated_instances": done}}
        return 404, {"error": {"code": "global/not-found", "message": f"no route {method} {path}"}}  # no stop

    def _route_runpod(self, method, path, body, query=None):
        query = query or {}
        if path == "/v2/pods" and method == "GET":
            return 200, {"pods": [self.render(m) for m in self._live()]}
        if path == "/v2/catalog/gpus" and method == "GET":
            gpus = []
            # Availability for the cloud and GPU count asked (Secure Cloud's, for one GPU, unless
            # both are): none beyond the cloud's ceiling, none in a cloud that does not offer it.
            cloud, count = query.get("cloud", "SECURE"), int(query.get("count", "1"))
            for gpu_id, name, secure, community, most_secure, most_community, stock in self.gpu_types:
                price, most = (secure, most_secure) if cloud == "SECURE" else (community, most_community)
                free = self.stock.get((gpu_id, cloud), most)
                availability = stock if price > 0 and count <= min(most, free) else "NONE"
                item = {"id": gpu_id, "name": name, "pool": None, "manufacturer": "NVIDIA", "memory": 80,
                        "secure": secure > 0, "community": community > 0,
                        "price": {"secure": secure, "community": community},
                        "maxCount": {"secure": most_secure, "community": most_community},
                        "availability": availability}  # fmt: skip
                if availability != "NONE":
                    item["dataCenters"] = [{"id": "US-KS-2", "name": "US Kansas 2", "availability": availability}]
                gpus.append(item)
            return 200, {"gpus": gpus}
        if path == "/v2/pods" and method == "POST":
            gpu = body["gpu"]
            # What a host here has per GPU: a placement filter above it places nothing.
            host = Machine.__dataclass_fields__["per_gpu"].default
            if gpu.get("minVcpuCountPerGpu", 0) > host[0] or gpu.get("minRamPerGpu", 0) > host[1]:
                return 400, self._error(400, "create pod: There are no longer any instances available with the "
                                        "requested specifications. Please refresh and try again.")  # fmt: skip
            if self.backend.capacity <= 0:
                return 400, self._error(400, "create pod: There are no longer any instances available with the "
                                        "requested specifications. Please refresh and try again.")  # fmt: skip
            network = (body.get("mounts") or {}).get("network") or []
            for mount in network:  # "an existing NetworkVolume in the same data center as the pod"
                centre = self.network_volumes.get(mount["volumeId"], {}).get("dataCenter")
                if centre is None or centre not in (body.get("dataCenterIds") or [centre]):
                    return 400, self._error(400, f"create pod: network volume {mount['volumeId']} is not in the "
                                            "data centers asked for")  # fmt: skip
            self.backend.capacity -= 1
            price = next((g[2] if body.get("cloud", "SECURE") == "SECURE" else g[3] for g in self.gpu_types
                          if g[0] == gpu["id"]), 0.27)  # fmt: skip
            machine = self.add(body["name"], gpu["id"], int(gpu.get("count", 1)), price * int(gpu.get("count", 1)))
            machine.env, machine.cloud = dict(body.get("env") or {}), body.get("cloud", "SECURE")
            machine.args = body.get("args", "")
            if body.get("mounts"):
                machine.mounts = body["mounts"]
            machine.data_center = (body.get("dataCenterIds") or ["US-KS-2"])[0]
            self.backend.created(machine)
            if self.fail_create_after:  # the pod exists and bills; the answer says it failed
                return self.fail_create_after, self._error(self.fail_create_after, "upstream request failed")
            return 201, self.render(machine)
        if path == "/v2/network-volumes" and method == "GET":
            return 200, {"networkVolumes": list(self.network_volumes.values())}
        if (v := re.fullmatch(r"/v2/network-volumes/([\w-]+)", path)) and method == "DELETE":
            if self.network_volumes.pop(v.group(1), None) is None:
                return self._not_found("network volume")
            return 204, None
        m = re.fullmatch(r"/v2/pods/([\w-]+)(/action)?", path)
        machine = self.backend.machines.get(m.group(1)) if m else None
        if machine is None or machine.state == "terminated":
            return self._not_found("pod")
        if method == "GET" and not m.group(2):
            return 200, self.render(machine)
        if method == "PATCH" and not m.group(2):  # only the fields in the body change
            if machine.state == "running":
                self.patched_running.append(machine.id)  # "Editing a running Pod resets it completely"
            if "args" in body:
                changed, machine.args = body["args"] != machine.args, body["args"]
                if changed and machine.state == "running":  # a new start command: the container is made anew
                    self.backend.reset(machine)
            if "name" in body:
                machine.name = body["name"]
            return 200, self.render(machine)
        if method == "POST" and m.group(2):
            action = body["action"]
            if action not in self.render(machine)["actions"]:
                return 409, self._error(409, f"cannot {action} a pod that is {self.render(machine)['status']}")
            if action == "stop":
                machine.disk.clear()  # the container disk is wiped; the volume (/workspace) is kept
                self.backend.stop(machine)
            elif action == "start":
                if self.backend.capacity <= 0 or machine.host_full == "refuse":
                    return 400, self._error(400, "There are not enough free GPUs on the host machine to start this "
                                            "pod.")  # fmt: skip
                machine.without_gpus = machine.host_full == "zero"
                self.backend.start(machine, new_port=True)  # a pod's SSH port changes when it starts again
            elif action == "terminate":
                self.backend.terminate(machine)
                return 204, None
            return 200, self.render(machine)
        if method == "DELETE" and not m.group(2):
            self.backend.terminate(machine)
            return 204, None
        return 404, self._error(404, f"no route {method} {path}")

    def _route_paperspace(self, method, path, body, query=None):
        if path == "/v1/machine-availability" and method == "GET":
            if not (query or {}).get("machineType") or not (query or {}).get("region"):
                return 400, {"code": "BAD_REQUEST", "message": "machineType and region are required"}
            kind, region = query["machineType"], query["region"]
            free = region in self.availability[kind] if kind in self.availability else True
            return 200, {"available": self.backend.capacity > 0 and free}
        if path == "/v1/machines" and method == "GET":
            live = self._live()
            size = min(self.page_size, int((query or {}).get("limit", 120)))
            start = next((i + 1 for i, m in enumerate(live) if m.id == (query or {}).get("after")), 0)
            page = live[start : start + size]
            more = start + size < len(live)
            return 200, {"hasMore": more, "nextPage": page[-1].id if more else None,
                         "items": [self.render(m) for m in page]}  # fmt: skip
        if path == "/v1/machines" and method == "POST":
            self.emailed.append(body.get("emailPassword", True))  # the document's default: mailed
            kind, region = body.get("machineType", "A4000"), body.get("region")
            if self.backend.capacity <= 0 or region not in self.availability.get(kind, {region}):
                return 400, {"code": "BAD_REQUEST", "message": "Machine type is out of capacity in this region"}
            self.backend.capacity -= 1
            gpus = int(m.group(1)) if (m := re.search(r"x(\d+)\Z", kind)) else 0 if re.match(r"C\d", kind) else 1
            machine = self.add(body.get("name") or "", kind, gpus, 0.76)
            machine.region, machine.template = region, body.get("templateId") or ""
            self.backend.created(machine)
            if self.fail_create_after:
                return self.fail_create_after, self._error(self.fail_create_after, "internal error", code="INTERNAL")
            return 200, {"data": self.render(machine), "event": {"id": "ev1", "name": "create", "state": "new"}}
        m = re.fullmatch(r"/v1/machines/([\w-]+)(/start|/stop)?", path)
        machine = self.backend.machines.get(m.group(1)) if m else None
        if machine is None or machine.state == "terminated":
            return self._not_found("Machine")
        if method == "GET" and not m.group(2):
            return 200, self.render(machine)
        if method == "PATCH" and m.group(2) == "/start" and machine.state == "booting":
            return 409, {"code": "CONFLICT", "message": "This machine is currently starting."}
        if method == "PATCH" and m.group(2) == "/start" and self.backend.capacity <= 0:
            return 400, {"code": "BAD_REQUEST", "message": self.backend.refusal}
        if method == "PATCH" and m.group(2) in ("/start", "/stop"):
            (self.backend.start if m.group(2) == "/start" else self.backend.stop)(machine)
            return 200, {"data": self.render(machine), "event": {"id": "ev2", "name": m.group(2)[1:], "state": "new"}}
        if method == "DELETE" and not m.group(2):
            self.backend.terminate(machine)
            return 200, {"data": self.render(machine), "event": {"id": "ev3", "name": "delete", "state": "new"}}
        return 404, self._error(404, f"no route {method} {path}", code="NOT_FOUND")
