"""Plain SSH to nodes (preflight, status, drain): OpenSSH with batch mode and the mesh's known_hosts."""

from __future__ import annotations

import math
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from meshctl import hostkeys

CONNECT_TIMEOUT = 10


@dataclass(frozen=True)
class SshResult:
    rc: int
    stdout: str
    stderr: str


def ssh_argv(
    host: str, user: str, port: int, key: str | None, known_hosts: Path, timeout: int = CONNECT_TIMEOUT
) -> list[str]:
    argv = [
        "ssh",
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={timeout}",
        "-o", "StrictHostKeyChecking=accept-new",
        "-o", f'UserKnownHostsFile="{known_hosts}"',  # quoted for ssh: a path may hold spaces
        "-o", "LogLevel=ERROR",
        "-p", str(port),
    ]  # fmt: skip
    if key:
        argv += ["-i", key, "-o", "IdentitiesOnly=yes"]
    return [*argv, "--", f"{user}@{host}"]  # `--`: nothing from a record can become an ssh option


def whole_seconds(timeout: float) -> int:
    """SSH's ConnectTimeout (and Ansible's) for a wait of TIMEOUT seconds: they count whole seconds."""
    return max(1, math.ceil(timeout))


def effective(host: str, user: str, port: int) -> dict[str, str] | None:
    """What ``ssh`` does for USER@HOST:PORT by its own configuration (``ssh -G``: a Host alias's
    HostName, a Port or a proxy set there, the key exchanges it offers); None when it cannot say."""
    try:
        done = subprocess.run(["ssh", "-G", "-p", str(port), "-l", user, "--", host], capture_output=True, text=True,
                              timeout=5, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return config_of(done.stdout) if done.returncode == 0 else None


def config_of(text: str) -> dict[str, str]:
    """``ssh -G``'s output as {keyword: value}."""
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


def connects_to(said: dict[str, str] | None) -> tuple[str, int] | None:
    """(hostname, port) ssh opens its TCP connection to by SAID (``config_of``), None when SAID names
    a proxy (the TCP connection is then the proxy's) or lacks either."""
    if not said or said.get("proxycommand", "none") != "none" or said.get("proxyjump", "none") != "none":
        return None
    try:
        return said["hostname"], int(said["port"])
    except (KeyError, ValueError):
        return None


# OpenSSH's sntrup761 exchange costs the client about 70 ms of CPU per connection (its key
# generation): most of a `status` of 16 nodes on two cores, where curve25519 costs under 1 ms.
SLOW_KEX = "sntrup761x25519-sha512"


def fast_kex_first(said: dict[str, str] | None) -> str | None:
    """KexAlgorithms for a connection whose traffic carries no secret (a status read): the same
    algorithms ssh offers by SAID, sntrup761's last; ML-KEM, where both ends have it, stays first.
    None when the order would not change (or SAID does not say)."""
    offered = [a for a in ((said or {}).get("kexalgorithms") or "").split(",") if a]
    slow = [a for a in offered if a.startswith(SLOW_KEX)]
    order = [a for a in offered if a not in slow] + slow
    return ",".join(order) if order != offered else None


def silent(host: str, port: int, timeout: float) -> bool:
    """Whether HOST:PORT took no TCP connection within TIMEOUT seconds: a machine that is off or cut
    off (a stopped one drops the handshake), told sooner than SSH's whole seconds. A refusal, no
    route or a name not resolved is not silence: SSH says those itself, at once."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return False
    except TimeoutError:
        return True
    except OSError:
        return False


def run(argv: list[str], command: str, stdin: str | None = None, timeout: float = 60) -> SshResult:
    try:
        result = subprocess.run(
            [*argv, command], input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return SshResult(255, "", f"no answer within {timeout:.0f}s")
    return SshResult(result.returncode, result.stdout, result.stderr)


def learn_host_keys(targets: list[tuple[str, str, int, str | None]], known_hosts: Path) -> None:
    """First contact with each (host, user, port, key): OpenSSH records its host key (accept-new).

    Mitogen asks ssh for ``StrictHostKeyChecking yes`` ahead of meshctl's ``accept-new``, so a node
    whose key known_hosts lacks (first run after ``init --no-check``, or after ``forget-host-key``)
    gets it recorded here, as plain Ansible's first connection would. A node that does not answer
    is left to the run, which reports it; a changed key is never replaced (known_hosts has one).
    """
    if not targets:
        return

    def contact(target: tuple[str, str, int, str | None]) -> None:
        host, user, port, key = target
        run(ssh_argv(host, user, port, key, known_hosts), "true", timeout=CONNECT_TIMEOUT + 5)

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(targets)))) as pool:
        list(pool.map(contact, targets))


def not_answered(stderr: str) -> bool:
    """SSH's words for a machine that did not answer at all (refused, timed out, no route): the
    unreachable outcome, where a key refused or a name unknown is the user's to fix."""
    low = stderr.lower()
    return any(word in low for word in ("connection refused", "timed out", "no answer", "no route"))


def explain_failure(
    stderr: str, user: str, host: str, port: int, known_hosts: Path | None = None, name: str | None = None
) -> tuple[str, str]:
    """(what went wrong, what to do) for an SSH connection that failed (rc 255)."""
    text = stderr.strip()
    if known_hosts is not None and hostkeys.is_changed_key(text):
        return hostkeys.describe_change(name or host, host, port, known_hosts, node=name is not None)
    low = text.lower()
    if "connection refused" in low:
        return (f"{host}:{port} refused the connection", f"check that sshd listens on port {port} of {host}")
    if "timed out" in low or "no answer" in low or "no route" in low:
        return (f"{host}:{port} did not answer", "check the address, the port and any firewall in between")
    if "could not resolve" in low or "name or service not known" in low:
        return (f"cannot resolve {host}", "use an IP address or a name this machine can resolve")
    if "permission denied" in low:
        return (
            f"{user}@{host} did not accept the SSH key",
            f"add your public key to ~{user}/.ssh/authorized_keys on {host}, or pass --ssh-key FILE",
        )
    if "host key verification failed" in low or "remote host identification has changed" in low:
        return (
            f"{host}'s host key differs from the one recorded",
            "if the machine was rebuilt, remove its line from the mesh's known_hosts and retry",
        )
    return (f"SSH to {user}@{host}:{port} failed: {text[-300:]}", "check that `ssh` to this machine works by hand")
