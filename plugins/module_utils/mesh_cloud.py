# Copyright: meshctl contributors; Apache-2.0
"""What the provider clients share, and the one interface they stand behind.

Each provider is one module, ``mesh_cloud_<name>.py`` (``PROVIDERS`` lists them), holding its client
and its ``CAPABILITIES``: what it can do (stop and start, keep the disk or only a volume, keep the
address), whether a node of it must be launched again instead of started, its SSH user, where its
price comes from, how it names GPUs. Everything else (meshctl's ``cloud`` and ``relaunch``, the power
plan filter, the head's power program) asks ``capabilities(name)`` and ``client_module(name)``, never
a provider's name. A client has the methods of ``PROTOCOL``; a method a provider cannot do raises a
CloudError of kind ``unsupported``.

Also here: one HTTP client (JSON over HTTPS with a bearer key, standard library only, so it runs on
the control machine and on the head alike) that keeps a provider's rate limit, backs off on 429 and
5xx, never follows a redirect (the key would go with it), and turns every failure into a
``CloudError`` that says what went wrong and what to do; one shape for an instance and one for an
offer, whatever the provider calls its fields, checked before anyone uses them (a provider's answer
is data: a name or address outside its shape is refused, never passed on).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from importlib import import_module

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_text import clean

PROVIDERS = ("lambda", "runpod", "paperspace")  # one module each: mesh_cloud_<name>.py
# What every client has (a provider that cannot do one raises CloudError of kind "unsupported"); a
# provider whose nodes are launched again (``relaunch``) also has ``spec(id)``, one that keeps only a
# volume (``keeps_volume``) ``prepare_start(id, start_command)``, one whose accounts keep network
# volumes (``network_volumes``) ``volumes()`` and ``delete_volume(id)``.
PROTOCOL = ("list", "get", "launch", "stop", "start", "terminate", "offers", "register_key")
RELAUNCH_PROTOCOL = ("spec",)
VOLUME_PROTOCOL = ("prepare_start", "start_or_replace")
NETWORK_VOLUME_PROTOCOL = ("volumes", "delete_volume")
MAX_ANSWER = 4 * 1024 * 1024  # bytes read of any one answer
# An answer is read by one bounded reader (``read_json``): no deeper than MAX_DEPTH arrays and
# objects (json.loads recurses: a deeper one raised RecursionError, which nobody caught), no number
# longer than MAX_NUMBER characters (a 5000-digit one raised ValueError deep in a client), no NaN or
# Infinity. Every call has one DEADLINE (seconds) for all its tries, waits and reads together.
MAX_DEPTH = 32
MAX_NUMBER = 24
DEADLINE = 120.0
# Seconds of a rate limit's wait (Retry-After, a RateLimit window) read as such: a day window and
# more. A wait longer than what is left of a call's DEADLINE is not begun: the call fails at once,
# saying when to try again (``rate_limited``).
LONGEST_LIMIT = 7 * 86400
STATUSES = ("running", "starting", "stopping", "stopped", "terminated", "preempted", "unhealthy", "unknown")
# An instance that is no more: deleted, or taken back by its provider (Lambda's `preempted`): its
# node is lost, as after a termination.
GONE = ("terminated", "preempted")
INSTANCE_KEYS = ("provider", "id", "name", "status", "provider_status", "ssh_host", "ssh_port", "ssh_user", "gpus",
                 "gpu_type", "price_per_hour", "cloud", "volume")  # fmt: skip
# A network volume: storage of the account that bills by the month whether or not a pod uses it.
VOLUME_KEYS = ("provider", "id", "name", "size_gb", "region", "tier", "price_per_month")
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
PLAIN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # an instance type, region or instance name
TEXT_RE = re.compile(r"[A-Za-z0-9 _.,:/()+*=@#-]{0,128}")
LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?"
HOST_RE = re.compile(rf"(?=.{{1,253}}\Z){LABEL}(?:\.{LABEL})*")
USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
KINDS = ("auth", "billing", "capacity", "pool", "quota", "not-found", "rate-limit", "unsupported", "unreachable",
         "bad-answer", "conflict", "invalid", "created", "transient", "error")  # fmt: skip
# A create refused for one offer only: another candidate may be created (meshctl tries the next).
CANDIDATE_KINDS = ("capacity", "pool")
# cpus and memory_gb: what the whole machine must have at least (a provider that can filter its
# placement by them does: Runpod's gpu.minVcpuCountPerGpu and minRamPerGpu; the others rent by type).
LAUNCH_KEYS = ("name", "type", "gpus", "region", "image", "ssh_key_names", "public_key", "template_id", "cloud",
               "volume_gb", "cpus", "memory_gb")  # fmt: skip


def launch_option(key, flag, help, multiple=False, choices=()):
    """One of a provider's own launch options (its module's ``LAUNCH_OPTIONS``): KEY of LAUNCH_KEYS,
    the command line's FLAG for it, its HELP; MULTIPLE when it may be given more than once (a list),
    CHOICES when it takes one of those words (any case; sent as written here)."""
    if key not in LAUNCH_KEYS or not flag.startswith("--"):
        raise ValueError(f"launch option {key!r} ({flag}): not one of LAUNCH_KEYS, or not a --flag")
    return {"key": key, "flag": flag, "help": help, "multiple": multiple, "choices": tuple(choices)}


# What every provider's launch takes, whatever the provider: the module's LAUNCH_OPTIONS add its own.
COMMON_LAUNCH_OPTIONS = {"region": "--region", "cpus": "--cpus", "memory_gb": "--memory"}


class Capabilities:
    """What one provider can do, as its module declares it (``CAPABILITIES``)."""

    FIELDS = {  # noqa: RUF012 (read only)
        "name": "the provider's name in meshctl (lambda, runpod, paperspace)",
        "title": "its name for people",
        "api": "the API and version the client speaks",
        "default_url": "the API's base URL",
        "document": "the API document the client and its stand-in were written from",
        "checked": "the date the client was last compared with that document",
        "keys_url": "where a user makes an API key",
        "ssh_user": "the user a new instance is reached as",
        "can_stop": "it stops and starts an instance, which bills (compute) only while it runs",
        "keeps_disk": "a stopped instance keeps its whole disk (the node's setup)",
        "keeps_volume": "a stopped instance keeps only its volume (the container disk is wiped)",
        "keeps_address": "an instance started again keeps its SSH address and port",
        "relaunch": "no stop: a node is terminated when idle (opt-in) and launched again and set up anew",
        "pod": "an instance is a container without systemd: it joins in pod mode",
        "price": "where its $/h comes from: 'api' (the instance and its offers) or 'setting' (<name>_prices)",
        "gpu_names": "what a launch's type names (an instance type, a GPU type id, a machine type)",
        "launch_needs": "what a launch needs beyond a name and a type",
        "registers_keys": "a launch names an SSH key registered at the provider (register_key)",
        "stopped_bills": "what still bills while an instance is stopped, as its provider's document says "
        "('' when nothing does, or it cannot stop)",
        "network_volumes": "its accounts keep network volumes, which bill whether or not an instance uses them: "
        "the client lists (volumes) and deletes (delete_volume) them, and an instance says the one it mounts",
        "marks": "how one of its machines says where it runs: an environment prefix of PID 1 (env), or words "
        "of its DMI vendor, product or hostname (words)",
    }

    def __init__(self, **values):
        missing = set(self.FIELDS) - set(values)
        extra = set(values) - set(self.FIELDS)
        if missing or extra:
            raise ValueError(f"capabilities: missing {sorted(missing)}, unknown {sorted(extra)}")
        self.__dict__.update(values)

    def as_dict(self):
        return {k: getattr(self, k) for k in self.FIELDS}

    def __repr__(self):
        return f"Capabilities({self.name})"


def client_module(name):
    """The module of provider NAME (its ``Client``, ``CAPABILITIES``, ``describe``, ``normalize``)."""
    if name not in PROVIDERS:
        raise CloudError(f"unknown provider {name!r}", hint=f"use one of {', '.join(PROVIDERS)}", kind="invalid")
    return import_module(f"{__name__.rsplit('.', 1)[0]}.mesh_cloud_{name}")


def capabilities(name):
    """Provider NAME's ``Capabilities``."""
    return client_module(name).CAPABILITIES


def with_capability(flag):
    """The providers whose capability FLAG is true (``relaunch``, ``can_stop``, ``pod`` ...)."""
    return tuple(p for p in PROVIDERS if getattr(capabilities(p), flag))


class CloudError(Exception):
    """A provider call that failed: ``kind`` (one of KINDS), a message and the fix."""

    def __init__(self, message, hint="", kind="error", status=None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.kind = kind if kind in KINDS else "error"
        self.status = status
        self.nothing_made = False  # a create that failed, looked up afterwards: no instance by its name
        # A create's refusal that may be the request's fault or no capacity alike (only its words tell):
        # refused so by every candidate, it is read as the request's (Runpod's 400).
        self.request_or_capacity = False

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
    except (TypeError, ValueError, OverflowError):
        return None
    return result if minimum <= result <= maximum and result == result else None


def instance(provider, id, name, status, provider_status, ssh_host=None, ssh_port=22, ssh_user="root", gpus=0,
             gpu_type="", price_per_hour=None, cloud="", volume=""):  # fmt: skip
    """One instance in meshctl's shape. Raises CloudError when its id is not one (the rest is made safe).
    ``cloud``: where the provider runs it, when it says (Runpod: SECURE or COMMUNITY); ``volume``: the
    network volume it mounts ('' when none, or not an id)."""
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
        "cloud": text(cloud),
        "volume": volume if isinstance(volume, str) and ID_RE.fullmatch(volume) else "",
    }


def volume(provider, id, name, size_gb, region, tier="", price_per_month=None):
    """One network volume in meshctl's shape (VOLUME_KEYS). Raises CloudError when its id is not one."""
    if not isinstance(id, str) or not ID_RE.fullmatch(id):
        raise CloudError(f"{provider} answered a volume id meshctl refuses ({str(id)[:40]!r})", kind="bad-answer")
    size = number(size_gb, 0, 1e6)
    price = number(price_per_month, 0, 1e6)
    return {
        "provider": provider,
        "id": id,
        "name": text(name),
        "size_gb": int(size) if size is not None else None,
        "region": text(region),
        "tier": text(tier),
        "price_per_month": round(price, 2) if price is not None else None,
    }


OFFER_KEYS = ("provider", "type", "gpu", "gpus", "max_gpus", "price_per_hour", "regions", "available", "cloud",
              "vcpus", "memory_gb")  # fmt: skip


def offer(provider, type, gpu, gpus, price_per_hour, regions=(), available=True, cloud="", max_gpus=None, vcpus=None,
          memory_gb=None):  # fmt: skip
    """One thing a provider rents now, in meshctl's shape: ``type`` is what a launch names (an
    instance type, a GPU type id), ``gpu`` the GPU's name for people, ``gpus`` how many, ``price_per_hour``
    in USD for the whole machine, ``regions`` where it can be had (empty: the provider places it),
    ``available`` whether the provider says it can be had now; ``max_gpus`` above ``gpus`` when a
    launch may ask for more of the same GPU at ``gpus`` times the price (Runpod); ``vcpus`` and
    ``memory_gb`` what the machine has, where the provider says (Lambda's specs), else None. None
    when the answer is not one."""
    count = number(gpus, 0, 1024)
    price = number(price_per_hour, 0, 10000)
    most = number(max_gpus, 0, 1024) if max_gpus is not None else count
    if not isinstance(type, str) or not TEXT_RE.fullmatch(type) or not type or count is None or price is None:
        return None
    if price <= 0:  # nothing rents for free: a 0 is a missing price, never the cheapest offer
        return None
    return {
        "provider": provider,
        "type": type,
        "gpu": text(gpu),
        "gpus": int(count),
        "max_gpus": int(max(most or 0, count)),
        "price_per_hour": round(price, 4),
        "regions": [r for r in (text(x) for x in regions or ()) if r][:50],
        "available": bool(available),
        "cloud": text(cloud),
        "vcpus": number(vcpus, 1, 100000) if vcpus is not None else None,
        "memory_gb": number(memory_gb, 0.1, 1e7) if memory_gb is not None else None,
    }


def price_per_gpu(item):
    """An offer's $/h for one GPU (the whole price for a machine without GPUs)."""
    return item["price_per_hour"] / item["gpus"] if item["gpus"] else item["price_per_hour"]


def created_anyway(client, name, error):
    """After a create the provider may have done though it failed (a 5xx, a lost connection, a
    time-out): the instances now named NAME, as a CloudError that says what may bill and how to
    delete it; ERROR itself when the answer said plainly that nothing was made."""
    maybe_done = error.kind == "unreachable" or (error.status or 0) >= 500
    if not maybe_done:
        return error
    try:
        found = [i for i in client.list() if i["name"] == name and i["status"] not in GONE]
    except CloudError as again:
        return CloudError(f"{error.message}; the create may have been done, and {client.name} could not be asked "
                          f"whether an instance named {name} exists now ({again.message})",
                          hint=f"look for {name} in {client.name}'s console: an instance there bills until deleted",
                          kind=error.kind, status=error.status)  # fmt: skip
    if not found:
        none = CloudError(f"{error.message}; no instance named {name} exists at {client.name} now",
                          hint=error.hint or "try again", kind=error.kind, status=error.status)  # fmt: skip
        none.nothing_made = True
        return none
    ids = ", ".join(f"{i['id']} ({i['status']})" for i in found)
    return CloudError(f"{error.message}; yet {client.name} now has an instance named {name}: {ids}; it may bill",
                      hint=f"`meshctl add-node {client.name}:{found[0]['id']} --name {name}` adds it, or delete it: "
                      f"`meshctl machines --provider {client.name}` shows it, then delete it in {client.name}'s "
                      "console", kind="created", status=error.status)  # fmt: skip


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed: the request carries the key, which must reach only the API."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def rate_limit_wait(header):
    """Seconds until a request may go again from a ``RateLimit`` header (IETF draft, as Runpod sends
    it: ``"minute";r=0;t=12, "hour";r=2800;t=1812``): the longest ``t`` of a window with ``r=0``, else 0."""
    wait = 0.0
    for member in str(header or "").split(","):
        params = dict(part.strip().split("=", 1) for part in member.split(";")[1:] if "=" in part)
        remaining, reset = number(params.get("r"), 0, 1e9), number(params.get("t"), 0, LONGEST_LIMIT)
        if remaining == 0 and reset is not None:
            wait = max(wait, reset)
    return wait


def _offline(exc):
    """Whether a connection error says the API cannot be reached from here at all: its name does not
    resolve (socket.gaierror: offline, a typo) or its address refuses the connection."""
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, (socket.gaierror, ConnectionRefusedError))


class Http:
    """JSON requests to one provider's API with its key, paced and retried.

    ``min_interval``: seconds between two requests (a provider's rate limit); a ``RateLimit``
    header whose window has no request left holds the next one until it resets. A 429 waits
    Retry-After (or 1, 2, 4, 8 s) and tries again, as does a 5xx or a connection error of a GET,
    up to ``retries`` times; then the call fails with a CloudError. All of one call (its tries, its
    waits, its reads) ends within ``deadline`` seconds: a wait that would pass it is not made, and an
    answer drip-fed past it is dropped (a CloudError of kind ``unreachable``). A change (POST, PATCH,
    DELETE) is never sent twice after an answer that may mean it was done. A redirect is refused
    (never followed with the key). ``describe(status, body)`` turns a provider's error answer into
    (message, kind).
    """

    def __init__(self, provider, base_url, key, describe, min_interval=0.0, retries=4, timeout=30,
                 clock=time.monotonic, sleep=time.sleep, opener=None, deadline=DEADLINE):  # fmt: skip
        self.provider = provider
        self.deadline = deadline
        self.base_url = base_url
        self._key = key
        self.describe = describe
        self.min_interval = min_interval
        self.retries = retries
        self.timeout = timeout
        self.clock = clock
        self.sleep = sleep
        self.opener = opener or _OPENER.open
        self._last = None
        self._hold_until = None  # a RateLimit window with nothing left: no request before then
        self.calls = 0  # requests sent, for tests and benchmarks

    def _pace(self, ends, what):
        if self._hold_until is not None:
            wait = self._hold_until - self.clock()
            if wait > 0 and self.clock() + wait > ends:
                raise self.rate_limited(wait, "its RateLimit header: a window with no request left")
            self._hold_until = None
            if wait > 0:
                self._wait(wait, ends, what)
        if self._last is not None and self.min_interval:
            wait = self._last + self.min_interval - self.clock()
            if wait > 0:
                self._wait(wait, ends, what)
        self._last = self.clock()

    def rate_limited(self, seconds, said):
        """The CloudError of a rate limit that asks for a longer wait than a call makes: when to try again."""
        later = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
            f"{seconds / 3600:.1f} h"  # fmt: skip
        return CloudError(f"{self.provider} limits requests: the next is allowed in {later} ({said}), longer than "
                          f"meshctl waits within one call ({self.deadline:g} s)",
                          hint=f"try again in {later}; other commands that ask {self.provider} wait as well",
                          kind="rate-limit")  # fmt: skip

    def _wait(self, seconds, ends, what, why="a wait"):
        """Sleep SECONDS unless that passes ENDS (the call's deadline): then the call fails now."""
        if self.clock() + seconds > ends:
            raise CloudError(f"{self.provider}: {what} got no answer within {self.deadline:g} s ({why} of "
                             f"{seconds:g} s would pass it)", hint="try again later: the provider is slow or "
                             "limiting requests", kind="unreachable")  # fmt: skip
        self.sleep(seconds)

    def _read(self, answer, ends, what):
        """The answer's body, at most MAX_ANSWER + 1 bytes, read in pieces until ENDS."""
        read = getattr(answer, "read1", None) or answer.read
        parts, size = [], 0
        while size <= MAX_ANSWER:
            if self.clock() > ends:
                raise CloudError(f"{self.provider}: {what} was still answering after {self.deadline:g} s",
                                 hint="try again later: the provider is slow", kind="unreachable")  # fmt: skip
            part = read(min(65536, MAX_ANSWER + 1 - size))
            if not part:
                break
            parts.append(part)
            size += len(part)
        return b"".join(parts)

    def request(self, method, path, body=None, query=None):
        url = self.base_url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self._key}", "Accept": "application/json", "User-Agent": "meshctl"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        what = f"{method} {path.split('?')[0]}"
        ends = self.clock() + self.deadline
        for attempt in range(self.retries + 1):
            self._pace(ends, what)
            self.calls += 1
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                left = max(1.0, min(self.timeout, ends - self.clock()))
                with self.opener(request, timeout=left) as answer:
                    self._note_limits(answer.headers)
                    return read_json(self._read(answer, ends, what), self.provider)
            except urllib.error.HTTPError as exc:
                status = exc.code
                if 300 <= status < 400:
                    where = exc.headers.get("Location", "?") if exc.headers else "?"
                    raise CloudError(f"{self.provider}'s API answered {method} {path.split('?')[0]} with a redirect "
                                     f"({status}) to {text(where, 'another address')}; meshctl does not follow "
                                     "redirects (the API key would go with them)",
                                     hint=f"check the API's address (MESHCTL_{self.provider.upper()}_API_URL, or a "
                                     "proxy in between)", kind="error", status=status) from None  # fmt: skip
                try:
                    payload = _json_or_none(exc.read(MAX_ANSWER + 1))
                except OSError:
                    payload = None
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                # 429: nothing was done, ask again. A 5xx or a lost connection may have done it: only a
                # read is asked again (a launch sent twice could rent two machines).
                # A provider's own word that the trouble is passing (Lambda's provider/ codes) is a 5xx.
                passing = status >= 500 or self.describe(status, payload)[1] == "transient"
                if (status == 429 or (passing and method == "GET")) and attempt < self.retries:
                    delay = _delay(retry_after, attempt)
                    if status == 429 and self.clock() + delay > ends:
                        raise self.rate_limited(delay, f"its Retry-After: {delay:g} s") from None
                    self._wait(delay, ends, what, f"its Retry-After ({status})")
                    continue
                raise self._error(method, path, status, payload) from None
            except (urllib.error.URLError, OSError) as exc:
                # A name this machine cannot resolve, or an address that refuses: offline, or the
                # wrong address. Asked again it answers the same; a timeout or a reset may not.
                if method == "GET" and attempt < self.retries and not _offline(exc):
                    self._wait(_delay(None, attempt), ends, what)
                    continue
                reason = getattr(exc, "reason", exc)
                raise CloudError(f"{self.provider}'s API at {self.base_url} cannot be reached ({reason})",
                                 hint=f"check the network (or MESHCTL_{self.provider.upper()}_API_URL)",
                                 kind="unreachable") from None  # fmt: skip
        raise CloudError(f"{self.provider}: no answer after {self.retries + 1} tries", kind="unreachable")

    def _note_limits(self, headers):
        wait = rate_limit_wait(headers.get("RateLimit") if headers else None)
        if wait:
            self._hold_until = self.clock() + wait

    def _error(self, method, path, status, payload):
        message, kind = self.describe(status, payload)
        where = f"{self.provider} refused {method} {path.split('?')[0]} ({status}): {message}"
        if status == 401 or kind == "auth" or (status == 403 and kind == "error"):
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
            "billing": f"the account's balance or billing details need seeing to in {self.provider}'s console "
            "(the key is fine); no other offer will do until then",
            "not-found": "`meshctl machines` lists what the provider has",
            "conflict": "the instance is not in a state that allows it now: `meshctl machines` shows its status",
            "invalid": "meshctl sent something the provider refuses: report it with the message above",
            "transient": "the provider says its own side is unavailable for a moment: try again shortly",
        }
        return CloudError(where, hint=hints.get(kind, ""), kind=kind, status=status)


def _delay(retry_after, attempt):
    seconds = number(retry_after, 0, LONGEST_LIMIT)
    return seconds if seconds is not None else min(2**attempt, 30)


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(rb"[][{}]")


def nesting(raw):
    """How deep RAW's (JSON bytes) arrays and objects nest, its strings left out: what a reader asks
    before it parses an answer from a machine it does not trust (a parser recurses per level)."""
    return _depth(raw)


def _depth(raw):
    """How deep RAW's arrays and objects nest (its strings left out)."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub(b'""', raw)):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _number(kind):
    def parse(token):
        if len(token) > MAX_NUMBER:
            raise ValueError(f"a number of {len(token)} characters")
        return kind(token)

    return parse


def _no_constant(token):
    raise ValueError(f"{token} is not a number meshctl reads")


def read_json(raw, provider):
    """A provider's answer (bytes) as data, or a CloudError of kind ``bad-answer``: at most MAX_ANSWER
    bytes, MAX_DEPTH levels deep, numbers of at most MAX_NUMBER characters, no NaN or Infinity. None
    for an empty answer."""
    if len(raw) > MAX_ANSWER:
        raise CloudError(f"{provider} answered more than {MAX_ANSWER // 1024 // 1024} MiB", kind="bad-answer")
    if not raw.strip():
        return None
    if _depth(raw) > MAX_DEPTH:
        raise CloudError(f"{provider} answered JSON nested deeper than {MAX_DEPTH} levels", kind="bad-answer")
    try:
        return json.loads(raw, parse_int=_number(int), parse_float=_number(float), parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        why = str(exc) if str(exc).startswith(("a number", "NaN", "Infinity", "-Infinity")) else "not JSON"
        raise CloudError(f"{provider} answered something meshctl does not read ({why})", kind="bad-answer") from None


def _json_or_none(raw):
    try:
        return read_json(raw, "") if raw else None
    except CloudError:
        return None


def problem_message(payload):
    """The message of an RFC 9457 problem (``{title, status, detail, errors}``): the detail, then each
    validation error; ``no message`` when PAYLOAD is none."""
    if not isinstance(payload, dict):
        return "no message"
    parts = [message_of(payload, ("detail",)), message_of(payload, ("title",))]
    message = next((p for p in parts if p != "no message"), "no message")
    errors = payload.get("errors")
    if isinstance(errors, list):
        extra = [printable(e)[:200] for e in errors[:5] if isinstance(e, str) and printable(e)]
        if extra:
            message += " (" + "; ".join(extra) + ")"
    return message


def printable(value):
    """VALUE cleaned by the one sanitizer (``mesh_text.clean``: escape sequences whole, control, format
    and unassigned characters), its whitespace runs one space: a provider's words as they may be shown,
    logged or given to Slurm as a node's reason."""
    return " ".join(clean(value).split())


def message_of(payload, *paths):
    """The first plain message found at one of PATHS (tuples of keys) in an error payload."""
    for path in paths:
        value = payload
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and printable(value):
            return printable(value)[:300]
    return "no message"
