"""The callback meshctl.mesh.stop_with_parent (plugins/callback/stop_with_parent.py): a run ends, with
its workers and what they run, when the process that started ansible-playbook ends (killed, or its
terminal closed), as it does on a SIGTERM; nothing of it goes on to meet the next run on the nodes.

Real processes: a parent starts ansible-playbook on a play whose task runs a program that would run
for minutes (found by a marker in its command line); the parent is killed, or ansible-playbook gets
the terminal's SIGHUP, and the test waits for ansible-playbook, its worker and the program to end."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from meshctl import resources, runner

CALLBACK = "meshctl.mesh.stop_with_parent"
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
# The parent: starts ansible-playbook as meshctl does (its own PID in MESHCTL_PARENT_PID), prints the
# child's PID, and waits for it.
PARENT = """
import os, subprocess, sys
env = dict(os.environ, MESHCTL_PARENT_PID=str(os.getpid()))
with open("run.log", "w") as log:
    child = subprocess.Popen(sys.argv[1:], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
print(child.pid, flush=True)
child.wait()
"""


def processes_with(marker: str) -> list[int]:
    """PIDs of the processes whose command line holds MARKER (the test's own excepted)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if entry.name.isdigit() and state != "Z" and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return sorted(pid for pid in found if pid != os.getpid())


def alive(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    return False


def wait_until(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.2)
    return check()


@pytest.fixture
def run(tmp_path):
    """Start the parent, its ansible-playbook and the long task; yield (parent, playbook's PID, marker)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    marker = f"meshctl-stop-with-parent-{uuid.uuid4().hex}"
    task = {"ansible.builtin.command": {"argv": [sys.executable, "-c", "import time; time.sleep(300)", marker]}}
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [task]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(tmp_path / "collections")),
               ANSIBLE_CALLBACKS_ENABLED=",".join(runner.OWN_CALLBACKS),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))  # fmt: skip
    interpreter = f"ansible_python_interpreter={sys.executable}"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, ANSIBLE_PLAYBOOK, "-i", "localhost,", "-e", interpreter,
                               "play.yml"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)  # fmt: skip
    playbook = int(parent.stdout.readline())
    try:
        started = wait_until(lambda: processes_with(marker), 90)
        assert started, "the task never started: " + (tmp_path / "run.log").read_text()
        yield parent, playbook, marker
    finally:
        for pid in [parent.pid, playbook, *processes_with(marker)]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        parent.wait()


def test_meshctl_enables_it_for_every_run():
    assert CALLBACK in runner.callbacks_enabled().split(",")


def test_the_run_its_worker_and_the_task_end_when_the_parent_is_killed(run):
    parent, playbook, marker = run
    task = processes_with(marker)
    parent.kill()  # SIGKILL: the parent does nothing of its own
    parent.wait()
    ended = wait_until(lambda: not alive(playbook) and not processes_with(marker), 30)
    assert ended, f"still running: ansible-playbook {alive(playbook)}, the task's {processes_with(marker)} of {task}"


def test_the_run_its_worker_and_the_task_end_on_the_terminals_sighup(run):
    parent, playbook, marker = run
    os.kill(playbook, signal.SIGHUP)  # what a closed terminal (meshctl's pty) sends
    ended = wait_until(lambda: not alive(playbook) and not processes_with(marker), 30)
    assert ended, f"still running: ansible-playbook {alive(playbook)}, the task's processes {processes_with(marker)}"
    assert parent.wait(timeout=10) == 0  # the parent itself carries on


def test_without_its_parents_pid_it_ties_nothing():
    stop_with_parent = resources.plugin("callback.stop_with_parent")
    before = signal.getsignal(signal.SIGHUP)
    assert stop_with_parent.tie(None) is False
    assert signal.getsignal(signal.SIGHUP) == before


def test_the_callback_reads_the_variable_meshctl_sets():
    stop_with_parent = resources.plugin("callback.stop_with_parent")
    option = yaml.safe_load(stop_with_parent.DOCUMENTATION)["options"]["parent_pid"]
    assert option["env"] == [{"name": runner.PARENT_PID_VARIABLE}]


# A run process (as ansible-playbook, the callback loaded and tied to its parent, this test) forks a
# worker from its main thread, as Ansible's strategy does, and prints its PID; the run is then
# SIGKILLed (what the kernel's parent-death signal or a kill leaves of it).
RUN = """
import multiprocessing, os, sys, time
from meshctl import resources
stop_with_parent = resources.plugin("callback.stop_with_parent")
stop_with_parent.tie(os.getppid())
worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(300,))
worker.start()
print(worker.pid, flush=True)
time.sleep(300)
"""


def test_a_worker_the_run_forked_ends_with_the_run():
    """Ansible passes its SIGTERM on to the workers it knows; one forked as the run was ending (a
    SIGKILL of meshctl caught ansible-playbook queueing a task) waited forever to hand its result on."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    run = subprocess.Popen([sys.executable, "-c", RUN], stdout=subprocess.PIPE, text=True)
    worker = int(run.stdout.readline())
    try:
        assert alive(worker)
        run.kill()
        run.wait()
        assert wait_until(lambda: not alive(worker), 30), f"the worker {worker} outlived its run"
    finally:
        with contextlib.suppress(OSError):
            os.kill(worker, signal.SIGKILL)


FORKED = """
import os, sys, threading
from meshctl import resources
stop_with_parent = resources.plugin("callback.stop_with_parent")
if sys.argv[1] == "gone":  # forked by the run, which ended before the child was tied
    stop_with_parent._forker = (os.getppid() + 1_000_000, True)
    stop_with_parent.tie_forked(os.getppid() + 1_000_000)
    sys.exit(0)
stop_with_parent._forker = (os.getppid(), False)  # forked by another thread of the run: left alone
sys.exit(3 if stop_with_parent.tie_forked(os.getppid()) is False else 4)
"""


def test_a_worker_whose_run_ended_before_it_was_tied_ends_at_once_and_a_threads_fork_is_left_alone():
    gone = subprocess.run([sys.executable, "-c", FORKED, "gone"], capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1, gone.stderr
    other = subprocess.run([sys.executable, "-c", FORKED, "thread"], capture_output=True, text=True, timeout=60)
    assert other.returncode == 3, other.stderr


# A run ties itself, then forks a worker that ties itself: the worker starts no process (the C library
# was loaded by the run; ctypes.util.find_library would run `ldconfig -p` in every worker).
NO_PROCESS = """
import multiprocessing, os, sys
from meshctl import resources
stop_with_parent = resources.plugin("callback.stop_with_parent")
started = []
sys.addaudithook(lambda event, args: started.append(os.getpid()) if event == "subprocess.Popen" else None)
stop_with_parent.tie(os.getppid())
def worker():  # after the fork's hooks: tie_forked has run in this process
    sys.exit(5 if os.getpid() in started else 6)
child = multiprocessing.get_context("fork").Process(target=worker)
child.start()
child.join()
sys.exit(child.exitcode)
"""


def test_a_worker_finds_the_c_library_loaded_by_its_run_and_starts_no_process_to_tie_itself():
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    done = subprocess.run([sys.executable, "-c", NO_PROCESS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 6, done.stderr


# A run ties itself and forks a worker with a SIGTERM handler like Ansible's (`_term`: SIGTERM back
# to its default, then the worker's process group ended); the run passes a SIGTERM on and ends while
# that handler runs, as ansible-playbook does. The kernel's parent-death signal then arrives in the
# middle of it: it must not end the worker before the handler has ended the group (file `ended`).
IN_TERM = """
import multiprocessing, os, signal, sys, time
from pathlib import Path
from meshctl import resources
stop_with_parent = resources.plugin("callback.stop_with_parent")
folder = Path(sys.argv[1])
stop_with_parent.tie(os.getppid())
def worker():
    def _term(signum, frame):
        signal.signal(signum, signal.SIG_DFL)
        (folder / "terminating").write_text("")
        time.sleep(2)  # the process group's end, slow
        (folder / "ended").write_text("")
        os._exit(1)
    signal.signal(signal.SIGTERM, _term)
    (folder / "ready").write_text("")
    time.sleep(60)
child = multiprocessing.get_context("fork").Process(target=worker)
child.start()
while not (folder / "ready").exists():
    time.sleep(0.05)
os.kill(child.pid, signal.SIGTERM)
while not (folder / "terminating").exists():
    time.sleep(0.01)
os._exit(0)  # the run ends while its worker's handler runs
"""


def test_a_workers_end_of_its_group_is_not_cut_short_by_its_runs_end(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    done = subprocess.run([sys.executable, "-c", IN_TERM, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and (tmp_path / "terminating").exists(), done.stderr
    assert wait_until(lambda: (tmp_path / "ended").exists(), 30), "the worker ended before its process group"


def test_ansibles_worker_ends_its_group_in_the_handler_the_tie_knows_by_name():
    """run_gone finds Ansible's SIGTERM handler of a worker by its name: an ansible-core that renamed
    it would leave the parent-death signal ending workers without their group."""
    import inspect

    from ansible.executor.process.worker import WorkerProcess

    stop_with_parent = resources.plugin("callback.stop_with_parent")
    assert WorkerProcess._term.__name__ == stop_with_parent.TERM_HANDLER
    assert "signal.signal(signal.SIGTERM, self._term)" in inspect.getsource(WorkerProcess.run)
    assert "os.killpg(self.pid, signum)" in inspect.getsource(WorkerProcess._term)
