"""TEST DOUBLE: stand-ins for the Lambda, Runpod and Paperspace APIs meshctl calls.

One local HTTP server per provider, answering the documented endpoints meshctl uses with the
documented response shapes (Lambda Cloud API v1, Runpod REST v1, Paperspace API v1), over a
``Backend`` of instances: in memory for unit tests, or Docker nodes of the local mesh (launch =
a new container, stop = docker stop, terminate = docker rm) for end-to-end tests. The quirks the
real services have are reproduced: Lambda has no stop; a Runpod pod's SSH port changes when it
starts again and its container disk is wiped; 429s on demand; launches with no capacity.

Never used by meshctl itself: tests point it here with MESHCTL_<PROVIDER>_API_URL.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROVIDERS = ("lambda", "runpod", "paperspace")
KEY = "standin-key-0123456789"  # the one key each stand-in accepts


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
    start_cmd: list = field(default_factory=list)  # a Runpod pod's dockerStartCmd ([]: the image's)
    env: dict = field(default_factory=dict)  # a Runpod pod's environment (PUBLIC_KEY: the key its image authorizes)
    region: str = "us-east-1"  # a Lambda instance's region
    keys: list = field(default_factory=list)  # a Lambda instance's SSH key names, and the public keys they name
    public_keys: list = field(default_factory=list)


class MemoryBackend:
    """Instances as records: what the APIs answer, without machines behind them."""

    def __init__(self):
        self.machines: dict[str, Machine] = {}
        self._ids = itertools.count(1)
        self._ports = itertools.count(10022)
        self.capacity = 100  # launches left before "no capacity"

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

    def created(self, machine: Machine) -> None:
        if self.create is not None:
            self.containers[machine.id] = self.create(machine)

    def attach(self, container: str, prefix: str, name: str, kind: str, gpus: int, price: float, ip: str) -> Machine:
        machine = Machine(self.new_id(prefix), name, kind, gpus, price, ip=ip)
        self.machines[machine.id] = machine
        self.containers[machine.id] = container
        return machine

    def _docker(self, *args: str) -> None:
        import subprocess

        subprocess.run(["docker", *args], capture_output=True, check=True, timeout=120)

    def stop(self, machine: Machine) -> None:
        self._docker("stop", "-t", "5", self.containers[machine.id])
        super().stop(machine)

    def start(self, machine: Machine, new_port: bool = False) -> None:
        self._docker("start", self.containers[machine.id])
        super().start(machine, new_port)

    def terminate(self, machine: Machine) -> None:
        self._docker("rm", "-f", "-v", self.containers[machine.id])
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


class Standin:
    """One provider's API on <bind>:<port> (127.0.0.1 unless a Docker node must reach it: then the
    network's gateway); ``url`` is its base URL (what MESHCTL_*_API_URL takes)."""

    def __init__(self, provider: str, backend=None, bind: str = "127.0.0.1"):
        assert provider in PROVIDERS
        self.provider = provider
        self.bind = bind
        self.backend = backend or MemoryBackend()
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request, in order
        self.fail_next: list[tuple[int, dict, dict]] = []  # (status, body, headers) answered before the real one
        self.ssh_keys: dict[str, str] = {"meshctl": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBgx6l3standin meshctl"}
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((bind, 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        base = {"lambda": "/api/v1", "runpod": "/v1", "paperspace": "/v1"}[self.provider]
        return f"http://{self.bind}:{self.server.server_port}{base}"

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

    def throttle(self, times: int = 1, retry_after: str = "0") -> None:
        """The next TIMES requests get 429 Too Many Requests."""
        body = {
            "lambda": {"error": {"code": "global/too-many-requests", "message": "Too many requests"}},
            "runpod": {"error": "rate limit exceeded"},
            "paperspace": {"code": "TOO_MANY_REQUESTS", "message": "Rate limit exceeded"},
        }[self.provider]
        self.fail_next += [(429, body, {"Retry-After": retry_after})] * times

    # --- rendering, in each API's documented shape -------------------------------------------

    def render(self, m: Machine) -> dict:
        if self.provider == "lambda":
            status = {"running": "active", "booting": "booting", "terminated": "terminated"}.get(m.state, m.state)
            return {
                "id": m.id, "name": m.name, "ip": m.ip, "private_ip": "10.19.0.2", "status": status,
                "ssh_key_names": list(m.keys or ["meshctl"]), "file_system_names": [],
                "hostname": m.ip.replace(".", "-"), "region": {"name": m.region, "description": "Virginia, USA"},
                "instance_type": {"name": m.kind, "description": f"{m.gpus}x {m.kind}",
                                  "gpu_description": m.kind.removeprefix("gpu_").split("_", 1)[-1].upper(),
                                  "price_cents_per_hour": round(m.price * 100),
                                  "specs": {"vcpus": 30, "memory_gib": 200, "storage_gib": 1400, "gpus": m.gpus}},
                "jupyter_token": "x", "jupyter_url": "https://jupyter.example", "is_reserved": False,
            }  # fmt: skip
        if self.provider == "runpod":
            status = {"running": "RUNNING", "stopped": "EXITED", "terminated": "TERMINATED"}.get(m.state, "RUNNING")
            running = m.state == "running"
            return {
                "id": m.id, "name": m.name, "desiredStatus": status, "costPerHr": f"{m.price:.2f}",
                "adjustedCostPerHr": m.price, "gpu": {"id": m.kind, "count": m.gpus, "displayName": m.kind},
                "image": "runpod/pytorch:2.1.0-py3.10-cuda11.8.0-devel-ubuntu22.04", "ports": ["22/tcp"],
                "publicIp": m.ip if running else None, "portMappings": {"22": m.port} if running else None,
                "machineId": "s194cr8pls2z", "containerDiskInGb": 50, "volumeInGb": 20,
                "volumeMountPath": "/workspace", "interruptible": False, "lastStatusChange": "Rented by User",
                "dockerEntrypoint": [], "dockerStartCmd": list(m.start_cmd),
            }  # fmt: skip
        state = {"running": "ready", "stopped": "off", "booting": "starting"}.get(m.state, m.state)
        return {
            "id": m.id, "name": m.name, "state": state, "machineType": m.kind, "os": "Ubuntu 22.04",
            "publicIp": m.ip, "privateIp": "10.64.0.2", "region": "ny2", "cpus": 8, "ram": 48 * 2**30,
            "storageTotal": 100 * 2**30, "autoShutdownEnabled": False, "dtCreated": "2026-11-24T10:00:00Z",
        }  # fmt: skip

    # --- the HTTP side ------------------------------------------------------------------------

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, body, headers: dict | None = None):
                raw = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self, method: str):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with standin.lock:
                    standin.requests.append((method, self.path))
                    if self.headers.get("Authorization") != f"Bearer {KEY}":
                        return self._answer(401, standin._unauthorized())
                    if standin.fail_next:
                        status, payload, headers = standin.fail_next.pop(0)
                        return self._answer(status, payload, headers)
                    status, payload = standin.route(method, self.path, body)
                return self._answer(status, payload)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

            def do_DELETE(self):
                self._handle("DELETE")

        return Handler

    def _unauthorized(self) -> dict:
        return {"lambda": {"error": {"code": "global/invalid-api-key", "message": "API key was invalid, expired, "
                                     "or deleted.", "suggestion": "Check your API key or create a new one"}},
                "runpod": {"error": "invalid api key"},
                "paperspace": {"code": "UNAUTHORIZED", "message": "Unauthorized"}}[self.provider]  # fmt: skip

    def _not_found(self, what: str) -> tuple[int, dict]:
        return 404, {"lambda": {"error": {"code": "global/object-does-not-exist", "message": f"{what} not found"}},
                     "runpod": {"error": f"{what} not found"},
                     "paperspace": {"code": "NOT_FOUND", "message": f"{what} not found"}}[self.provider]  # fmt: skip

    def _live(self) -> list[Machine]:
        return [m for m in self.backend.machines.values() if m.state != "terminated"]

    def route(self, method: str, path: str, body) -> tuple[int, object]:
        path = path.split("?", 1)[0]
        return getattr(self, f"_route_{self.provider}")(method, path, body or {})

    def _route_lambda(self, method, path, body):
        if path == "/api/v1/instances" and method == "GET":
            return 200, {"data": [self.render(m) for m in self._live()]}
        if (m := re.fullmatch(r"/api/v1/instances/([\w-]+)", path)) and method == "GET":
            machine = self.backend.machines.get(m.group(1))
            return (200, {"data": self.render(machine)}) if machine else self._not_found("Instance")
        if path == "/api/v1/instance-operations/launch" and method == "POST":
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
            machine = self.add(body.get("name") or "", kind, int(re.search(r"_(\d+)x_", kind).group(1)), 1.29)
            machine.region, machine.keys = body.get("region_name") or "us-east-1", list(names)
            machine.public_keys = [self.ssh_keys[n] for n in names]
            self.backend.created(machine)
            return 200, {"data": {"instance_ids": [machine.id]}}
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

    def _route_runpod(self, method, path, body):
        if path == "/v1/pods" and method == "GET":
            return 200, [self.render(m) for m in self._live()]
        if path == "/v1/pods" and method == "POST":
            if self.backend.capacity <= 0:
                return 500, {"error": "create pod: There are no longer any instances available with the requested "
                             "specifications. Please refresh and try again."}  # fmt: skip
            self.backend.capacity -= 1
            gpu = (body.get("gpuTypeIds") or ["NVIDIA RTX A5000"])[0]
            machine = self.add(body.get("name") or "", gpu, int(body.get("gpuCount", 1)), 0.27)
            machine.env = dict(body.get("env") or {})
            self.backend.created(machine)
            return 201, self.render(machine)
        m = re.fullmatch(r"/v1/pods/([\w-]+)(/start|/stop)?", path)
        machine = self.backend.machines.get(m.group(1)) if m else None
        if machine is None or machine.state == "terminated":
            return self._not_found("pod")
        if method == "GET" and not m.group(2):
            return 200, self.render(machine)
        if method == "PATCH" and not m.group(2):  # "Update a Pod, potentially triggering a reset"
            command = body.get("dockerStartCmd") if isinstance(body, dict) else None
            if not isinstance(command, list) or not all(isinstance(part, str) for part in command):
                return 400, {"error": "dockerStartCmd must be an array of strings"}
            changed, machine.start_cmd = command != machine.start_cmd, command
            if changed and machine.state == "running":
                self.backend.reset(machine)
            return 200, self.render(machine)
        if method == "POST" and m.group(2) == "/stop":
            machine.disk.clear()  # the container disk is wiped; the volume (/workspace) is kept
            self.backend.stop(machine)
            return 200, self.render(machine)
        if method == "POST" and m.group(2) == "/start":
            if self.backend.capacity <= 0:
                return 500, {"error": "There are not enough free GPUs on the host machine to start this pod."}
            self.backend.start(machine, new_port=True)  # a pod's SSH port changes when it starts again
            return 200, self.render(machine)
        if method == "DELETE" and not m.group(2):
            self.backend.terminate(machine)
            return 204, None
        return 404, {"error": f"no route {method} {path}"}

    def _route_paperspace(self, method, path, body):
        if path == "/v1/machines" and method == "GET":
            return 200, {"hasMore": False, "nextPage": None, "items": [self.render(m) for m in self._live()]}
        if path == "/v1/machines" and method == "POST":
            if self.backend.capacity <= 0:
                return 400, {"code": "BAD_REQUEST", "message": "Machine type is out of capacity in this region"}
            self.backend.capacity -= 1
            kind = body.get("machineType", "A4000")
            machine = self.add(body.get("name") or "", kind, 1, 0.76)
            return 200, {"data": self.render(machine), "event": {"id": "ev1", "name": "create", "state": "new"}}
        m = re.fullmatch(r"/v1/machines/([\w-]+)(/start|/stop)?", path)
        machine = self.backend.machines.get(m.group(1)) if m else None
        if machine is None or machine.state == "terminated":
            return self._not_found("Machine")
        if method == "GET" and not m.group(2):
            return 200, self.render(machine)
        if method == "PATCH" and m.group(2) == "/start" and self.backend.capacity <= 0:
            return 400, {"code": "BAD_REQUEST", "message": "Machine type is out of capacity in this region"}
        if method == "PATCH" and m.group(2) in ("/start", "/stop"):
            (self.backend.start if m.group(2) == "/start" else self.backend.stop)(machine)
            return 200, {"data": self.render(machine), "event": {"id": "ev2", "name": m.group(2)[1:], "state": "new"}}
        if method == "DELETE" and not m.group(2):
            self.backend.terminate(machine)
            return 200, {"data": self.render(machine), "event": {"id": "ev3", "name": "delete", "state": "new"}}
        return 404, {"code": "NOT_FOUND", "message": f"no route {method} {path}"}
