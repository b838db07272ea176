"""`meshctl forget-host-key`: accept that a node's machine changed (re-rented, rebuilt at the same
address): the key recorded for it is forgotten, so the next run records the one it offers now.
Only the mesh's own known_hosts changes."""

from __future__ import annotations

from meshctl import hostkeys
from meshctl.model import Node, node_named
from meshctl.ops.work import Work


def forget(w: Work, name: str) -> tuple[Node, list]:
    """(NAME's node, the keys forgotten: [] when none was recorded)."""
    node = node_named(w.nodes, name)
    return node, hostkeys.forget(w.mesh.known_hosts, node.host, node.port)
