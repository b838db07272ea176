#!/usr/bin/python
# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Measure the links between mesh nodes with iperf3, for `meshctl doctor`."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mesh_netprobe
short_description: Measure throughput and round-trip time to other mesh nodes with iperf3
version_added: "0.10.0"
description:
  - C(action=serve) starts an iperf3 server on this node for the measurements of C(meshctl doctor),
    bound to O(bind) (the node's mesh address; every address only when that one is no address of
    this node, as a NATed public address without a tailnet), run as an unprivileged user (never
    root), and ended by itself after O(lifetime) seconds should nothing stop it (the run
    interrupted). C(action=stop) stops it again (its process group, after checking the PID file
    names an iperf3 of ours).
  - C(action=measure) runs one iperf3 client per target, one after the other, over the target's
    mesh address, and reports each link's throughput (bits per second received) and the mean
    TCP round-trip time iperf3 saw; it also reads C(tailscale status --json) (when asked), so
    the control machine can tell whether each link is direct, relayed or through userspace.
  - Leaves nothing behind after C(stop). In check mode it does nothing and reports nothing.
options:
  action:
    description: What to do.
    type: str
    choices: [serve, stop, measure]
    required: true
  port:
    description: The iperf3 server's TCP port.
    type: int
    default: 5201
  seconds:
    description: How long each measurement lasts.
    type: int
    default: 2
  targets:
    description: The nodes to measure to (C(measure)), name to mesh address, measured in this order.
    type: dict
    default: {}
  tailscale:
    description: Read C(tailscale status --json) (C(measure)).
    type: bool
    default: false
  bind:
    description: The address the server listens on (C(serve)); empty for every address.
    type: str
    default: ""
  user:
    description: The unprivileged user (UID) the server runs as (C(serve)); 65534 is C(nobody).
    type: int
    default: 65534
  lifetime:
    description: Seconds after which the server ends by itself (C(serve)).
    type: int
    default: 900
  pidfile:
    description: The server's PID file (written by this module, as root).
    type: path
    default: /run/meshctl-iperf3.pid
author:
  - meshctl contributors (@meshctl)
"""

EXAMPLES = r"""
- name: Serve iperf3 while the doctor runs, on the mesh address only, as nobody
  meshctl.mesh.mesh_netprobe:
    action: serve
    bind: 100.64.0.2

- name: Measure to the nodes after this one
  meshctl.mesh.mesh_netprobe:
    action: measure
    targets: {gpu1: 100.64.0.2, cpu1: 100.64.0.3}
    tailscale: true
  register: probe
"""

RETURN = r"""
links:
  description: One entry per target (C(measure)), in the order given.
  returned: when action is measure
  type: list
  elements: dict
  contains:
    name: {description: The target's name., type: str}
    address: {description: The address measured to., type: str}
    bits_per_second: {description: Throughput received by the target (null on an error)., type: float}
    mean_rtt_us: {description: Mean TCP round-trip time in microseconds (null when iperf3 gives none)., type: int}
    error: {description: What iperf3 said when it failed (empty otherwise)., type: str}
tailscale:
  description: The output of C(tailscale status --json), capped (null when not asked or not running).
  returned: when action is measure
  type: str
iperf3:
  description: Whether iperf3 is installed here.
  returned: always
  type: bool
bound:
  description: The address the server listens on (C(serve)); C(*) for every address.
  returned: when action is serve
  type: str
"""

import shutil
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_iperf import iperf_result, serve, stop

CAP = 65536  # characters of tailscale's JSON handed back at most


def measure(targets, port, seconds):
    links = []
    for name, address in targets.items():
        address = str(address or "")
        try:
            done = subprocess.run(["iperf3", "--client", address, "--port", str(port), "--time", str(seconds),
                                   "--json", "--connect-timeout", "3000"],
                                  capture_output=True, text=True, timeout=seconds + 20, check=False)  # fmt: skip
            result = iperf_result(done.stdout or done.stderr)
        except subprocess.TimeoutExpired:
            result = {"bits_per_second": None, "mean_rtt_us": None, "error": "iperf3 did not finish"}
        links.append({"name": str(name), "address": address, **result})
    return links


def main():
    module = AnsibleModule(
        argument_spec={
            "action": {"type": "str", "required": True, "choices": ["serve", "stop", "measure"]},
            "port": {"type": "int", "default": 5201},
            "seconds": {"type": "int", "default": 2},
            "targets": {"type": "dict", "default": {}},
            "tailscale": {"type": "bool", "default": False},
            "bind": {"type": "str", "default": ""},
            "user": {"type": "int", "default": 65534},
            "lifetime": {"type": "int", "default": 900},
            "pidfile": {"type": "path", "default": "/run/meshctl-iperf3.pid"},
        },
        supports_check_mode=True,
    )
    params = module.params
    installed = shutil.which("iperf3") is not None
    if module.check_mode:
        module.exit_json(changed=False, iperf3=installed, links=[], tailscale=None)
    if params["action"] == "stop":
        module.exit_json(changed=stop(params["pidfile"]), iperf3=installed)
    if not installed:
        module.fail_json(msg="iperf3 is not installed on this node: run `meshctl apply --limit NODE` (role mesh_base)",
                         iperf3=False)  # fmt: skip
    if params["action"] == "serve":
        try:
            bound = serve(params["port"], params["pidfile"], params["bind"], params["user"], params["lifetime"])
        except (subprocess.SubprocessError, OSError) as exc:
            module.fail_json(msg=f"iperf3 could not serve on port {params['port']}: {exc}", iperf3=True)
        module.exit_json(changed=True, iperf3=True, bound=bound)
    links = measure(params["targets"], params["port"], params["seconds"])
    status = None
    if params["tailscale"] and shutil.which("tailscale"):
        done = subprocess.run(["tailscale", "status", "--json"], capture_output=True, text=True, timeout=10,
                              check=False)  # fmt: skip
        status = done.stdout[:CAP] if done.returncode == 0 else None
    module.exit_json(changed=False, iperf3=True, links=links, tailscale=status)


if __name__ == "__main__":
    main()
