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

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule

CAP = 65536  # characters of tailscale's JSON handed back at most


def iperf_result(text):
    """``{"bits_per_second", "mean_rtt_us", "error"}`` from ``iperf3 -J`` output (plain function)."""
    try:
        data = json.loads(text or "")
    except ValueError:
        first = (text or "").strip().splitlines()[:1]
        return {"bits_per_second": None, "mean_rtt_us": None, "error": (first[0] if first else "no output")[:300]}
    if not isinstance(data, dict):
        return {"bits_per_second": None, "mean_rtt_us": None, "error": "iperf3 printed JSON that is not an object"}
    if data.get("error"):
        return {"bits_per_second": None, "mean_rtt_us": None, "error": str(data["error"])[:300]}
    end = data.get("end") if isinstance(data.get("end"), dict) else {}
    received = end.get("sum_received") if isinstance(end.get("sum_received"), dict) else {}
    bps = received.get("bits_per_second")
    rtts = []
    for stream in end.get("streams") or []:
        sender = stream.get("sender") if isinstance(stream, dict) else None
        if isinstance(sender, dict) and isinstance(sender.get("mean_rtt"), (int, float)):
            rtts.append(sender["mean_rtt"])
    if not isinstance(bps, (int, float)):
        return {"bits_per_second": None, "mean_rtt_us": None, "error": "iperf3 reported no throughput"}
    return {"bits_per_second": float(bps), "mean_rtt_us": int(sum(rtts) / len(rtts)) if rtts else None, "error": ""}


def local_address(address):
    """Whether ADDRESS is one of this node's own (a socket can be bound to it)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


def listening(port):
    """Whether a TCP socket listens on PORT here (/proc/net/tcp and tcp6, state 0A)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if len(fields) > 3 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def server_argv(port, bound, lifetime):
    """The server's command: iperf3 on PORT at BOUND (every address for "*"), ended after LIFETIME s."""
    argv = ["timeout", str(lifetime), "iperf3", "--server", "--port", str(port)]
    return argv + (["--bind", bound] if bound != "*" else [])


def serve(port, pidfile, bind, user, lifetime):
    """Start the server (its own session, as USER); return the address it listens on."""
    stop(pidfile)
    bound = bind if bind and local_address(bind) else "*"
    process = subprocess.Popen(server_argv(port, bound, lifetime), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               user=user, group=user, extra_groups=[], cwd="/")  # fmt: skip
    with open(os.open(pidfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644), "w") as handle:
        handle.write(f"{process.pid}\n")
    for _ in range(50):
        if listening(port):
            return bound
        if process.poll() is not None:
            raise OSError(f"iperf3 exited at once ({process.returncode}): is port {port} taken?")
        time.sleep(0.1)
    return bound


def ours(pid):
    """Whether PID runs our server (timeout wrapping iperf3): never signal a PID the file was lying about."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return False
    return len(argv) > 2 and os.path.basename(argv[0]) == b"timeout" and b"iperf3" in argv[2]


def stop(pidfile):
    try:
        with open(pidfile) as handle:
            pid = int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return False
    if pid > 1 and ours(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        for _ in range(30):
            if not os.path.exists(f"/proc/{pid}") or not ours(pid):
                break
            time.sleep(0.1)
    with contextlib.suppress(OSError):
        os.unlink(pidfile)
    return True


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
