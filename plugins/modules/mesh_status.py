#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Read a node's meshctl services in one round trip, for `meshctl status`."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_status
short_description: Read the state of a node's mesh services in one round trip
version_added: "0.9.0"
description:
  - Asks, in one module run, what C(meshctl status) needs to know of a node. The state of its
    daemons (systemd, or supervisor on a pod), every node's state in Slurm as C(sinfo) prints it,
    C(tailscale status --json), the shared folder's mount, and a tracking server's health URL.
  - Reads only, never changes the node. Runs the same in check mode.
  - Returns raw observations, each capped in size; the C(meshctl.mesh.node_status) filter parses
    and judges them on the control machine.
options:
  services:
    description: Units whose state to read, as C(systemctl is-active) prints it.
    type: list
    elements: str
    default: []
  supervisor:
    description: Read the services from supervisor (C(meshctl-pod-start --is-active)) instead of systemd.
    type: bool
    default: false
  sinfo:
    description: >-
      Read every node's state, GRES and reason in Slurm (C(sinfo --Node)), and its address (NodeAddr);
      the controller's view.
    type: bool
    default: false
  tailscale:
    description: Read C(tailscale status --json).
    type: bool
    default: false
  mount_path:
    description:
      - The shared folder's mount point; reports C(mounted), C(not-mounted) (in fstab, the kernel
        could mount it), C(fstab-only) (in fstab, this kernel has no NFS) or C(missing).
    type: path
  mount_possible:
    description: Whether this node's kernel may mount NFS at all (false on a pod).
    type: bool
    default: true
  share_id:
    description:
      - The head's share identity. With it, the mount is reported as C(shared) (the folder's
        O(share_marker) holds it), C(not-the-heads) (something is mounted there, or the kernel could
        mount it, but the folder is not the head's), C(fstab-only) or C(missing).
    type: str
  share_marker:
    description: The name of the file in the shared folder that holds the head's share identity.
    type: str
    default: .meshctl-share
  url:
    description: An HTTP URL to GET (a tracking server's C(/health)); its status and body are reported.
    type: str
  rented:
    description:
      - The head's folder of its records of the burst pool machines it rented (C(<node>.json), root's);
        each is returned as text (at most 64, 4 KiB each), none opened through a link.
    type: path
  ended:
    description:
      - The head's folder of the power program's records of the rented machines that ended
        (C(<node>.json), lost or given back); each is returned as text, as O(rented)'s are.
    type: path
  timeout:
    description: Seconds each command and the URL may take.
    type: int
    default: 5
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Read the head's services
  meshctl.mesh.mesh_status:
    services: [munge, slurmctld, slurmd]
    sinfo: true
    tailscale: true
    url: http://100.100.0.1:5000/health
  register: probe

- name: Judge them
  ansible.builtin.set_fact:
    mesh_status: "{{ probe.status | meshctl.mesh.node_status(expect) }}"
"""

RETURN = r"""
status:
  description: What was read; a part not asked for is null.
  returned: always
  type: dict
  contains:
    services:
      description: Each service and its state (C(active), C(inactive), C(failed), C(unknown), ...).
      type: dict
    sinfo:
      description: >-
        C(rc) and C(stdout) of C(sinfo --noheader --Node --format=%N|%T|%G|%E) (name, state, GRES, reason),
        and C(addresses), C(rc) and C(stdout) of C(sinfo --noheader --Node --format=%N|%o) (name, NodeAddr).
      type: dict
    tailscale:
      description: C(rc) and C(stdout) of C(tailscale status --json).
      type: dict
    mount:
      description: C(mounted), C(not-mounted), C(fstab-only) or C(missing).
      type: str
    http:
      description: C(status) (0 when nothing answered) and C(body) of the URL.
      type: dict
    rented:
      description: Each record of O(rented) as text, by node name.
      type: dict
    ended:
      description: Each record of O(ended) as text, by node name.
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_status_read import read


def main():
    module = AnsibleModule(
        argument_spec={
            "services": {"type": "list", "elements": "str", "default": []},
            "supervisor": {"type": "bool", "default": False},
            "sinfo": {"type": "bool", "default": False},
            "tailscale": {"type": "bool", "default": False},
            "mount_path": {"type": "path"},
            "mount_possible": {"type": "bool", "default": True},
            "share_id": {"type": "str"},
            "share_marker": {"type": "str", "default": ".meshctl-share"},
            "url": {"type": "str"},
            "rented": {"type": "path"},
            "ended": {"type": "path"},
            "timeout": {"type": "int", "default": 5},
        },
        supports_check_mode=True,
    )
    status = read(module.params)
    module.exit_json(changed=False, status=status)


if __name__ == "__main__":
    main()
