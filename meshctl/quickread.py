"""``meshctl status`` without an Ansible run: one SSH command per node, all at once.

What to read on each node is what the roles ask for (playbooks/tasks/status_request.yml), as the
last ``apply`` resolved it for that node and meshctl recorded it (``facts/status/<node>.json``,
checked here against :func:`request_problem` on the way in and out). The reading itself is
``plugins/module_utils/mesh_status_read.py`` (the module ``mesh_status`` runs the same file),
sent as text to the node's ``python3`` over SSH, and what comes back is judged by the same filter
(``node_status``) and checked by the same schema (meshctl/health.py) as a status read through
Ansible. Ansible's start alone (about 1.5 s on two cores) was most of a status.

It reads only when it knows the connection exactly as Ansible would make it: SSH or local, with
the address, port, user, key and sudo meshctl writes into mesh.yml, and no other ``ansible_*``
setting in mesh.yml, group_vars or host_vars (and no file there it cannot read, such as a vault).
Otherwise, when a node has no recorded request (never applied since), and for ``status -v``,
``read`` answers None and the caller reads through playbooks/status.yml.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from meshctl import core, health, resources, runner, settings, ssh
from meshctl.mesh import Mesh
from meshctl.model import Node

TASK = "Read the node's services"  # what a failure names, as the playbook's task does
READ_TIMEOUT = 5  # seconds each command and the URL may take on the node (mesh_status's default)
MAX_OUTPUT = 4 * 1024 * 1024  # bytes of a node's answer read
# A head's folders of records (the pool machines it rented; the rented machines that ended), asked
# only by the runs that know them: a request recorded before one existed lacks it.
OPTIONAL = ("rented", "ended")
MAX_DEPTH = 32  # levels of arrays and objects a status record may nest (it has a handful)
# The connection settings meshctl writes itself (Node.hostvars); any other ansible_* setting is
# the user's, and only Ansible knows what it means.
MODELLED = {"ansible_host", "ansible_user", "ansible_port", "ansible_ssh_private_key_file", "ansible_become",
            "ansible_connection", "ansible_python_interpreter"}  # fmt: skip
BOOT = "import sys; exec(compile(sys.stdin.read(), 'mesh_status_read', 'exec'))"

UNIT = re.compile(r"[A-Za-z0-9@._:-]{1,128}")
PATH = re.compile(r"/[A-Za-z0-9._/+-]{0,250}")
URL = re.compile(r"http://[A-Za-z0-9.:\[\]-]{1,255}/health")
NAME = re.compile(r"[a-z0-9][a-z0-9.-]{0,62}")
SHARE_ID = re.compile(r"[0-9a-f]{16,128}")
MARKER = re.compile(r"[A-Za-z0-9._-]{1,64}")
EXPECT = {"share_service": str, "compute": bool, "controller": str, "tailnet": bool}


def request_problem(request: object) -> str | None:
    """Why REQUEST is not a status request meshctl sends to a node (None when it is)."""
    if not isinstance(request, dict):
        return "not a mapping"
    wanted = {"services", "sinfo", "tailscale", "mount_path", "mount_possible", "url", "supervisor", "expect",
              "share_id", "share_marker"}  # fmt: skip
    if set(request) - set(OPTIONAL) != wanted:  # recorded by the runs that know them
        return f"keys {sorted((set(request) - set(OPTIONAL)) ^ wanted)} unexpected or missing"
    services = request["services"]
    if (
        not isinstance(services, list)
        or len(services) > 16
        or not all(isinstance(s, str) and UNIT.fullmatch(s) for s in services)
    ):
        return "services is not a list of unit names"
    for key in ("sinfo", "tailscale", "mount_possible", "supervisor"):
        if not isinstance(request[key], bool):
            return f"{key} is not true or false"
    for key in ("mount_path", *OPTIONAL):
        path = request.get(key)
        if path is not None and not (isinstance(path, str) and PATH.fullmatch(path)):
            return f"{key} is not an absolute path"
    share_id = request["share_id"]
    if share_id is not None and not (isinstance(share_id, str) and SHARE_ID.fullmatch(share_id)):
        return "share_id is not a share identity"
    if not (isinstance(request["share_marker"], str) and MARKER.fullmatch(request["share_marker"])):
        return "share_marker is not a file name"
    if request["url"] is not None and not (isinstance(request["url"], str) and URL.fullmatch(request["url"])):
        return "url is not a health URL"
    expect = request["expect"]
    if not isinstance(expect, dict) or not set(expect) <= set(EXPECT):
        return "expect is not a mapping of known keys"
    for key, kind in EXPECT.items():
        if key in expect and not isinstance(expect[key], kind):
            return f"expect.{key} is not {kind.__name__}"
    if "controller" in expect and not NAME.fullmatch(expect["controller"]):
        return "expect.controller is not a node name"
    if "share_service" in expect and not UNIT.fullmatch(expect["share_service"]):
        return "expect.share_service is not a unit name"
    return None


def modelled(node: Node, mesh_vars: dict) -> bool:
    """Whether Ansible would reach NODE exactly as this module does (the settings meshctl writes)."""
    settings = set(node.hostvars()) | set(mesh_vars)
    return node.connection in (None, "ssh", "local") and not {
        k for k in settings if k.startswith("ansible_") and k not in MODELLED
    }


def vars_files_clear(mesh: Mesh) -> bool:
    """No group_vars or host_vars file sets an ``ansible_*`` variable, and each can be read as YAML."""
    for folder in (mesh.path / "group_vars", mesh.path / "host_vars"):
        if not folder.is_dir():
            continue
        for path in folder.rglob("*"):
            if path.is_dir():
                continue
            try:
                text = path.read_text(encoding="utf-8")
                data = settings.load(text) if not text.startswith("$ANSIBLE_VAULT") else None
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                return False
            if not isinstance(data, dict) or any(str(k).startswith("ansible_") for k in data):
                return False
    return True


def command(node: Node, known_hosts: Path, timeout: int, kex: str | None = None) -> list[str]:
    """The argv that runs the reader's boot line on NODE's python3 (stdin: the reader and the call);
    KEX: the key exchanges to offer, in order (``ssh.fast_kex_first``; None: ssh's own)."""
    python = node.hostvars().get("ansible_python_interpreter")
    python = python if isinstance(python, str) and python.startswith("/") else "python3"
    remote = [python, "-c", BOOT]
    if node.user != "root":
        remote = ["sudo", "-n", "--", *remote]  # Ansible's become: sudo, no password
    if node.connection == "local":
        return remote
    argv = [
        "ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}", "-o", "StrictHostKeyChecking=yes",
        "-o", f"UserKnownHostsFile={known_hosts}", "-o", "ControlMaster=auto", "-o", "ControlPersist=60s",
        "-o", "ControlPath=~/.ansible/cp/%C", "-p", str(node.port), "-l", node.user,
    ]  # fmt: skip
    if kex:
        argv += ["-o", f"KexAlgorithms={kex}"]
    if node.ssh_key:
        argv += ["-i", node.ssh_key]
    # The remote command is one string (ssh joins words with spaces): each word quoted for the shell.
    return [*argv, "--", node.host, " ".join(shlex.quote(w) for w in remote)]


def script(request: dict) -> str:
    """The reader's text and one call of it with REQUEST, printing its answer as JSON."""
    source = (resources.data_dir() / "plugins" / "module_utils" / "mesh_status_read.py").read_text(encoding="utf-8")
    params = {key: request[key] for key in ("services", "sinfo", "tailscale", "mount_path", "mount_possible", "url",
                                            "supervisor", "share_id", "share_marker")}  # fmt: skip
    params.update({key: request.get(key) for key in OPTIONAL})
    params["timeout"] = READ_TIMEOUT
    return f"{source}\nimport json as _json\nprint(_json.dumps(read(_json.loads({json.dumps(params)!r}))))\n"


def _read_one(argv: list[str], text: str, timeout: float, to: tuple[str, int] | None = None) -> tuple[str, object]:
    """('ok', status) | ('unreachable', why) | ('failed', why): one node's answer. With TO (the
    address and port ssh connects to), while ssh starts, TO is asked for a TCP connection: a node
    that takes none within TIMEOUT seconds is unreachable then, not when SSH's whole seconds end."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return "unreachable", str(exc)
    if to is not None and ssh.silent(*to, timeout) and proc.poll() is None:
        proc.kill()
        proc.communicate()
        return (
            "unreachable",
            f"ssh: connect to host {to[0]} port {to[1]}: Connection timed out (no answer in {timeout:g} s)",
        )
    try:
        stdout, stderr = proc.communicate(text.encode(), timeout=ssh.whole_seconds(timeout) + 4 * READ_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return "unreachable", "no answer in time"
    done = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    said = [line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines()
            if line.strip() and not line.startswith(("@", "Warning: Permanently added"))]  # fmt: skip
    why = "; ".join(said)[-300:] if said else f"exit {done.returncode}"
    if done.returncode == 255 and argv[0] == "ssh":
        return "unreachable", why
    if done.returncode != 0:
        return "failed", why
    raw = done.stdout[:MAX_OUTPUT]
    if core.mesh_cloud.nesting(raw) > MAX_DEPTH:  # bounded before the parser, which recurses per level
        return "failed", f"its answer nests deeper than {MAX_DEPTH} levels: no status record is"
    try:
        status = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return "failed", "its answer is not JSON"
    return ("ok", status) if isinstance(status, dict) else ("failed", "its answer is not a mapping")


def read(mesh: Mesh, nodes: list[Node], mesh_vars: dict, timeout: float,
         targets: list[Node] | None = None) -> runner.RunResult | None:  # fmt: skip
    """Every target's status record, read over one SSH command each; None when this module
    cannot read them as Ansible would (the caller then runs playbooks/status.yml)."""
    targets = list(nodes if targets is None else targets)
    requests = {name: r for name, r in mesh.load_status_requests().items() if request_problem(r) is None}
    if not all(n.name in requests for n in targets) or not all(modelled(n, mesh_vars) for n in targets):
        return None
    if not vars_files_clear(mesh):
        return None
    node_status = core.node_status.node_status
    (Path.home() / ".ansible" / "cp").mkdir(mode=0o700, parents=True, exist_ok=True)  # ssh's ControlPath

    def ask(node: Node) -> tuple[str, object]:
        said = ssh.effective(node.host, node.user, node.port) if node.connection != "local" else None
        argv = command(node, mesh.known_hosts, ssh.whole_seconds(timeout), ssh.fast_kex_first(said))
        return _read_one(argv, script(requests[node.name]), timeout, ssh.connects_to(said))

    with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        answers = {node.name: answer for node, answer in zip(targets, pool.map(ask, targets), strict=True)}
    stats: dict[str, dict[str, int]] = {}
    failures: list[runner.Failure] = []
    records: dict[str, dict] = {}
    refused: dict[str, str] = {}
    for node in targets:
        kind, value = answers[node.name]
        if kind == "ok":
            stats[node.name] = {"ok": 1}
            continue
        stats[node.name] = {"unreachable" if kind == "unreachable" else "failed": 1}
        failures.append(runner.Failure(node.name, TASK, str(value)))
    for node in targets:
        kind, status = answers[node.name]
        if kind != "ok":
            continue
        request = requests[node.name]
        controller = request["expect"].get("controller")
        sinfo = None
        if controller in answers and answers[controller][0] == "ok":
            sinfo = answers[controller][1].get("sinfo")
        expect = {
            **request["expect"],
            "name": node.name,
            "address": node.mesh_address,
            "active": node.state == "active",
            "pod": node.pod,
            "head": "head" in node.roles,
        }
        try:
            record = node_status(status, expect, sinfo)
        except (AttributeError, TypeError, ValueError) as exc:  # an answer outside the module's shape
            refused[node.name] = f"its answer does not parse ({exc.__class__.__name__})"
            continue
        record, problem = health.checked(node.name, record)
        if problem:
            refused[node.name] = problem
        else:
            records[node.name] = record
    failed = bool(failures)
    return runner.RunResult("failed" if failed else "successful", 2 if failed else 0, failures, stats,
                            records=records, refused_records=refused)  # fmt: skip
