# Copyright: meshctl contributors; Apache-2.0
"""What ``meshctl status`` reads on a node, as plain functions of the standard library only.

One copy, two ways to a node: module ``mesh_status`` runs it through Ansible (``meshctl status -v``,
and a mesh whose connection settings meshctl does not model), and meshctl sends this file's text
to a node's ``python3`` over one SSH command (meshctl/quickread.py), so a status costs one
connection per node and no Ansible run. Reads only; every output capped.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess

LIMIT = 256 * 1024  # characters kept of any one output: a status, not a transfer
SINFO = ["sinfo", "--noheader", "--Node", "--format=%N|%T|%G|%E"]
# Each node's address in Slurm (NodeAddr), beside the rows: compared with meshctl's record.
ADDRESSES = ["sinfo", "--noheader", "--Node", "--format=%N|%o"]


def run(argv, timeout):
    """rc and stdout (capped) of a command; rc 127 when it is missing, 124 when it hangs."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout, check=False)
    except FileNotFoundError:
        return {"rc": 127, "stdout": ""}
    except subprocess.TimeoutExpired:
        return {"rc": 124, "stdout": ""}
    return {"rc": done.returncode, "stdout": done.stdout[:LIMIT]}


def service_states(names, supervisor, timeout):
    """Each name's state, one `is-active` call for all of them (it prints one line per name)."""
    if not names:
        return {}
    argv = (["meshctl-pod-start", "--is-active"] if supervisor else ["systemctl", "is-active"]) + list(names)
    lines = run(argv, timeout)["stdout"].splitlines()
    return {name: (lines[i].strip() if i < len(lines) and lines[i].strip() else "unknown") for i, name in
            enumerate(names)}  # fmt: skip


def fstab_has(path, fstab="/etc/fstab"):
    try:
        with open(fstab, encoding="utf-8", errors="replace") as handle:
            return any(len(fields) > 2 and fields[1] == path for fields in (line.split() for line in handle)
                       if fields and not fields[0].startswith("#"))  # fmt: skip
    except OSError:
        return False


def nfs_mounted(path, mounts="/proc/self/mounts"):
    try:
        with open(mounts, encoding="utf-8", errors="replace") as handle:
            return any(len(fields) > 2 and fields[1] == path and fields[2] in ("nfs", "nfs4")
                       for fields in (line.split() for line in handle))  # fmt: skip
    except OSError:
        return False


def kernel_has_nfs(filesystems="/proc/filesystems"):
    try:
        with open(filesystems, encoding="utf-8", errors="replace") as handle:
            return any(line.split()[-1:] == ["nfs4"] for line in handle)
    except OSError:
        return False


def share_marker(path, marker, timeout=5):
    """What the share's marker file (MARKER in PATH) holds, stripped; "" when it cannot be read. Read
    by dd in a process of its own (a read on a hard NFS mount whose server is away would hang this
    one), without following a link or waiting on a pipe."""
    if not marker or "/" in marker:
        return ""
    argv = ["dd", "if=" + os.path.join(path, marker), "iflag=nofollow,nonblock", "bs=200", "count=1", "status=none"]
    return run(argv, timeout)["stdout"].strip()


def mount_point(path):
    try:
        return os.path.ismount(path)
    except OSError:
        return False


def mount_state(path, possible=True, share_id=None, marker=".meshctl-share", timeout=5):
    """The share's state on a node. With SHARE_ID (the head's, which it writes into the share's
    MARKER): ``shared`` when the folder holds it; ``not-the-heads`` when something is mounted
    there, or the kernel could mount the fstab entry, but the folder is not the head's (a mount that
    failed and left the local folder); else as without: ``fstab-only`` (this kernel cannot mount
    NFS) or ``missing``. Without: ``mounted``, ``not-mounted``, ``fstab-only`` or ``missing``."""
    if share_id:
        if share_marker(path, marker, timeout) == share_id:
            return "shared"
        in_fstab = fstab_has(path)
        if nfs_mounted(path) or mount_point(path) or (in_fstab and possible and kernel_has_nfs()):
            return "not-the-heads"
        return "fstab-only" if in_fstab else "missing"
    if nfs_mounted(path):
        return "mounted"
    if not fstab_has(path):
        return "missing"
    return "not-mounted" if possible and kernel_has_nfs() else "fstab-only"


def split_url(url):
    """(host, port, path) of ``http://HOST[:PORT]/PATH`` (HOST may be ``[v6]``); None for any other."""
    if not isinstance(url, str) or not url.startswith("http://"):
        return None
    hostport, _, path = url[len("http://") :].partition("/")
    host, port = hostport, "80"
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else "80"
    elif ":" in hostport:
        host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c in host for c in " \r\n/@"):
        return None
    return host, int(port), "/" + path


def http_get(url, timeout):
    """GET URL (``http://HOST:PORT/PATH``, a service of this node): straight there over a socket
    (never through a proxy the environment names; no HTTP library to load: it took most of a
    node's read). An answer of 400 or more keeps only its status."""
    parts = split_url(url)
    if parts is None:
        return {"status": 0, "body": ""}
    host, port, path = parts
    named = f"[{host}]" if ":" in host else host
    request = f"GET {path} HTTP/1.0\r\nHost: {named}:{port}\r\nConnection: close\r\n\r\n"
    data = b""
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            connection.sendall(request.encode("ascii"))
            while len(data) < 2 * LIMIT:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                data += chunk
                head, found, body = data.partition(b"\r\n\r\n")
                length = [line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")[1:]
                          if line.lower().startswith(b"content-length:")] if found else []  # fmt: skip
                if length and length[0].isdigit() and len(body) >= int(length[0]):
                    break
    except (OSError, UnicodeError, ValueError):
        return {"status": 0, "body": ""}
    head, found, body = data.partition(b"\r\n\r\n")
    words = head.split(b"\r\n", 1)[0].split()
    if not found or len(words) < 2 or not words[0].startswith(b"HTTP/") or not words[1].isdigit():
        return {"status": 0, "body": ""}
    status = int(words[1])
    return {"status": status, "body": body[:LIMIT].decode("utf-8", "replace") if status < 400 else ""}


RENTED_MAX = 1024  # records read of the head's rented pool machines (64 nodes, 16 earlier machines kept each)
RENTED_BYTES = 4096  # bytes kept of one record


def rented_records(folder):
    """The head's records of the burst pool machines it rented (``<node>.json`` in FOLDER, root's,
    written by meshctl on the head) as text, by node: each opened without following a link (a
    record that is one is left out) and capped; the filter node_status parses them."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))[:RENTED_MAX]
    except OSError:
        return {}
    records = {}
    for name in names:
        try:
            handle = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(handle).st_mode):
                records[name[: -len(".json")]] = os.read(handle, RENTED_BYTES).decode("utf-8", "replace")
        except OSError:
            pass
        finally:
            os.close(handle)
    return records


def sinfo(timeout):
    """sinfo's rows (rc, stdout), and each node's address in Slurm beside them (``addresses``)."""
    rows = run(SINFO, timeout)
    rows["addresses"] = run(ADDRESSES, timeout) if rows["rc"] == 0 else {"rc": rows["rc"], "stdout": ""}
    return rows


def read(params):
    """Everything asked for (the module's options, as a dict), in the module's ``status`` shape."""
    timeout = int(params.get("timeout") or 5)
    os.environ.setdefault("LC_ALL", "C")
    mount_path = params.get("mount_path")
    url = params.get("url")
    return {
        "services": service_states(list(params.get("services") or []), bool(params.get("supervisor")), timeout),
        "sinfo": sinfo(timeout) if params.get("sinfo") else None,
        "tailscale": run(["tailscale", "status", "--json"], timeout) if params.get("tailscale") else None,
        "mount": mount_state(
            mount_path,
            params.get("mount_possible", True) is not False,
            params.get("share_id"),
            params.get("share_marker") or ".meshctl-share",
            timeout,
        )
        if mount_path
        else None,
        "http": http_get(url, timeout) if url else None,
        "rented": rented_records(params["rented"]) if params.get("rented") else None,
        # The power program's records of the machines that ended (mesh_watch.ENDED): what was lost.
        "ended": rented_records(params["ended"]) if params.get("ended") else None,
    }
