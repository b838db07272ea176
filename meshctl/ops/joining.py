"""What `init` (the head) and `add-node` share: a machine about to join, its preflight over SSH,
its node name and its mesh address. Nothing is written until the operation decides."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

import netaddr

from meshctl import preflight, runner, ssh
from meshctl.errors import PreflightError, UsageError, unreachable
from meshctl.mesh import Mesh
from meshctl.model import Target


def mesh_address_for(host: str, given: str | None) -> str:
    """The address Slurm and NFS use: --mesh-address, else the SSH address as IPv4.

    Until the node joins the tailnet (the tailscale role then reports its tailnet IP), the SSH
    address must be one the other nodes can reach.
    """
    if given:
        try:
            return str(netaddr.IPAddress(given, version=4))
        except (netaddr.AddrFormatError, ValueError):
            raise UsageError(f"--mesh-address {given!r} is not an IPv4 address") from None
    try:
        return str(netaddr.IPAddress(host, version=4))
    except (netaddr.AddrFormatError, ValueError):
        pass
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except OSError:
        raise UsageError(f"cannot resolve {host} to an IPv4 address", hint="pass --mesh-address ADDR") from None


def sanitize_name(hostname: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", hostname.split(".")[0].lower()).strip("-")[:63]
    return name.strip("-")


@dataclass
class PreflightReport:
    target: Target
    result: preflight.Preflight
    provider: str
    name: str | None = None


def run_preflight(mesh: Mesh, target: Target, ssh_key: str | None, provider: str | None,
                  timeout: int = ssh.CONNECT_TIMEOUT) -> PreflightReport:  # fmt: skip
    """TARGET's preflight over SSH (TIMEOUT: seconds SSH waits for it to answer)."""
    argv = ssh.ssh_argv(target.host, target.user, target.port, ssh_key, mesh.known_hosts, timeout=timeout)
    result = preflight.run(argv, target.user, target.host, target.port, mesh.known_hosts, provider=provider,
                           timeout=timeout)  # fmt: skip
    if not result.reachable:
        what, fix = result.error
        if not result.answered:  # one outcome for a machine that does not answer, in every command (exit 7)
            where = f"{target.user}@{target.host}:{target.port}"
            raise unreachable("nothing was changed", {where: what}, runner.again(), todos={where: fix})
        raise PreflightError(what, hint=fix)
    chosen = provider or preflight.detect_provider(result.facts)
    return PreflightReport(target, result, chosen)


def require_passed(report: PreflightReport) -> None:
    failed = [c for c in report.result.checks if c.blocking and not c.ok]
    if failed:
        first = failed[0]
        names = ", ".join(c.name for c in failed)
        raise PreflightError(
            f"{report.target.user}@{report.target.host} failed preflight ({names}): {first.name} is {first.value}",
            hint=first.hint,
        )
