# Copyright: meshctl contributors; Apache-2.0
"""What the provider clients (mesh_cloud_lambda, mesh_cloud_runpod, mesh_cloud_paperspace) share.

One HTTP client (JSON over HTTPS with a bearer key, standard library only, so it runs on the
control machine and on the head alike) that keeps a provider's rate limit, backs off on 429 and
5xx, and turns every failure into a ``CloudError`` that says what went wrong and what to do; and
one shape for an instance, whatever the provider calls its fields, checked before anyone uses it
(a provider's answer is data: a name or address outside its shape is refused, never passed on).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request

MAX_ANSWER = 4 * 1024 * 1024  # bytes read of any one answer
STATUSES = ("running", "starting", "stopping", "stopped", "terminated", "unhealthy", "unknown")
INSTANCE_KEYS = ("provider", "id", "name", "status", "provider_status", "ssh_host", "ssh_port", "ssh_user", "gpus",
                 "gpu_type", "price_per_hour")  # fmt: skip
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
TEXT_RE = re.compile(r"[A-Za-z0-9 _.,:/()+*=@#-]{0,128}")
LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?"
HOST_RE = re.compile(rf"(?=.{{1,253}}$){LABEL}(?:\.{LABEL})*")
USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
KINDS = ("auth", "capacity", "quota", "not-found", "rate-limit", "unsupported", "unreachable", "bad-answer", "error")


class CloudError(Exception):
    """A provider call that failed: ``kind`` (one of KINDS), a message and the fix."""

    def __init__(self, message, hint="", kind="error", status=None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.kind = kind if kind in KINDS else "error"
        self.status = status

    def __str__(self):
        return self.message


def api_url(provider, default, environ=None):
    """The API's base URL: ``MESHCTL_<PROVIDER>_API_URL`` when set (a stand-in, a proxy), else DEFAULT."""
    name = f"MESHCTL_{provider.upper()}_API_URL"
    url = (environ if environ is not None else os.environ).get(name) or default
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise CloudError(f"{name}={url!r} is not an http(s) URL", hint=f"set it to a base URL such as {default}",
                         kind="error")  # fmt: skip
    return url.rstrip("/")


def text(value, default=""):
    """A provider's free text (a name, a GPU description) if it is plain, short text; else DEFAULT."""
    value = "" if value is None else str(value).strip()
    return value if TEXT_RE.fullmatch(value) else default


def host(value):
    """An IP address or DNS name, else None."""
    value = "" if value is None else str(value).strip()
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value if HOST_RE.fullmatch(value) and not value.replace(".", "").isdigit() else None


def number(value, minimum=0.0, maximum=1e9):
    """A number (int, float or its text) inside the range, else None."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if minimum <= result <= maximum and result == result else None


def instance(provider, id, name, status, provider_status, ssh_host=None, ssh_port=22, ssh_user="root", gpus=0,
             gpu_type="", price_per_hour=None):  # fmt: skip
    """One instance in meshctl's shape. Raises CloudError when its id is not one (the rest is made safe)."""
    if not isinstance(id, str) or not ID_RE.fullmatch(id):
        raise CloudError(f"{provider} answered an instance id meshctl refuses ({str(id)[:40]!r})", kind="bad-answer")
    port = number(ssh_port, 1, 65535)
    count = number(gpus, 0, 1024)
    price = number(price_per_hour, 0, 10000)
    return {
        "provider": provider,
        "id": id,
        "name": text(name),
        "status": status if status in STATUSES else "unknown",
        "provider_status": text(provider_status, "?"),
        "ssh_host": host(ssh_host),
        "ssh_port": int(port) if port is not None else None,
        "ssh_user": ssh_user if isinstance(ssh_user, str) and USER_RE.fullmatch(ssh_user) else "root",
        "gpus": int(count) if count is not None else 0,
        "gpu_type": text(gpu_type),
        "price_per_hour": round(price, 4) if price is not None else None,
    }


class Http:
    """JSON requests to one provider's API with its key, paced and retried.

    ``min_interval``: seconds between two requests (a provider's rate limit). A 429 waits
    Retry-After (or 1, 2, 4, 8 s) and tries again, as does a 5xx or a connection error of a GET,
    up to ``retries`` times; then the call fails with a CloudError. A change (POST, PATCH,
    DELETE) is never sent twice after an answer that may mean it was done. ``describe(status, body)`` turns a
    provider's error answer into (message, kind).
    """

    def __init__(self, provider, base_url, key, describe, min_interval=0.0, retries=4, timeout=30,
                 clock=time.monotonic, sleep=time.sleep, opener=urllib.request.urlopen):  # fmt: skip
        self.provider = provider
        self.base_url = base_url
        self._key = key
        self.describe = describe
        self.min_interval = min_interval
        self.retries = retries
        self.timeout = timeout
        self.clock = clock
        self.sleep = sleep
        self.opener = opener
        self._last = None
        self.calls = 0  # requests sent, for tests and benchmarks

    def _pace(self):
        if self._last is not None and self.min_interval:
            wait = self._last + self.min_interval - self.clock()
            if wait > 0:
                self.sleep(wait)
        self._last = self.clock()

    def request(self, method, path, body=None, query=None):
        url = self.base_url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self._key}", "Accept": "application/json", "User-Agent": "meshctl"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(self.retries + 1):
            self._pace()
            self.calls += 1
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with self.opener(request, timeout=self.timeout) as answer:
                    return _json(answer.read(MAX_ANSWER + 1), self.provider)
            except urllib.error.HTTPError as exc:
                status = exc.code
                payload = _json_or_none(exc.read(MAX_ANSWER + 1))
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                # 429: nothing was done, ask again. A 5xx or a lost connection may have done it: only a
                # read is asked again (a launch sent twice could rent two machines).
                if (status == 429 or (status >= 500 and method == "GET")) and attempt < self.retries:
                    self.sleep(_delay(retry_after, attempt))
                    continue
                raise self._error(method, path, status, payload) from None
            except (urllib.error.URLError, OSError) as exc:
                if method == "GET" and attempt < self.retries:
                    self.sleep(_delay(None, attempt))
                    continue
                reason = getattr(exc, "reason", exc)
                raise CloudError(f"{self.provider}'s API at {self.base_url} cannot be reached ({reason})",
                                 hint=f"check the network (or MESHCTL_{self.provider.upper()}_API_URL)",
                                 kind="unreachable") from None  # fmt: skip
        raise CloudError(f"{self.provider}: no answer after {self.retries + 1} tries", kind="unreachable")

    def _error(self, method, path, status, payload):
        message, kind = self.describe(status, payload)
        where = f"{self.provider} refused {method} {path.split('?')[0]} ({status}): {message}"
        if status in (401, 403) or kind == "auth":
            return CloudError(where, hint=f"check the key: `meshctl provider add {self.provider} --key-file FILE` "
                              "stores a new one", kind="auth", status=status)  # fmt: skip
        if status == 429 or kind == "rate-limit":
            return CloudError(where, hint="the provider limits requests: wait a minute and try again",
                              kind="rate-limit", status=status)  # fmt: skip
        if status == 404 and kind == "error":
            kind = "not-found"
        hints = {
            "capacity": "no machine of that type is free now: try another type or region, or later",
            "quota": "the account's quota is reached: raise it with the provider or remove instances",
            "not-found": "`meshctl machines` lists what the provider has",
        }
        return CloudError(where, hint=hints.get(kind, ""), kind=kind, status=status)


def _delay(retry_after, attempt):
    seconds = number(retry_after, 0, 300)
    return seconds if seconds is not None else min(2**attempt, 30)


def _json(raw, provider):
    if len(raw) > MAX_ANSWER:
        raise CloudError(f"{provider} answered more than {MAX_ANSWER // 1024 // 1024} MiB", kind="bad-answer")
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise CloudError(f"{provider} answered something that is not JSON", kind="bad-answer") from None


def _json_or_none(raw):
    try:
        return json.loads(raw) if raw and len(raw) <= MAX_ANSWER else None
    except ValueError:
        return None


def message_of(payload, *paths):
    """The first plain message found at one of PATHS (tuples of keys) in an error payload."""
    for path in paths:
        value = payload
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())[:300]
    return "no message"
