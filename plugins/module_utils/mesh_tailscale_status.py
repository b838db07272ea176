# Copyright: meshctl contributors; Apache-2.0
"""Plain functions about Tailscale's CLI output and auth keys (unit-tested on real outputs).

The tailscale role reads `tailscale status --json` with ``tailscale_status`` and decides with
``tailscale_join_action`` whether a node must (re)join; meshctl checks a new key's shape with
``auth_key_kind`` before storing it.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import re

AUTH_KEY = re.compile(r"^tskey-auth-[A-Za-z0-9]+-[A-Za-z0-9]+\Z")
CLIENT_SECRET = re.compile(r"^tskey-client-[A-Za-z0-9]+-[A-Za-z0-9]+\Z")
HEADSCALE_KEY = re.compile(r"^[0-9a-f]{48}\Z|^[0-9a-f]{64}\Z")  # pre-auth keys without a prefix


class TailscaleOutputError(ValueError):
    """The output is not `tailscale status --json` as we know it."""


def tailscale_status(text):
    """Facts from `tailscale status --json`.

    Returns backend_state (``Running``, ``NeedsLogin``, ``Stopped``, ...), hostname, ipv4, ipv6
    (first of each in Self.TailscaleIPs, None when logged out), key_expiry (or None), version and
    userspace (True when tailscaled runs without a TUN device: ``"TUN": false``).
    Raises TailscaleOutputError, with the first line printed, when tailscaled is not running or
    the text is not valid JSON.
    """
    text = (text or "").strip()
    try:
        data = json.loads(text)
    except ValueError as exc:
        first = text.splitlines()[0] if text else "(no output)"
        raise TailscaleOutputError(f"tailscale status --json did not print JSON: {first[:200]} ({exc})") from None
    if not isinstance(data, dict):
        raise TailscaleOutputError("tailscale status --json printed JSON that is not an object")
    me = data.get("Self") or {}
    ips = me.get("TailscaleIPs") or data.get("TailscaleIPs") or []
    v4 = [ip for ip in ips if _version(ip) == 4]
    v6 = [ip for ip in ips if _version(ip) == 6]
    return {
        "backend_state": data.get("BackendState") or "Unknown",
        "hostname": me.get("HostName"),
        "ipv4": v4[0] if v4 else None,
        "ipv6": v6[0] if v6 else None,
        "key_expiry": me.get("KeyExpiry"),
        "version": data.get("Version"),
        "userspace": data.get("TUN") is False,
    }


def _version(address):
    try:
        return ipaddress.ip_address(address).version
    except ValueError:
        return None


def tailscale_peer_path(text, address):
    """How this node reaches the peer with tailnet ``address``, from its `tailscale status --json`:
    ``direct`` (a peer-to-peer UDP path: ``CurAddr`` set), ``relayed (DERP <region>)`` (through
    Tailscale's relay: ``Relay``), ``idle`` (no traffic yet, so no path chosen), or ``not a peer``;
    prefixed ``userspace, `` when tailscaled runs without TUN (every packet through a proxy)."""
    try:
        data = json.loads(text or "")
    except ValueError:
        return "unknown (tailscale status unreadable)"
    if not isinstance(data, dict):
        return "unknown (tailscale status unreadable)"
    prefix = "userspace, " if data.get("TUN") is False else ""
    for peer in (data.get("Peer") or {}).values():
        if not isinstance(peer, dict) or address not in (peer.get("TailscaleIPs") or []):
            continue
        if peer.get("CurAddr"):
            return prefix + "direct"
        if peer.get("Relay"):
            return prefix + f"relayed (DERP {str(peer['Relay'])[:16]})"
        return prefix + "idle"
    return prefix + "not a peer"


def tailscale_ip4(text):
    """The address `tailscale ip -4` printed, checked to lie in 100.64.0.0/10; None otherwise."""
    for line in (text or "").splitlines():
        line = line.strip()
        if _version(line) == 4 and ipaddress.ip_address(line) in ipaddress.ip_network("100.64.0.0/10"):
            return line
    return None


def auth_key_kind(key):
    """``auth``, ``client`` (OAuth client secret: needs --advertise-tags) or ``headscale``; None otherwise."""
    key = (key or "").strip()
    if AUTH_KEY.match(key):
        return "auth"
    if CLIENT_SECRET.match(key):
        return "client"
    if HEADSCALE_KEY.match(key):
        return "headscale"
    return None


def key_expired(expiry, now=None):
    """True when a node key expiry (RFC 3339, as in Self.KeyExpiry) lies in the past; False when unset."""
    if not expiry:
        return False
    try:
        when = datetime.datetime.fromisoformat(str(expiry).replace("Z", "+00:00"))
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when <= (now or datetime.datetime.now(datetime.UTC))


def tailscale_join_action(status, hostname, force=False, now=None):
    """What `tailscale up` must do on a node, from its ``tailscale_status`` facts.

    Returns ``{"action": ..., "reason": ...}`` where action is
    ``none`` (Running under the right hostname), ``join`` (not logged in: the key registers it),
    ``reauth`` (forced, or the node key expired: needs --force-reauth, drops connections briefly) or
    ``rename`` (Running under another hostname: new prefs, no new login).
    """
    state = (status or {}).get("backend_state") or "Unknown"
    if force:
        return {"action": "reauth", "reason": "forced"}
    if state != "Running":
        return {"action": "join", "reason": f"backend state {state}"}
    if key_expired(status.get("key_expiry"), now):
        return {"action": "reauth", "reason": f"node key expired {status.get('key_expiry')}"}
    if status.get("hostname") != hostname:
        return {"action": "rename", "reason": f"hostname {status.get('hostname')} is not {hostname}"}
    return {"action": "none", "reason": "Running as " + hostname}
