"""Checks a machine must pass, over SSH, before meshctl changes anything on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from meshctl import core, ssh

# Runs on the node with /bin/sh; prints key=value lines and changes nothing.
PROBE = r"""
echo "uid=$(id -u)"
if [ "$(id -u)" = 0 ]; then echo sudo=root; elif sudo -n true 2>/dev/null; then echo sudo=ok; else echo sudo=no; fi
if [ -r /etc/os-release ]; then . /etc/os-release; fi
echo "os_id=${ID:-unknown}"
echo "os_like=${ID_LIKE:-}"
echo "os_version=${VERSION_ID:-}"
echo "os_name=${PRETTY_NAME:-unknown}"
echo "arch=$(uname -m)"
echo "disk_free_mb=$(df -Pm / 2>/dev/null | awk 'NR==2 {print $4}')"
echo "pid1=$(cat /proc/1/comm 2>/dev/null)"
if [ -c /dev/net/tun ]; then echo tun=yes; else echo tun=no; fi
echo "python3=$(command -v python3 || true)"
echo "hostname=$(hostname 2>/dev/null)"
echo "slurm_policy=$(apt-cache policy slurmctld 2>/dev/null | grep -E 'Installed:|Candidate:' | tr -s ' \n' ' ')"
echo "dmi=$(cat /sys/class/dmi/id/sys_vendor /sys/class/dmi/id/product_name 2>/dev/null | tr '\n' ' ')"
for mark in $ENV_MARKS; do
  if env | grep -q "^$mark" || { [ -r /proc/1/environ ] && tr '\0' '\n' </proc/1/environ | grep -q "^$mark"; }; then
    echo "env_mark=$mark"
  fi
done
"""


def probe_script() -> str:
    """PROBE with the environment marks of the providers (a pod says RUNPOD_... in PID 1's environment)."""
    marks = " ".join(m for m in (_capabilities(p).marks["env"] for p in _providers()) if m)
    return f"ENV_MARKS='{marks}'\n" + PROBE


def _providers():
    return core.mesh_cloud.PROVIDERS


def _capabilities(provider: str):
    return core.mesh_cloud.capabilities(provider)


def packaged_slurm_major(facts: dict[str, str]) -> str | None:
    """The Slurm major release the machine has or would install ("22.05"), from the probe's
    ``apt-cache policy slurmctld`` line; None when its package lists know no Slurm."""
    versions = core.slurm_versions
    return versions.slurm_major(versions.apt_policy_version(facts.get("slurm_policy", "")))


SUPPORTED_OS = ("debian", "ubuntu")
SUPPORTED_ARCH = ("x86_64", "aarch64")
MIN_DISK_MB = 2048


@dataclass(frozen=True)
class Check:
    name: str
    value: str
    ok: bool
    hint: str = ""
    blocking: bool = True
    note: str = ""  # shown when the check passed (what pod mode gives and does not)


def parse_probe(text: str) -> dict[str, str]:
    facts = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.isidentifier():
            facts[key] = value.strip()
    return facts


def detect_provider(facts: dict[str, str]) -> str:
    """Best effort from what the machine says about itself (each provider's ``marks``); --provider overrides."""
    for provider in _providers():
        mark = _capabilities(provider).marks["env"]
        if mark and facts.get("env_mark") == mark:
            return provider
    words = f"{facts.get('dmi', '')} {facts.get('hostname', '')}".lower()
    for provider in _providers():
        if any(word in words for word in _capabilities(provider).marks["words"]):
            return provider
    return "generic"


def is_pod(facts: dict[str, str], provider: str | None = None) -> bool:
    """A container where the mesh's daemons cannot be systemd services (a pod): a pod provider's mark
    in PID 1's environment, ``--provider`` a pod provider, or neither systemd as PID 1 nor a TUN device."""
    no_systemd = facts.get("pid1") != "systemd" and facts.get("tun") == "no"
    pods = [p for p in _providers() if _capabilities(p).pod]
    return detect_provider(facts) in pods or provider in pods or no_systemd


# What pod mode gives and does not give, for the preflight table and the README.
POD_LIMITS = (
    "munged, slurmd and tailscaled run under supervisor (meshctl-pod-start restarts them after the "
    "pod restarts); Tailscale in userspace mode, Slurm's connections out through its SOCKS5 proxy; "
    "no kernel NFS mount (use MLflow's artifact store, or copy data to local disk)"
)


def evaluate(facts: dict[str, str], user: str, pod: bool = False) -> list[Check]:
    checks = []
    sudo = facts.get("sudo", "no")
    checks.append(
        Check(
            "root or sudo",
            {"root": "root", "ok": "passwordless sudo"}.get(sudo, "no passwordless sudo"),
            sudo in ("root", "ok"),
            f"give {user} passwordless sudo: echo '{user} ALL=(ALL) NOPASSWD:ALL' | sudo tee /etc/sudoers.d/meshctl",
        )
    )
    os_id, os_like = facts.get("os_id", "unknown"), facts.get("os_like", "")
    checks.append(
        Check(
            "Debian or Ubuntu",
            facts.get("os_name", os_id),
            os_id in SUPPORTED_OS or "debian" in os_like.split(),
            "meshctl's roles support Debian 12/13 and Ubuntu 22.04/24.04",
        )
    )
    arch = facts.get("arch", "unknown")
    checks.append(Check("architecture", arch, arch in SUPPORTED_ARCH, f"supported: {', '.join(SUPPORTED_ARCH)}"))
    disk = facts.get("disk_free_mb", "")
    disk_ok = disk.isdigit() and int(disk) >= MIN_DISK_MB
    checks.append(Check("free disk on /", f"{disk or '?'} MB", disk_ok, f"free at least {MIN_DISK_MB} MB on /"))
    pid1 = facts.get("pid1", "?")
    if pod:
        checks.append(Check("pod mode", f"yes (PID 1 is {pid1})", True, blocking=False, note=POD_LIMITS))
    else:
        checks.append(
            Check(
                "systemd as PID 1",
                pid1,
                pid1 == "systemd",
                "munged, slurmd and tailscaled run as systemd services here; a container without systemd "
                "joins in pod mode (pass --provider runpod): its daemons run under supervisor",
            )
        )
    checks.append(
        Check(
            "/dev/net/tun",
            facts.get("tun", "?"),
            facts.get("tun") == "yes",
            "without TUN Tailscale runs in userspace mode: reachable, and Slurm reaches out through its "
            "SOCKS5 proxy; no kernel NFS, and NCCL between such nodes is slow",
            blocking=False,
        )
    )
    checks.append(
        Check("python3", facts.get("python3") or "missing", bool(facts.get("python3")), "apt-get install python3")
    )
    return checks


@dataclass
class Preflight:
    reachable: bool
    checks: list[Check]
    facts: dict[str, str]
    error: tuple[str, str] | None = None
    pod: bool = False
    answered: bool = True  # False: nothing answered at the address (refused, timed out): the unreachable outcome

    @property
    def passed(self) -> bool:
        return self.reachable and all(c.ok for c in self.checks if c.blocking)


def run(
    argv: list[str],
    user: str,
    host: str,
    port: int,
    known_hosts: Path | None = None,
    provider: str | None = None,
    timeout: int = ssh.CONNECT_TIMEOUT,
) -> Preflight:
    result = ssh.run(argv, "/bin/sh -s", stdin=probe_script(), timeout=timeout + 30)
    if result.rc == 255:
        error = ssh.explain_failure(result.stderr, user, host, port, known_hosts)
        return Preflight(False, [], {}, error, answered=not ssh.not_answered(result.stderr))
    facts = parse_probe(result.stdout)
    pod = is_pod(facts, provider)
    return Preflight(True, evaluate(facts, user, pod), facts, pod=pod)
