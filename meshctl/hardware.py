"""Hardware facts to Slurm lines, exactly as the roles compute them.

The parsers are the ones the ``mesh_hw_facts`` module runs on nodes
(``plugins/module_utils/mesh_hw.py``, imported as the collection's package, one copy), and
the lines come from the filters roles slurm_controller and slurm_node render Slurm's files with
(``plugins/module_utils/mesh_slurm_nodes.py``: ``slurm_node_line``, ``slurm_gres_lines``).
"""

from __future__ import annotations

from types import ModuleType

import netaddr

from meshctl import core
from meshctl.errors import ParseError, UsageError


def mesh_hw() -> ModuleType:
    return core.mesh_hw


def slurm_nodes() -> ModuleType:
    return core.slurm_nodes


def check_address(addr: str) -> str:
    try:
        return str(netaddr.IPAddress(addr, version=4))
    except (netaddr.AddrFormatError, ValueError):
        raise UsageError(
            f"{addr!r} is not an IPv4 address", hint="pass the node's tailnet IPv4, e.g. 100.101.1.7"
        ) from None


def facts_from_outputs(
    lscpu: str | None,
    free: str | None,
    slurmd_c: str | None = None,
    nvidia_smi: str | None = None,
    reserve_mb: int | None = None,
    device_files: list[str] | None = None,
) -> dict:
    hw = mesh_hw()
    try:
        return hw.node_facts(
            lscpu=lscpu,
            free=free,
            slurmd_c=slurmd_c,
            nvidia_smi=nvidia_smi,
            device_files=device_files,
            reserve_mb=reserve_mb,
        )
    except hw.HwParseError as exc:
        raise ParseError(str(exc), hint="pass the unedited output of the command named") from None


def render_node(name: str, addr: str | None, provider: str | None, hw: dict) -> dict:
    node = {"name": name, "addr": addr, "provider": provider, "hw": hw}
    lines = slurm_nodes()
    return {"node_line": lines.slurm_node_line(node), "gres_lines": lines.slurm_gres_lines(node)}
