"""One outcome per situation, in every command: the real meshctl, its real Ansible and ssh.

Each case runs ``meshctl`` as a user does (a process in a session of its own, the signal sent to its
process group as a terminal sends Ctrl+C) on a mesh whose head and node are on this machine:

- unreachable: both addresses refuse SSH -> exit 7, the same words (``errors.unreachable``) and fix;
- interrupted: SIGINT before SSH (once meshctl's handlers are installed), while connecting (ssh
  waits on a server that never answers) and inside the Ansible run -> 130, "interrupted", no word
  of success, and nothing of the run left behind;
- provider unreachable: the providers' API URLs point at a closed port -> exit 8 naming the
  network and the override, never "no offer".
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from meshctl import errors
from meshctl.mesh import Mesh
from meshctl.model import Node
from tests.hwfacts import NO_GPU
from tests.unit.meshctl.test_quickread import HEAD_REQUEST, REQUEST

REPO = Path(__file__).resolve().parents[3]
MESHCTL = [sys.executable, "-m", "meshctl"]
# What a command says only when it did what it was asked: none of it may follow an interruption.
SUCCESS_WORDS = ("installed on", "restarted on", "removed from", "converged", "Mesh status", "Links (iperf3",
                 "is idle", "forgot", "Recap")  # fmt: skip
# Every command that reaches nodes, as a user types it (NODE_PORT: the added machine's port).
COMMANDS = {
    "status": ["status", "--timeout", "1"],
    "apply": ["apply"],
    "doctor": ["doctor"],
    "usage": ["usage"],
    "rotate-munge-key": ["rotate-munge-key"],
    "remove-node": ["remove-node", "gpu1"],
    "add-node": ["add-node", "root@127.0.0.2:NODE_PORT", "--name", "cpu9"],
    "burst remove": ["burst", "remove", "h100"],
    "init": ["init", "new-mesh", "--head", "root@127.0.0.2:NODE_PORT"],
    "autostop": ["autostop", "gpu1", "30m"],
}
ANSIBLE_RUNS = {"status": ["status", "--timeout", "30", "-v"]}  # status reads without Ansible unless -v
# Interrupted runs wait on a node that never answers: status's own timeout as long as the others'
# wait (its 1 s above ended the run before a poll of the test, at low priority on a loaded machine,
# saw its ssh: there was no run left to interrupt).
INTERRUPTED = {"status": ["status", "--timeout", "30"]}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Silent:
    """A TCP server that accepts and never says a word: ssh waits in its connection (its banner)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("", 0))  # 127.0.0.1 (the mesh) and 127.0.0.2 (a machine added)
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def make_mesh(path: Path, port: int, requests: bool = False) -> Mesh:
    """A mesh of head1 and gpu1 at 127.0.0.1:PORT, their facts recorded (and, with REQUESTS, what
    `status` reads there, as a converge records it: status then reads over SSH without Ansible)."""
    mesh = Mesh(path)
    path.mkdir(mode=0o700)
    nodes = [Node("head1", "127.0.0.1", port=port, roles=["head", "compute"], state="active",
                  mesh_address="100.64.0.1"),
             Node("gpu1", "127.0.0.1", port=port, state="active", mesh_address="100.64.0.2", provider="paperspace",
                  instance="paperspace:ps4xv2")]  # fmt: skip
    pool = {"name": "h100", "gpu": "H100", "gpus": 1, "max_nodes": 1, "max_price": 3.0, "providers": ["any"],
            "idle": 600, "cpus": 1, "memory_mb": 1024}  # fmt: skip
    mesh.save(nodes, {"slurm_accounting": True, "burst_pools": [pool]})
    for node in nodes:
        mesh.record_facts(node.name, dict(NO_GPU))
        if requests:
            mesh.record_status_request(node.name, HEAD_REQUEST if node.name == "head1" else REQUEST)
    return mesh


def env_for(home: Path, **more) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHCTL_")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), COLUMNS="250", **more)
    return env


def argv(command: list[str], mesh: Mesh, node_port: int) -> list[str]:
    mesh_given = [] if command[0] == "init" else ["--mesh", str(mesh.path)]  # init makes its folder
    return [*MESHCTL, *(a.replace("NODE_PORT", str(node_port)) for a in command), *mesh_given]


def descendants(pid: int) -> dict[int, str]:
    """PID's descendants: pid -> command name (Linux /proc)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
        names[int(entry.name)] = " ".join(Path(c.decode(errors="replace")).name for c in cmdline[:2] if c)
    found, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found[child] = names.get(child, "")
        todo += children.get(child, [])
    return found


def handlers_installed(pid: int) -> bool:
    """meshctl's own signal handlers are in place (SIGHUP caught: Python leaves it alone by itself)."""
    try:
        caught = next(
            line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigCgt")
        )
    except (OSError, StopIteration):
        return False
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGHUP - 1)))


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def bed(tmp_path):
    silent = Silent()
    yield tmp_path, silent
    silent.close()


def run_outcome(command: list[str], mesh: Mesh, node_port: int, home: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(argv(command, mesh, node_port), capture_output=True, text=True, timeout=120,
                          env=env_for(home, **env), cwd=home)  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_head_that_does_not_answer_is_exit_7_with_the_same_words_and_fix(name, tmp_path):
    port = closed_port()
    mesh = make_mesh(tmp_path / "mesh", port)
    done = run_outcome(COMMANDS[name], mesh, port, tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 7, said[-3000:]
    lost = "127.0.0.2" if name in ("add-node", "init") else "head1"  # a machine being added is asked first
    assert re.search(rf"error: .*\d node\(s\) could not be reached: .*{lost}", done.stderr), said[-3000:]
    assert "fix: start them (they rejoin Slurm by themselves) and run `meshctl " in done.stderr, said[-3000:]
    assert "every node waits for it" in said or "head1" not in done.stderr, said[-3000:]
    claims = ("installed on", "restarted on", "removed from", "converged", "is idle", "forgot")
    assert not any(word in said for word in claims), said[-3000:]


POINTS = ("before SSH", "while connecting", "inside Ansible")


def interrupt_at(point: str, proc: subprocess.Popen) -> str:
    """Wait for POINT in PROC's run, then Ctrl+C its process group; what was seen there."""
    assert wait_for(lambda: handlers_installed(proc.pid) or proc.poll() is not None), "meshctl never started"
    if point == "while connecting":
        assert wait_for(lambda: any(n.startswith("ssh ") or n == "ssh" for n in descendants(proc.pid).values())
                        or proc.poll() is not None), "no ssh started"  # fmt: skip
    elif point == "inside Ansible":
        assert wait_for(lambda: any("ansible-playbook" in n for n in descendants(proc.pid).values())
                        or proc.poll() is not None), "no ansible-playbook started"  # fmt: skip
        time.sleep(1.0)  # in the run: its plays load, its first task starts
    seen = descendants(proc.pid)
    said = ", ".join(sorted(set(seen.values()))) or "no child process"
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except ProcessLookupError:  # it ended by itself first: what it said is checked as any other end
        return f"{said}; it had ended before Ctrl+C"
    return said


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_ctrl_c_at_any_point_is_130_interrupted_and_never_a_word_of_success(name, point, bed):
    if name in ("add-node", "init") and point == "inside Ansible":
        pytest.skip(f"{name}'s run starts only after the machine answered its preflight (the e2e bed's case)")
    tmp_path, silent = bed
    mesh = make_mesh(tmp_path / "mesh", silent.port)
    before = mesh.inventory.read_bytes()
    runs = ANSIBLE_RUNS if point == "inside Ansible" else INTERRUPTED
    command = runs.get(name, COMMANDS[name])
    proc = subprocess.Popen(argv(command, mesh, silent.port), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env_for(tmp_path), cwd=tmp_path, start_new_session=True)  # fmt: skip
    try:
        seen = interrupt_at(point, proc)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    said = f"[{point}: {seen}]\n{out}{err}"
    assert proc.returncode == 130, said[-3000:]
    assert "error: interrupted (Ctrl+C)" in err and "fix: " in err, said[-3000:]
    assert not any(word in out + err for word in SUCCESS_WORDS), said[-3000:]
    assert "Traceback" not in err, said[-3000:]
    # Nothing of the run goes on without it (ansible-playbook, its workers, their ssh).
    left = lambda: [p for p in (seen_pids(tmp_path)) if Path(f"/proc/{p}").exists()]  # noqa: E731
    assert wait_for(lambda: not left(), 30), f"still running after meshctl ended: {left()}"
    if name != "add-node":  # add-node records the new node as pending before its run: as it says
        assert mesh.inventory.read_bytes() == before, said[-3000:]


def seen_pids(home: Path) -> list[int]:
    """Processes whose working folder or environment is this case's (meshctl's runs inherit both)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"HOME={home}".encode() in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def test_a_provider_api_that_cannot_be_reached_is_exit_8_naming_the_network_never_no_offer(tmp_path):
    mesh = make_mesh(tmp_path / "mesh", closed_port())
    key = tmp_path / "key"
    key.write_text("secret_abcdefgh1234")
    key.chmod(0o600)
    closed = f"http://127.0.0.1:{closed_port()}"
    env = {f"MESHCTL_{p.upper()}_API_URL": closed for p in ("lambda", "runpod", "paperspace")}
    stored = run_outcome(["provider", "add", "lambda", "--key-file", str(key), "--no-check"], mesh, 0, tmp_path)
    assert stored.returncode == 0, stored.stderr
    cases = {
        "provider add": ["provider", "add", "runpod", "--key-file", str(key)],
        "offers": ["offers", "--gpu", "H100:1"],
        "machines": ["machines"],
        "launch --gpu": ["launch", "--gpu", "H100:1", "--name", "x1", "-y"],
        "launch lambda --type": [
            "launch",
            "lambda",
            "--type",
            "gpu_1x_a10",
            "--name",
            "x2",
            "--region",
            "us-east-1",
            "--ssh-key-name",
            "k",
            "-y",
        ],
        "burst add": ["burst", "add", "a10", "--gpu", "H100:1", "--max-nodes", "1", "--max-price", "5"],
    }
    for case, command in cases.items():
        done = run_outcome(command, mesh, 0, tmp_path, **env)
        said = f"[{case}]\n{done.stdout}{done.stderr}"
        assert done.returncode == 8, said
        assert "cannot be reached" in done.stderr and "check this machine's network" in done.stderr, said
        assert "_API_URL" in done.stderr, said
        assert "no offer" not in said.lower() and "nothing available matches" not in said, said
        assert "[y/N]" not in said and "not listed" not in said, said


def test_the_readme_exit_codes_are_the_outcome_table():
    text = (REPO / "README.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)
    assert [(int(code), meaning) for code, meaning in rows] == [(o.code, o.meaning) for o in errors.OUTCOMES]


def test_every_error_class_takes_its_code_from_the_table():
    codes = {o.code for o in errors.OUTCOMES}
    classes = [errors.MeshctlError, *errors.MeshctlError.__subclasses__(), errors.Interrupted]
    for cls in classes:
        assert cls.exit_code in codes, cls
    assert errors.Interrupted("x", signum=signal.SIGTERM).exit_code == 143
    assert errors.outcome(143).name == "interrupted"


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs ssh")
@pytest.mark.parametrize("answer", ["refused", "silent", "silent, a provider key stored, its API silent"])
def test_status_of_two_unreachable_nodes_is_exit_7_and_says_its_seconds(answer, bed):
    """Not a timed assert: the seconds are printed (docs/benchmarks.md has the figures); the
    outcome is checked, for a port that refuses, a machine that never answers, and that with a
    provider account whose API never answers either (an offline laptop)."""
    tmp_path, silent = bed
    port = closed_port() if answer == "refused" else silent.port
    mesh = make_mesh(tmp_path / "mesh", port, requests=True)
    env = {}
    if "provider" in answer:
        key = tmp_path / "key"
        key.write_text("secret_abcdefgh1234")
        key.chmod(0o600)
        stored = run_outcome(["provider", "add", "lambda", "--key-file", str(key), "--no-check"], mesh, 0, tmp_path)
        assert stored.returncode == 0, stored.stderr
        env["MESHCTL_LAMBDA_API_URL"] = f"http://127.0.0.1:{silent.port}"
    start = time.monotonic()
    done = run_outcome(["status", "--timeout", "1"], mesh, port, tmp_path, **env)
    print(f"status --timeout 1, two unreachable nodes ({answer}): {time.monotonic() - start:.2f} s")
    assert done.returncode == 7, done.stdout + done.stderr
    assert "2 node(s) could not be reached: head1, gpu1" in done.stderr


def test_add_node_of_machines_that_do_not_answer_names_every_one_within_its_timeout(bed):
    """Each machine's preflight at once, every one that did not answer named (not the first only),
    SSH's wait set by --timeout; nothing recorded."""
    tmp_path, silent = bed
    mesh = make_mesh(tmp_path / "mesh", closed_port())
    before = mesh.inventory.read_bytes()
    targets = [f"root@127.0.0.2:{closed_port()}", f"root@127.0.0.3:{silent.port}"]
    start = time.monotonic()
    done = run_outcome(["add-node", *targets, "--timeout", "2"], mesh, 0, tmp_path)
    print(f"add-node of two machines that do not answer, --timeout 2: {time.monotonic() - start:.2f} s")
    assert done.returncode == 7, done.stdout + done.stderr
    assert "2 of 2 machines cannot be added" in done.stderr and "refused the connection" in done.stdout
    assert all(t.split("@")[1].split(":")[0] in done.stderr for t in targets), done.stderr
    assert mesh.inventory.read_bytes() == before


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_inside_ansible_are_128_plus_the_signal_and_stop_the_run(number, bed):
    tmp_path, silent = bed
    mesh = make_mesh(tmp_path / "mesh", silent.port)
    proc = subprocess.Popen(argv(["apply"], mesh, silent.port), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env_for(tmp_path), cwd=tmp_path, start_new_session=True)  # fmt: skip
    try:
        assert wait_for(lambda: any("ansible-playbook" in n for n in descendants(proc.pid).values()))
        time.sleep(1.0)
        proc.send_signal(number)  # to meshctl alone: a `kill`, or the terminal closing
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + number, out + err
    assert f"error: interrupted ({signal.Signals(number).name}" in err and "during the Ansible run" in err, err
    assert wait_for(lambda: not [p for p in seen_pids(tmp_path) if Path(f"/proc/{p}").exists()], 30)


def test_a_group_writable_umask_makes_nothing_the_mesh_check_refuses(tmp_path):
    """With the umask 002 many systems give users, what meshctl writes (init's folder, its secrets,
    the generation, .gitignore) is writable by no one else: its own check passes the next time."""
    script = ("import os, sys, runpy; os.umask(0o002); sys.argv = sys.argv[1:]; "
              "runpy.run_module('meshctl', run_name='__main__')")  # fmt: skip
    made = subprocess.run([sys.executable, "-c", script, "meshctl", "init", "trial", "--head", "local",
                           "--mesh-address", "100.64.0.1", "--name", "desk"],
                          capture_output=True, text=True, env=env_for(tmp_path), cwd=tmp_path, timeout=120)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    loose = [p for p in (tmp_path / "trial").rglob("*") if p.lstat().st_mode & 0o022]
    assert loose == [], loose
    checked = run_outcome(["check"], Mesh(tmp_path / "trial"), 0, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


# Python started with this on its path raises KeyboardInterrupt (a Ctrl+C) when MODULE is first
# imported: the moment a real Ctrl+C lands while meshctl still loads, before its handlers exist.
CTRL_C_AT_IMPORT = """
import os, sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["CTRL_C_AT"]:
            sys.meta_path.remove(self)
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
"""


@pytest.mark.parametrize("module", ["click", "meshctl.display"])
@pytest.mark.parametrize("how", ["meshctl", "python -m meshctl"])
def test_ctrl_c_while_meshctl_still_loads_is_130_interrupted_not_a_traceback(tmp_path, module, how):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(CTRL_C_AT_IMPORT)
    env = {**env_for(tmp_path), "CTRL_C_AT": module,
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    argv = [str(Path(sys.executable).parent / "meshctl")] if how == "meshctl" else [sys.executable, "-m", "meshctl"]
    done = subprocess.run([*argv, "status"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 130, done.stdout + done.stderr
    assert "error: interrupted (Ctrl+C)" in done.stderr and "fix: " in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not any(word in done.stdout for word in SUCCESS_WORDS)


def test_a_ctrl_c_python_wrapped_while_a_module_loads_is_still_interrupted():
    """Python 3.11 wraps an exception raised while a class body's attributes are named (a
    dataclass's fields, as a command's module loads) in RuntimeError: the Interrupted behind it is
    found, at any depth of the chain, and nothing else is taken for one."""
    from meshctl import interrupt
    from meshctl.errors import Interrupted

    signal = Interrupted("interrupted (Ctrl+C)", signum=2)
    try:
        try:
            raise signal
        except Interrupted as inner:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance 'extra' in 'Node'") from inner
    except RuntimeError as wrapped:
        assert interrupt.found_in(wrapped) is signal
    assert interrupt.found_in(RuntimeError("its own")) is None and interrupt.found_in(None) is None
