# Copyright: meshctl contributors; Apache-2.0
"""Filters of the roles for ``tailscale_status``: thin adapters of the shared core
(``plugins/module_utils/mesh_tailscale_status.py``, which meshctl imports too)."""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_tailscale_status import (
    auth_key_kind,
    tailscale_ip4,
    tailscale_join_action,
    tailscale_peer_path,
    tailscale_status,
)


class FilterModule:
    def filters(self):
        return {
            "tailscale_status": tailscale_status,
            "tailscale_ip4": tailscale_ip4,
            "tailscale_peer_path": tailscale_peer_path,
            "tailscale_join_action": tailscale_join_action,
            "auth_key_kind": auth_key_kind,
        }
