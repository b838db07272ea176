#!/usr/bin/env python3
"""TEST DOUBLE (molecule only, never shipped in a role): a stand-in for `tailscale` and `tailscaled`.

The real coordination service cannot be reached from the test bed, so this program behaves like the
Tailscale CLI for what meshctl uses, installed as /usr/bin/tailscale and /usr/sbin/tailscaled
(one file, told apart by the name it is run as):

- `tailscaled [--state=PATH|mem:] [--tun=userspace-networking] [--socket=PATH]` runs until stopped;
  with `--state=mem:` the node forgets its login at every start (a stateless container).
- `tailscale up --auth-key=file:PATH [--hostname=N] [--advertise-tags=T] [--login-server=URL]
  [--force-reauth] [--reset] [--timeout=D]`. A key given on the command line (not `file:`) is refused, so a test
  can prove no key travels in argv. Keys are accepted only when listed in the valid-keys file
  (one per line; tests remove a key to revoke it). Re-running `up` on a logged-in node uses no key
  unless `--force-reauth`; changing a non-default flag without repeating the others needs `--reset`.
  OAuth client secrets (`tskey-client-`) need `--advertise-tags`.
- `tailscale status --json` (BackendState, Self.HostName, Self.TailscaleIPs, Self.KeyExpiry),
  `tailscale ip -4`, `tailscale logout`.
- The tailnet IP is the node's own address inside 100.64.0.0/10 (the test network).

Paths (for the tests of this double): TS_STANDIN_ROOT prefixes every path below.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.environ.get("TS_STANDIN_ROOT", "")
STATE_DIR = ROOT + "/var/lib/tailscale"
RUN_DIR = ROOT + "/run/tailscale"
DAEMON = RUN_DIR + "/standin-daemon.json"
VALID_KEYS = ROOT + "/etc/meshctl-test/tailscale-valid-keys"
NON_DEFAULT = ("hostname", "advertise_tags", "login_server")


def fail(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr)
    raise SystemExit(code)


def read_json(path: str) -> dict:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def write_json(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(data, handle)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def daemon_info() -> dict:
    info = read_json(DAEMON)
    pid = info.get("pid")
    if not pid:
        return {}
    try:
        os.kill(pid, 0)
    except OSError:
        return {}
    return info


def state_path(info: dict) -> str:
    return info["state"] if info.get("state") != "mem:" else RUN_DIR + "/mem-state.json"


def tailnet_ip() -> str | None:
    forced = os.environ.get("TS_STANDIN_IP")
    if forced:
        return forced
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=False).stdout
    for field in out.split():
        if "/" in field:
            address = field.split("/")[0]
            try:
                if ipaddress.ip_address(address) in ipaddress.ip_network("100.64.0.0/10"):
                    return address
            except ValueError:
                continue
    return None


def tailscaled(args: list[str]) -> None:
    state = STATE_DIR + "/tailscaled.state"
    for arg in args:
        if arg.startswith("--state="):
            state = arg.split("=", 1)[1]
    os.makedirs(RUN_DIR, exist_ok=True)
    if state == "mem:":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(RUN_DIR + "/mem-state.json")  # memory state does not survive a restart
    userspace = "--tun=userspace-networking" in args
    socks = next((a.split("=", 1)[1] for a in args if a.startswith("--socks5-server=")), "")
    write_json(DAEMON, {"pid": os.getpid(), "state": state, "userspace": userspace, "socks5": socks})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if userspace and socks:
        socks5_server(socks)  # runs until stopped
    while True:
        time.sleep(3600)


# Userspace networking: the node's own processes reach the tailnet only through this SOCKS5
# proxy (CONNECT, no authentication), as through the real tailscaled's --socks5-server. Where
# the test made a user `ts-standin` (the pod-like node), the proxy runs as that user, so the
# test's firewall can let only it reach other nodes, as only tailscaled's netstack can on a pod.
SOCKS_USER = "ts-standin"


def socks5_server(listen: str) -> None:
    import pwd
    import socket
    import threading

    host, _, port = listen.rpartition(":")
    server = socket.create_server((host or "127.0.0.1", int(port)), reuse_port=False)
    with contextlib.suppress(KeyError):
        user = pwd.getpwnam(SOCKS_USER)
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def exact(conn: socket.socket, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            if not chunk:
                raise OSError("client went away")
            data += chunk
        return data

    def serve(client: socket.socket) -> None:
        try:
            _version, methods = exact(client, 2)
            exact(client, methods)
            client.sendall(b"\x05\x00")  # no authentication
            _version, command, _reserved, kind = exact(client, 4)
            if kind == 1:
                address = socket.inet_ntoa(exact(client, 4))
            elif kind == 3:
                address = exact(client, exact(client, 1)[0]).decode()
            else:
                client.sendall(b"\x05\x08\x00\x01" + bytes(6))  # address type not supported
                return
            target_port = int.from_bytes(exact(client, 2), "big")
            if command != 1:
                client.sendall(b"\x05\x07\x00\x01" + bytes(6))  # only CONNECT
                return
            try:
                upstream = socket.create_connection((address, target_port), timeout=10)
            except OSError:
                client.sendall(b"\x05\x05\x00\x01" + bytes(6))  # connection refused
                return
            upstream.settimeout(None)
            client.sendall(b"\x05\x00\x00\x01" + bytes(6))
            back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
            back.start()
            pipe(client, upstream)
            back.join()
            upstream.close()
        except OSError:
            pass
        finally:
            client.close()

    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def parse_flags(args: list[str]) -> dict:
    flags: dict = {"force_reauth": False, "reset": False}
    for arg in args:
        key, _, value = arg.partition("=")
        name = key.lstrip("-").replace("-", "_")
        if name in ("force_reauth", "reset"):
            flags[name] = True
        elif name == "timeout":
            continue  # the stand-in answers at once
        elif name in ("auth_key", "authkey"):
            flags["auth_key"] = value
        elif name in NON_DEFAULT:
            flags[name] = value
        else:
            fail(f"flag provided but not defined: {key}", 2)
    return flags


def up(info: dict, args: list[str]) -> None:
    flags = parse_flags(args)
    path = state_path(info)
    state = read_json(path)
    wanted = {k: flags.get(k, "") for k in NON_DEFAULT}
    if state.get("logged_in") and not flags["force_reauth"]:
        current = state.get("prefs", {})
        if wanted != current and not flags["reset"]:
            missing = [f"--{k.replace('_', '-')}={v}" for k, v in current.items() if v and wanted.get(k) != v]
            fail(
                "Error: changing settings via 'tailscale up' requires mentioning all\n"
                "non-default flags. To proceed, either re-run your command with --reset or\n"
                f"use the command below to explicitly mention the current value of\nall non-default settings:\n"
                f"\ttailscale up {' '.join(missing)}"
            )
        state["prefs"] = wanted
        write_json(path, state)
        return
    key_spec = flags.get("auth_key", "")
    if not key_spec:
        fail("To authenticate, visit: https://login.example.invalid/a/standin (no auth key given)")
    if not key_spec.startswith("file:"):
        fail("stand-in: refusing an auth key on the command line; use --auth-key=file:PATH")
    try:
        with open(key_spec[5:]) as handle:
            key = handle.read().strip()
    except OSError as exc:
        fail(f"reading auth key file: {exc.strerror}")
    try:
        with open(VALID_KEYS) as handle:
            valid = {line.strip() for line in handle if line.strip()}
    except OSError:
        valid = set()
    if key not in valid:
        fail("backend error: invalid key: API key does not exist")
    if key.startswith("tskey-client-") and not wanted["advertise_tags"]:
        fail("oauth authkeys require --advertise-tags")
    ip = tailnet_ip()
    if ip is None:
        fail("stand-in: this node has no address in 100.64.0.0/10")
    expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=180)
    write_json(path, {
        "logged_in": True,
        "prefs": wanted,
        "ip": ip,
        "key_sha256": hashlib.sha256(key.encode()).hexdigest(),
        "key_expiry": expiry.strftime("%Y-%m-%dT%H:%M:%SZ"),
    })  # fmt: skip


def status(info: dict, args: list[str]) -> None:
    state = read_json(state_path(info))
    running = bool(state.get("logged_in"))
    ips = [state["ip"]] if running else None
    out = {
        "Version": "1.80.0-standin",
        "TUN": not info.get("userspace", False),
        "BackendState": "Running" if running else "NeedsLogin",
        "TailscaleIPs": ips,
        "Self": {
            "HostName": state.get("prefs", {}).get("hostname") or os.uname().nodename,
            "TailscaleIPs": ips,
            "KeyExpiry": state.get("key_expiry") if running else None,
        },
    }
    if "--json" not in args:
        fail("stand-in: only `tailscale status --json` is simulated", 2)
    print(json.dumps(out, indent=2))


def main() -> None:
    name = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    if name.startswith("tailscaled"):
        tailscaled(args)
        return
    info = daemon_info()
    if not info:
        fail("failed to connect to local tailscaled; it doesn't appear to be running")
    if not args:
        fail("usage: tailscale <up|status|ip|logout>", 2)
    command, rest = args[0], args[1:]
    if command == "up":
        up(info, rest)
    elif command == "status":
        status(info, rest)
    elif command == "ip":
        state = read_json(state_path(info))
        if not state.get("logged_in"):
            fail("no current Tailscale IPs; state: NeedsLogin")
        print(state["ip"])
    elif command == "logout":
        path = state_path(info)
        state = read_json(path)
        state["logged_in"] = False
        write_json(path, state)
    else:
        fail(f"stand-in: `tailscale {command}` is not simulated", 2)


if __name__ == "__main__":
    main()
