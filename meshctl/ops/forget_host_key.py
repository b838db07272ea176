"""`meshctl forget-host-key`: accept that a node's machine changed (re-rented, rebuilt at the same
address): the key recorded for it is forgotten, so the next run records the one it offers now.
Only the mesh's own known_hosts changes."""

from __future__ import annotations

from meshctl import hostkeys
from meshctl.model import Node, node_named
from meshctl.ops import work


def forget(mesh_dir: str | None, name: str, wait: float = 0.0) -> tuple[Node, list]:
    """(NAME's node, the keys forgotten: [] when none was recorded)."""
    with work.changing(mesh_dir, f"forget-host-key {name}", wait) as w:
        node = node_named(w.nodes, name)
        return node, hostkeys.forget(w.mesh.known_hosts, node.host, node.port)
