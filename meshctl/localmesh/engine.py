"""Make a Docker engine answer on a machine where systemd does not run.

The decision is a pure function of what was observed (:func:`plan`), so it is
unit-tested; :func:`ensure` observes, plans and carries the plan out.

Rules: an engine that already answers is left alone; a ``dockerd`` that is
running but not answering yet is waited for, never started twice; we only
ever stop an engine whose PID we recorded when we started it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from meshctl.errors import EnvironmentProblem

STARTED_BY_US = Path("/run/meshctl-dockerd.pid")
LOG_FILE = Path("/var/log/meshctl-dockerd.log")

INSTALL = "install"
START = "start"
WAIT = "wait"


@dataclass(frozen=True)
class EngineState:
    answering: bool  # `docker info` succeeded
    dockerd_installed: bool  # a dockerd binary is on PATH
    dockerd_running: bool  # a dockerd process exists (maybe still starting)
    is_root: bool


def plan(state: EngineState) -> list[str]:
    """Return the steps that make the engine answer, in order; [] means nothing to do."""
    if state.answering:
        return []
    if state.dockerd_running:
        return [WAIT]
    steps = []
    if not state.dockerd_installed:
        steps.append(INSTALL)
    steps += [START, WAIT]
    if not state.is_root:
        raise EnvironmentProblem(
            "no Docker engine answers and starting one needs root",
            hint="run as root, or start Docker yourself (sudo dockerd) and retry",
        )
    return steps


def _answering() -> bool:
    if shutil.which("docker") is None:
        return False
    result = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return result.returncode == 0


def _dockerd_running() -> bool:
    result = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, check=False)
    return result.returncode == 0


def observe() -> EngineState:
    return EngineState(
        answering=_answering(),
        dockerd_installed=shutil.which("dockerd") is not None,
        dockerd_running=_dockerd_running(),
        is_root=os.geteuid() == 0,
    )


def apt_install(package: str, hint: str) -> None:
    """Install one of Debian's packages on this machine (the test bed's engine, its cache)."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", package]):
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise EnvironmentProblem(f"{' '.join(cmd)} failed: {result.stderr.strip()[-400:]}", hint=hint)


def _install() -> None:
    apt_install("docker.io", hint="install a Docker engine by hand (apt-get install docker.io) and retry")


def _start() -> None:
    LOG_FILE.parent.mkdir(parents=True, exist_ok=True)
    with LOG_FILE.open("ab") as log:
        proc = subprocess.Popen(  # failure ignored: judged by the engine answering (the wait after it)
            ["dockerd"],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    STARTED_BY_US.write_text(f"{proc.pid}\n")


def _wait(timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _answering():
            return
        time.sleep(1)
    raise EnvironmentProblem(
        f"the Docker engine did not answer within {timeout:.0f}s",
        hint=f"read {LOG_FILE} for dockerd's own error",
    )


def ensure(timeout: float = 120.0, say=print) -> list[str]:
    """Make `docker info` answer; return the steps that were taken."""
    steps = plan(observe())
    if not steps:
        say("docker engine: already answering, nothing to do")
    for step in steps:
        say(f"docker engine: {step}")
        if step == INSTALL:
            _install()
        elif step == START:
            _start()
        elif step == WAIT:
            _wait(timeout)
    return steps


def pid_we_started() -> int | None:
    """PID of the dockerd this module started, if it is still that process."""
    try:
        pid = int(STARTED_BY_US.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    return pid if comm == "dockerd" else None


def stop(say=print) -> bool:
    """Stop the engine only if we started it. Return whether one was stopped."""
    pid = pid_we_started()
    if pid is None:
        say("docker engine: not started by meshctl, leaving it alone")
        return False
    os.kill(pid, 15)
    STARTED_BY_US.unlink(missing_ok=True)
    say(f"docker engine: stopped dockerd {pid}")
    return True
