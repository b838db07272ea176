"""The test bed's package cache: Debian's apt-cacher-ng on this machine, for the Docker nodes.

Every mesh the demo and the tests make installs the same Debian packages on every node. With
the cache, a package crosses the network once per machine: the first node that asks fills it,
the others (and the next run's) read it from this machine's disk.

The nodes find it by themselves: the test images (:mod:`meshctl.localmesh.images`) carry an apt
setting, ``Acquire::http::Proxy-Auto-Detect``, whose script names the node's default gateway (this
machine, on every Docker network) on :data:`PORT` when something answers there, and ``DIRECT``
otherwise. A node with no cache running goes to the mirror itself; a user's own machines never
carry that setting (it is in the test images only).

Like :mod:`meshctl.localmesh.engine`, the decision is a pure function of what was observed
(:func:`plan`); :func:`ensure` observes and carries it out. Only a process this module started
(its PID recorded in :data:`STARTED_BY_US`) is ever stopped.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from meshctl.errors import EnvironmentProblem
from meshctl.localmesh import engine

# Our own port, beside the package's default (3142): a machine may run apt-cacher-ng for itself,
# set up for mirrors this one cannot reach.
PORT = 3143
BINARY = "/usr/sbin/apt-cacher-ng"
USER = "apt-cacher-ng"
CONFIG_DIR = Path("/var/lib/meshctl-testbed/apt-cacher-ng")  # ours: the package's /etc files untouched
CACHE_DIR = Path("/var/cache/apt-cacher-ng")
LOG_DIR = Path("/var/log/apt-cacher-ng")
RUN_DIR = Path("/run/meshctl-apt-cacher-ng")
STARTED_BY_US = RUN_DIR / "pid"

INSTALL = "install"
CONFIGURE = "configure"
START = "start"
WAIT = "wait"


@dataclass(frozen=True)
class CacheState:
    answering: bool  # something accepts connections on PORT
    installed: bool  # the apt-cacher-ng binary is there
    configured: bool  # our configuration is there and current
    is_root: bool


def plan(state: CacheState) -> list[str]:
    """The steps that make the cache answer, in order; [] when it already does."""
    if state.answering:
        return []
    if not state.is_root:
        raise EnvironmentProblem(
            f"no package cache answers on port {PORT} and starting one needs root",
            hint="run as root, or run `make test` without it: nodes then download from the mirror",
        )
    steps = [] if state.installed else [INSTALL]
    if not state.configured or not state.installed:
        steps.append(CONFIGURE)
    return [*steps, START, WAIT]


def config_text(mirror: str) -> dict[str, str]:
    """Our configuration files: the mirror the nodes name is the one asked (Debian's own list
    of mirrors would send requests to ftp.debian.org, which a machine may not reach)."""
    mirror = mirror.rstrip("/") + "/"
    return {
        "acng.conf": "\n".join(
            [
                "# Written by meshctl's test bed (meshctl/localmesh/cache.py).",
                f"CacheDir: {CACHE_DIR}",
                f"LogDir: {LOG_DIR}",
                "SupportDir: /usr/lib/apt-cacher-ng",
                f"Port: {PORT}",
                "Remap-debrep: file:deb_mirror*.gz /debian ; file:backends_debian",
                "Remap-secdeb: security.debian.org deb.debian.org/debian-security /debian-security"
                " ; deb.debian.org/debian-security",
                "ExThreshold: 4",
                "",
            ]
        ),
        "backends_debian": mirror + "\n",
    }


def answering(port: int = PORT) -> bool:
    """Whether something accepts connections on PORT of this machine."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _configured(mirror: str) -> bool:
    return all(
        (CONFIG_DIR / name).is_file() and (CONFIG_DIR / name).read_text() == text
        for name, text in config_text(mirror).items()
    )


def observe(mirror: str) -> CacheState:
    return CacheState(
        answering=answering(),
        installed=Path(BINARY).is_file(),
        configured=_configured(mirror),
        is_root=os.geteuid() == 0,
    )


def _install() -> None:
    # Where an init runs, the package's postinst may start its own service: it listens on 3142 with
    # the package's settings, beside ours on PORT.
    engine.apt_install("apt-cacher-ng", hint="install it by hand (apt-get install apt-cacher-ng), or go on without it")


def _configure(mirror: str) -> None:
    CONFIG_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in config_text(mirror).items():
        (CONFIG_DIR / name).write_text(text)
    for folder in (CACHE_DIR, LOG_DIR, RUN_DIR):
        folder.mkdir(parents=True, exist_ok=True)
        shutil.chown(folder, USER, USER)


def _start() -> None:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    shutil.chown(RUN_DIR, USER, USER)
    result = subprocess.run(
        ["runuser", "-u", USER, "--", BINARY, "-c", str(CONFIG_DIR), "ForeGround=0",
         f"pidfile={STARTED_BY_US}", f"SocketPath={RUN_DIR / 'socket'}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise EnvironmentProblem(
            f"apt-cacher-ng did not start: {(result.stdout + result.stderr).strip()[-400:]}",
            hint=f"read {LOG_DIR}/apt-cacher.err",
        )


def _wait(timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if answering():
            return
        time.sleep(0.5)
    raise EnvironmentProblem(
        f"apt-cacher-ng did not answer on port {PORT} within {timeout:.0f}s",
        hint=f"read {LOG_DIR}/apt-cacher.err",
    )


def ensure(mirror: str, timeout: float = 30.0, say=print) -> list[str]:
    """Make the package cache answer on PORT; return the steps that were taken."""
    steps = plan(observe(mirror))
    if not steps:
        say(f"package cache: already answering on port {PORT}")
    for step in steps:
        say(f"package cache: {step}")
        if step == INSTALL:
            _install()
        elif step == CONFIGURE:
            _configure(mirror)
        elif step == START:
            _start()
        elif step == WAIT:
            _wait(timeout)
    return steps


def stop(say=print) -> bool:
    """Stop the cache only if this module started it."""
    try:
        pid = int(STARTED_BY_US.read_text().strip())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        say("package cache: not started by meshctl, leaving it alone")
        return False
    if comm != "apt-cacher-ng":
        return False
    os.kill(pid, 15)
    say(f"package cache: stopped apt-cacher-ng {pid}")
    return True


def usage() -> str:
    """How much the cache holds, for the suite's log ("du -sh")."""
    result = subprocess.run(["du", "-sh", str(CACHE_DIR)], capture_output=True, text=True, check=False)
    return result.stdout.split()[0] if result.returncode == 0 and result.stdout else "?"


def traffic(log: str) -> tuple[int, int]:
    """Bytes fetched from the mirror and bytes served to the nodes, from apt-cacher-ng's
    transfer log (lines ``TIME|I|BYTES|CLIENT|PATH`` for a download from the mirror,
    ``TIME|O|BYTES|CLIENT|PATH`` for what a node was sent)."""
    fetched = served = 0
    for line in log.splitlines():
        fields = line.split("|")
        if len(fields) < 4 or not fields[2].isdigit():
            continue
        if fields[1] == "I":
            fetched += int(fields[2])
        elif fields[1] == "O":
            served += int(fields[2])
    return fetched, served


def summary() -> str:
    """One line for the suite's log: what the nodes were sent and what crossed the network."""
    try:
        log = (LOG_DIR / "apt-cacher.log").read_text(errors="replace")
    except OSError:
        return "package cache: no transfer log"
    fetched, served = traffic(log)
    mib = 1024 * 1024
    return (
        f"package cache: {served / mib:.0f} MiB sent to the nodes, {fetched / mib:.0f} MiB of it "
        f"fetched from the mirror (all runs on this machine since its log began)"
    )
