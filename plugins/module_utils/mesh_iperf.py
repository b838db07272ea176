# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""iperf3 on a node, for module mesh_netprobe (`meshctl doctor`): its client's output read, and its
server kept for a lifetime in a session of its own as an unprivileged user.

The server outlives the task that starts it (the other nodes measure against it in the next
task), so it is started with subprocess.Popen in a new session, not with run_command (which
waits for the command's end); its PID file is trusted only for a process that is still our
``timeout ... iperf3`` (``ours``): never signal a PID the file was lying about. Plain functions,
no Ansible (tests/unit/meshctl/test_doctor.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time


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
