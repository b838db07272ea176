"""`meshctl render-node`: the NodeName= line and gres.conf lines meshctl would write for a machine,
from its saved outputs (lscpu, free, nvidia-smi, slurmd -C, a listing of /dev/nvidia*), read by the
parsers the roles use (plugins/module_utils/mesh_hw.py)."""

from __future__ import annotations

from meshctl import hardware, model

NODE_PROVIDERS = model.NODE_PROVIDERS  # what a node's provider may say (--provider)


def render(texts: dict[str, str | None], dev_text: str | None, name: str | None, addr: str | None,
           provider: str | None, reserve_mb: int) -> tuple[str, dict, dict]:  # fmt: skip
    """(the node's name, its hardware facts, its lines: ``node_line`` and ``gres_lines``). TEXTS:
    ``lscpu``, ``free``, ``nvidia_smi``, ``slurmd_c`` (None: not given). The name defaults to
    slurmd -C's, else ``node``; a name or address that is not one is refused."""
    device_files = hardware.mesh_hw().parse_dev_listing(dev_text) if dev_text is not None else None
    hw = hardware.facts_from_outputs(reserve_mb=reserve_mb, device_files=device_files, **texts)
    if name is None:
        name = "node"
        if texts.get("slurmd_c"):
            name = (hardware.mesh_hw().parse_slurmd_c(texts["slurmd_c"]).get("node_name") or name).lower()
    model.check_name(name)
    if addr is not None:
        addr = hardware.check_address(addr)
    return name, hw, hardware.render_node(name, addr, provider, hw)
