"""SSH host keys of the mesh's nodes, kept in the mesh's own ``known_hosts``.

meshctl records a node's host key the first time it connects (``StrictHostKeyChecking=accept-new``)
and refuses a different one afterwards: a re-rented machine at the same address, or someone in
between. It never trusts a new key by itself; it names the node, the recorded and the offered
fingerprints, and the command that accepts the new key (``meshctl forget-host-key NODE``).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from meshctl.errors import InventoryError

# What OpenSSH says when the key differs from the recorded one, and what Mitogen says instead
# (meshctl records unknown keys before a Mitogen run, so there it means a changed key too).
CHANGED_MARKERS = (
    "remote host identification has changed",
    "host key verification failed",
    "reported an unrecognized or mismatching host key",
)
# `ssh-keygen -l -f FILE` lines: "256 SHA256:abc... comment (ED25519)"; `ssh-keygen -l -F HOST`
# lines: "HOST ED25519 SHA256:abc...".
_FINGERPRINT = re.compile(r"^\d+\s+(?P<sha>SHA256:[A-Za-z0-9+/=]+)\s+.*\((?P<kind>[A-Za-z0-9-]+)\)\Z")
_RECORDED = re.compile(r"^\S+\s+(?P<kind>[A-Za-z0-9-]+)\s+(?P<sha>SHA256:[A-Za-z0-9+/=]+)\Z")


@dataclass(frozen=True)
class Fingerprint:
    kind: str  # ED25519, ECDSA, RSA
    sha256: str

    def __str__(self) -> str:
        return f"{self.kind} {self.sha256}"


def is_changed_key(ssh_said: str) -> bool:
    """True when OpenSSH refused a host key that differs from the recorded one."""
    low = ssh_said.lower()
    return any(marker in low for marker in CHANGED_MARKERS)


def parse_fingerprints(text: str) -> list[Fingerprint]:
    """Fingerprints from ``ssh-keygen -l`` output (other lines, such as ``# Host ... found``, are skipped)."""
    found = []
    for line in text.splitlines():
        match = _FINGERPRINT.match(line.strip()) or _RECORDED.match(line.strip())
        if match and not line.startswith("#"):
            found.append(Fingerprint(match.group("kind").upper(), match.group("sha")))
    return found


def known_hosts_name(host: str, port: int) -> str:
    """How known_hosts names a host: ``host``, or ``[host]:port`` off port 22."""
    return host if port == 22 else f"[{host}]:{port}"


def _run(argv: list[str], stdin: str | None = None, timeout: float = 15) -> str:
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    # ssh-keygen -F exits 1 when no key is recorded, ssh-keyscan when none answered: no key either way.
    return done.stdout if done.returncode in (0, 1) else ""


def recorded(known_hosts: Path, host: str, port: int) -> list[Fingerprint]:
    """The fingerprints known_hosts holds for HOST:PORT."""
    if not Path(known_hosts).is_file():
        return []
    return parse_fingerprints(_run(["ssh-keygen", "-l", "-F", known_hosts_name(host, port), "-f", str(known_hosts)]))


def offered(host: str, port: int) -> list[Fingerprint]:
    """The fingerprints the machine at HOST:PORT offers now (ssh-keyscan; nothing is recorded)."""
    keys = _run(["ssh-keyscan", "-T", "5", "-p", str(port), "--", host])
    return parse_fingerprints(_run(["ssh-keygen", "-l", "-f", "-"], stdin=keys)) if keys else []


def describe_change(name: str, host: str, port: int, known_hosts: Path, node: bool = True) -> tuple[str, str]:
    """(what happened, what to do) for a machine whose host key changed, with both fingerprints;
    ``node``: NAME is a node of the mesh (else a machine being added, which forget-host-key cannot name)."""
    before = recorded(known_hosts, host, port)
    now = offered(host, port)
    kinds = {f.kind for f in before}
    now_same_kind = [f for f in now if f.kind in kinds] or now
    was = ", ".join(map(str, before)) or "unknown"
    offers = ", ".join(map(str, now_same_kind)) or "nothing (no answer to ssh-keyscan)"
    accept = (f"`meshctl forget-host-key {name}`" if node else
              f"`ssh-keygen -R '{known_hosts_name(host, port)}' -f {known_hosts}`")  # fmt: skip
    return (
        f"{name} ({host}:{port}) offers another SSH host key: recorded {was}, offered now {offers}",
        f"if {name} was re-rented or rebuilt, accept the new key with {accept} and run "
        "the command again; if not, someone may be between you and it: do not go on",
    )


def forget(known_hosts: Path, host: str, port: int) -> list[Fingerprint]:
    """Remove HOST:PORT's keys from known_hosts; return the fingerprints removed."""
    gone = recorded(known_hosts, host, port)
    if gone:
        name = known_hosts_name(host, port)
        done = subprocess.run(["ssh-keygen", "-R", name, "-f", str(known_hosts)], capture_output=True, text=True,
                              check=False)  # fmt: skip
        old = Path(f"{known_hosts}.old")  # ssh-keygen's backup: the key is forgotten, not kept aside
        old.unlink(missing_ok=True)
        if done.returncode != 0 or recorded(known_hosts, host, port):
            said = (done.stderr or done.stdout or f"exit {done.returncode}").strip().splitlines()
            raise InventoryError(
                f"{known_hosts} still holds {name}'s key: ssh-keygen -R refused ({said[-1] if said else 'no words'})",
                hint=f"correct or delete the line ssh-keygen names in {known_hosts} (every other line is a "
                "host key of the mesh's nodes), then run the command again",
            )
    return gone


# A public host key as known_hosts holds it after the name: its type and its base64, nothing else.
_PUBLIC_KEY = re.compile(
    r"^(?:ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(?:256|384|521)|sk-[a-z0-9@.-]+) [A-Za-z0-9+/]+={0,2}\Z"
)


def keys_of(known_hosts: Path, host: str, port: int) -> list[str]:
    """The public keys (``TYPE BASE64``) known_hosts holds for HOST:PORT."""
    if not Path(known_hosts).is_file():
        return []
    lines = _run(["ssh-keygen", "-F", known_hosts_name(host, port), "-f", str(known_hosts)]).splitlines()
    keys = [" ".join(line.split()[1:3]) for line in lines if line and not line.startswith("#") and " " in line]
    return [key for key in keys if _PUBLIC_KEY.fullmatch(key)]


def is_public_key(text: object) -> bool:
    return isinstance(text, str) and bool(_PUBLIC_KEY.fullmatch(text))


def record(known_hosts: Path, host: str, port: int, keys: list[str]) -> int:
    """Make KEYS (``TYPE BASE64`` each, checked) the keys known_hosts holds for HOST:PORT."""
    keys = [key for key in keys if is_public_key(key)]
    if not keys:
        return 0
    forget(known_hosts, host, port)
    with open(known_hosts, "a", encoding="utf-8") as handle:
        handle.writelines(f"{known_hosts_name(host, port)} {key}\n" for key in keys)
    return len(keys)


def carry(known_hosts: Path, old: tuple[str, int], new: tuple[str, int]) -> int:
    """Record under NEW (host, port) the keys known_hosts holds for OLD: a rented machine its
    provider moved to another address or port keeps its host keys, and SSH then still refuses a
    machine at the new address that cannot show one of them. Returns how many keys were carried."""
    return record(known_hosts, *new, keys_of(known_hosts, *old))
