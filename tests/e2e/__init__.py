"""End-to-end tests: the CLI over real SSH against Docker nodes."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from meshctl.localmesh import wheels


def pip_settings(*roles: str) -> str:
    """group_vars lines giving each role's pip (ROLE_pip_environment) the test images' CA bundle and
    the test bed's wheel cache when it is ready (meshctl/localmesh/wheels.py)."""
    env = wheels.bed_pip_environment()
    return "".join(f"{role}_pip_environment: {json.dumps(env)}\n" for role in roles)


def wait_for_ssh(address: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if subprocess.run(["ssh-keyscan", "-T", "2", address], capture_output=True, text=True).stdout.strip():
            return
        time.sleep(1)
    raise AssertionError(f"no sshd at {address} after {seconds}s")


def wait_for(what, seconds: float, step: float = 2):
    """WHAT's first true value within SECONDS (asked every STEP), else its last answer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(step)
    return what()


# What the end-to-end beds leave out of a mesh's defaults, as a user may: one MLflow worker, no
# PyTorch in the job environment and no MPI (no job of theirs trains or runs MPI: Molecule's
# `default` scenario installs both and runs DDP and MPI jobs, verify_training.yml). MPI alone is
# Open MPI and its libraries on every node (checks at the level they need).
BED_SETTINGS = "mlflow_workers: 1\njob_env_torch: ''\njob_env_mpi: false\n"


def torch_settings() -> str:
    """group_vars lines for a bed whose jobs train: the test machines' CPU build of PyTorch
    (meshctl/localmesh/wheels.py, TORCH_WHEELS), which the wheel cache serves with what it needs,
    bytecode for what a job loads at its start only. Skips the test without the wheel."""
    import pytest

    wheel = wheels.torch_wheel()
    if wheel is None:
        pytest.skip(f"no PyTorch CPU wheel for Python 3.11 in {wheels.TORCH_WHEELS} (MESHCTL_WHEELS)")
    version = wheel.name.split("-")[1].split("+")[0]
    return f"job_env_torch: torch=={version}\njob_env_bytecode: imports\n"


# The Ansible configuration of every meshctl run of these files (ansible.cfg beside this file): none
# of the test bed's own, so that a run started from the checkout does not read the checkout's.
TESTBED_ENV = {"ANSIBLE_CONFIG": str(Path(__file__).with_name("ansible.cfg"))}


def meshctl_in(root, *args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """The real CLI, run in ROOT/lab (the mesh `init lab` made) or ROOT, with ENV added."""
    cwd = root / "lab" if (root / "lab").exists() else root
    env = {**os.environ, **TESTBED_ENV, "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "meshctl", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env=env)  # fmt: skip


def on_container(container: str, command: str) -> str:
    """COMMAND's standard output on a Docker node (bash -c), stripped; never raises."""
    return subprocess.run(["docker", "exec", container, "bash", "-c", command], capture_output=True, text=True,
                          check=False).stdout.strip()  # fmt: skip


def slurm_job_state(container: str, job: str) -> str:
    """A job's state as the head (CONTAINER) says it: RUNNING, COMPLETED, ..."""
    return on_container(container, f"scontrol show job {job} | grep -o 'JobState=[A-Z]*' | cut -d= -f2")


# meshctl's runs are plain Ansible unless MESHCTL_MITOGEN=1 (docs/usage.md). test_first_run.py and
# test_collection.py run the default; test_cli_ssh.py runs it for its first add-node, the dry run
# of a second node, the apply with a node stopped, the killed apply, the refused host key, the
# refused munge key and the hostile node, and the opt-in for the upkeep of a working mesh (the
# second add-node, the applies after a node came back or a run was killed, the lock, the accepted
# host key, rotate-munge-key, remove-node, a resumed add-node): one mesh that meets both ways, as a
# user who turns Mitogen on does. The provider files (test_pod.py, test_power_save.py) run the
# opt-in; so both ways have end-to-end tests (docs/testing.md). Molecule runs the same roles under
# Mitogen too. A head's own runs (relaunch) are plain whatever this says.
MITOGEN = {"MESHCTL_MITOGEN": "1"}


def runs_said(mesh_dir) -> list[str]:
    """The first line of each run log kept under MESH_DIR: which way each run went."""
    logs = sorted((mesh_dir / "logs").glob("*.log"))
    return [path.read_text(errors="replace").partition("\n")[0] for path in logs]
