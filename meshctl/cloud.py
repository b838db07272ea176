"""Rented machines through their providers' APIs: accounts, instances, offers, and which node each is.

The clients are the collection's (``plugins/module_utils/mesh_cloud_<provider>.py``, one per
provider behind one interface, so the head can call them too); what a provider can do is its
capabilities (``capabilities(provider)``), asked here instead of its name. This module keeps the
accounts (an API key per provider in ``secrets/providers/``, 0600, vault-encrypted when the mesh has
a vault), matches instances with nodes (a node records its instance as ``<provider>:<id>``), and
lists and picks offers across the configured providers.
"""

from __future__ import annotations

import re
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from meshctl import core
from meshctl.errors import PartialError, ProviderError, ProviderUnreachable, UsageError  # noqa: F401
from meshctl.mesh import Mesh
from meshctl.model import RENTED, Node, check_host
from meshctl.vault import for_mesh, read_secret, write_secret


def common():
    return core.mesh_cloud


PROVIDERS = RENTED  # the collection's list (mesh_cloud.PROVIDERS)
ADD_ACCOUNT = f"`meshctl provider add {'|'.join(PROVIDERS)} --key-file FILE`"  # what to run when there is none
RELAUNCHED = common().with_capability("relaunch")  # no stop: terminated when idle, launched again by the head
# A stopped instance keeps only its volume: one whose host has no GPU left comes back as a new
# instance of its network volume, named as the node, with the host keys kept there (the head's
# power program: the client's start_or_replace).
REPLACED = tuple(p for p in common().with_capability("keeps_volume") if not common().capabilities(p).keeps_disk)
# What meshctl says of a machine on a host run by a third party (Runpod's Community Cloud), wherever it shows one.
THIRD_PARTY_HOST = ("Community Cloud: the host is run by a third party, whose root can read and change the node "
                    "and, through it, act in the cluster as any job user (docs/trust.md)")  # fmt: skip
CLOUDS = tuple(sorted({c for p in PROVIDERS for c in getattr(common().client_module(p), "CLOUDS", ())}))


def launch_options() -> list[tuple[str, dict]]:
    """Every provider's own launch options, ``(provider, option)`` (its module's ``LAUNCH_OPTIONS``:
    key, flag, help, multiple, choices), in the order of PROVIDERS."""
    return [(p, option) for p in PROVIDERS for option in getattr(common().client_module(p), "LAUNCH_OPTIONS", ())]


def launch_flags() -> dict[str, str]:
    """The command line's flag of every launch key: the common ones, then each provider's."""
    return {**common().COMMON_LAUNCH_OPTIONS, **{option["key"]: option["flag"] for _p, option in launch_options()}}


KEY_FOLDER = "providers"  # under the mesh's secrets/
MAX_KEY_BYTES = 4096
KEY_RE = re.compile(r"[A-Za-z0-9_.:+/=-]{8,512}")
TARGET_RE = re.compile(rf"^({'|'.join(PROVIDERS)}):(.+)\Z")
GPU_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9 _.-]{0,40}?)(?::(\d{1,2}))?\Z")


def module(provider: str):
    return common().client_module(check_provider(provider))


def capabilities(provider: str):
    """What PROVIDER can do (its module's CAPABILITIES)."""
    return module(provider).CAPABILITIES


def provider_of(node: Node) -> str | None:
    """The provider of NODE's recorded instance, or None."""
    provider = (node.instance or "").split(":", 1)[0]
    return provider if provider in PROVIDERS else None


def check_provider(provider: str) -> str:
    if provider not in PROVIDERS:
        raise UsageError(f"unknown provider {provider!r}", hint=f"use one of {', '.join(PROVIDERS)}")
    return provider


def key_path(mesh: Mesh, provider: str) -> Path:
    return mesh.secrets / KEY_FOLDER / f"{check_provider(provider)}.key"


def configured(mesh: Mesh) -> list[str]:
    """The providers the mesh holds a key for."""
    return [p for p in PROVIDERS if key_path(mesh, p).is_file()]


def read_key_file(key_file: str) -> str:
    """The API key from FILE (or standard input for ``-``); never echoed."""
    if key_file == "-":
        text = sys.stdin.read(MAX_KEY_BYTES + 1) if sys.stdin and not sys.stdin.closed else ""
    else:
        path = Path(key_file)
        try:
            mode = path.stat().st_mode
            if not stat.S_ISREG(mode):
                raise UsageError(f"{key_file} is not a regular file", hint="save the key in a file (chmod 600)")
            if stat.S_IMODE(mode) & 0o077:  # as a Tailscale key file is refused (meshctl/tailnet.py)
                raise UsageError(f"{key_file} can be read by others (mode {stat.S_IMODE(mode):04o}): the API key "
                                 "in it rents machines on your account",
                                 hint=f"chmod 600 {key_file}, then run it again (and make a new key if others may "
                                 "have read it)")  # fmt: skip
            data = path.open("rb").read(MAX_KEY_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"cannot read the key file {key_file}: {exc.strerror}",
                             hint="pass the file that holds the key, not the key itself") from None  # fmt: skip
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"{key_file} is not text", hint="an API key is one line of text") from None
    key = text.strip()
    if len(text) > MAX_KEY_BYTES or not KEY_RE.fullmatch(key):
        raise UsageError("the key file does not hold one API key (one line, letters, digits and _.:+/=-)",
                         hint="save only the key in the file")  # fmt: skip
    return key


def stored_key(mesh: Mesh, mesh_vars: dict, provider: str) -> str:
    path = key_path(mesh, provider)
    if not path.is_file():
        raise UsageError(
            f"the mesh has no {provider} account",
            hint=f"`meshctl provider add {provider} --key-file FILE` (a key from {capabilities(provider).keys_url})",
        )
    return read_secret(path, for_mesh(mesh_vars)).decode().strip()


def client(provider: str, key: str, prices: dict | None = None):
    """The provider's client (its API URL from MESHCTL_<PROVIDER>_API_URL when set); PRICES: $/h per
    machine type, for a provider whose API gives none (capability ``price`` is ``setting``)."""
    try:
        return module(provider).Client(key, prices=prices if isinstance(prices, dict) else {})
    except common().CloudError as exc:
        raise_for(exc)


def unreachable_fix(provider: str | list[str] | None = None) -> str:
    """What to do when a provider's API cannot be reached: the network, its URL's override."""
    names = [provider] if isinstance(provider, str) else list(provider or PROVIDERS)
    overrides = " or ".join(f"MESHCTL_{p.upper()}_API_URL" for p in names)
    return (
        f"check this machine's network (or {overrides}) and each account (`meshctl provider list`), then run "
        "the command again"
    )


def account(mesh: Mesh, mesh_vars: dict, provider: str):
    """The client of the mesh's account with PROVIDER (its stored key; ``<provider>_prices`` from
    mesh.yml or group_vars/all.yml where its API gives no price)."""
    prices = mesh.setting(f"{provider}_prices", mesh_vars) if capabilities(provider).price == "setting" else None
    return client(provider, stored_key(mesh, mesh_vars, provider), prices)


def call(what, *args):
    """Run a client call; its CloudError becomes a ProviderError (message and fix), or a UsageError
    when the provider refused what the user asked for (kind ``invalid``)."""
    try:
        return what(*args)
    except common().CloudError as exc:
        raise_for(exc)


def add_account(mesh: Mesh, mesh_vars: dict, provider: str, key: str, check: bool = True) -> int:
    """Store PROVIDER's key, after the provider accepts it (``check``); returns its instance count."""
    count = len(call(client(check_provider(provider), key).list)) if check else 0
    mesh.secrets.mkdir(mode=0o700, exist_ok=True)
    write_secret(key_path(mesh, provider), (key + "\n").encode(), for_mesh(mesh_vars))
    return count


def remove_account(mesh: Mesh, provider: str) -> None:
    path = key_path(mesh, provider)
    if not path.is_file():
        raise UsageError(f"the mesh has no {provider} account", hint="`meshctl provider list` lists them")
    path.unlink()


def instance_ref(instance: dict) -> str:
    return f"{instance['provider']}:{instance['id']}"


@dataclass
class MachineRow:
    provider: str
    id: str
    name: str
    status: str
    ssh_host: str | None
    gpus: int
    gpu_type: str
    price_per_hour: float | None
    node: str | None
    cloud: str = ""
    volume: str = ""  # the network volume it mounts (a provider with ``network_volumes``), or ""


@dataclass
class VolumeRow:
    """A network volume of a provider account: it bills by its size whether or not anything uses it."""

    provider: str
    id: str
    name: str
    size_gb: int | None
    region: str
    tier: str
    price_per_month: float | None
    used_by: list[str]  # the live instances that mount it: their node, else their name

    def words(self) -> str:
        """What it is and costs: ``runpod network volume ID (NAME, 20 GB, EU-RO-1, $1.40/month)``."""
        size = f"{self.size_gb} GB" if self.size_gb is not None else "size unknown"
        price = f"${self.price_per_month:.2f}/month" if self.price_per_month is not None else "price unknown"
        return f"{self.provider} network volume {self.id} ({self.name or '-'}, {size}, {self.region or '?'}, {price})"

    def left_words(self) -> str:
        """A volume no instance uses: what bills, and the fix."""
        return (f"{self.words()} is used by no instance: it bills until it is deleted (delete it at "
                f"{capabilities(self.provider).title} once its data is saved, or mount it on a pod)")  # fmt: skip


def relaunched_as(instance: dict, node: Node) -> bool:
    """Whether INSTANCE may be NODE launched again by the head: an instance of a provider whose nodes
    are launched again (or put on a new instance of their volume), named as a node of that provider
    (role power_save names it so)."""
    return instance["provider"] in RELAUNCHED + REPLACED and provider_of(node) == instance["provider"] and \
        instance["name"] == node.name  # fmt: skip


def node_of(instance: dict, nodes: list[Node]) -> str | None:
    """The node an instance is: the one that recorded it, else one at its SSH address and port,
    else (Lambda) the node it is named as, which the head launched it again for (the next
    ``meshctl apply`` records it there: ``moved``)."""
    ref = instance_ref(instance)
    for node in nodes:
        if node.instance == ref:
            return node.name
    for node in nodes:
        if instance["ssh_host"] and node.host == instance["ssh_host"] and node.port == instance["ssh_port"]:
            return node.name
    return next((node.name for node in nodes if relaunched_as(instance, node)), None)


def ask_each(mesh: Mesh, mesh_vars: dict, method: str, provider: str | None = None,
             *args) -> tuple[dict, dict[str, str]]:  # fmt: skip
    """METHOD (``list``, ``offers``) of every configured provider's client (or PROVIDER's), given ARGS:
    ``({provider: answer}, {provider: what went wrong})``; one provider failing is one problem."""
    if provider and check_provider(provider) not in configured(mesh):
        raise UsageError(f"the mesh has no {provider} account",
                         hint=f"`meshctl provider add {provider} --key-file FILE`")  # fmt: skip
    answers, problems = {}, {}
    asked = [provider] if provider else configured(mesh)
    if asked and sys.stderr is not None and sys.stderr.isatty():  # a slow or retried answer is no silence
        print(f"asking {', '.join(asked)} ...", file=sys.stderr, flush=True)
    unreachable = []
    for name in asked:
        try:
            answers[name] = call(getattr(account(mesh, mesh_vars, name), method), *args)
        except (ProviderError, UsageError) as exc:
            problems[name] = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
            if isinstance(exc, ProviderUnreachable):
                unreachable.append(name)
                problems[name] = exc.message  # the network's fix is said once, for all of them
    if asked and len(unreachable) == len(asked):  # nothing to choose from: the network, never "no offer"
        said = "; ".join(f"{p}: {problems[p]}" for p in unreachable)
        raise ProviderUnreachable(f"no provider answered: {said}", hint=unreachable_fix(unreachable))
    return answers, problems


def raise_for_problems(problems: dict[str, str], answered: int, listed: str) -> None:
    """The end of a command that asked every provider: exit 8 (ProviderError) when none answered, and
    when some did (their LISTED, offers or machines, shown above): the network or an account either way."""
    if not problems:
        return
    said = "; ".join(f"{p}: {m}" for p, m in problems.items())
    if not answered:
        raise ProviderError(f"no provider answered: {said}",
                            hint="check this machine's network and each account (`meshctl provider list`), "
                            "then run the command again")  # fmt: skip
    raise ProviderError(f"some providers did not answer: {said}",
                        hint=f"the {listed} of the others are listed above; check this machine's network and "
                        "each account (`meshctl provider list`), then run the command again")  # fmt: skip


def machines(mesh: Mesh, nodes: list[Node], mesh_vars: dict, provider: str | None = None):
    """Every instance of every configured provider (or PROVIDER's), each with its node or None.

    Returns (rows, problems): a provider that fails is one problem (its message), not the end.
    """
    rows = []
    answers, problems = ask_each(mesh, mesh_vars, "list", provider)
    for name, found in answers.items():
        for inst in found:
            rows.append(MachineRow(name, inst["id"], inst["name"], inst["status"], inst["ssh_host"], inst["gpus"],
                                   inst["gpu_type"], inst["price_per_hour"], node_of(inst, nodes),
                                   inst.get("cloud") or "", inst.get("volume") or ""))  # fmt: skip
    return rows, problems


def volumes(mesh: Mesh, mesh_vars: dict, rows: list[MachineRow],
            provider: str | None = None) -> tuple[list[VolumeRow], dict[str, str]]:  # fmt: skip
    """The network volumes of every configured provider that keeps them (or PROVIDER's), each with the
    live instances of ROWS (``machines``) that mount it. Returns (volumes, problems), as ``machines``."""
    found, problems = [], {}
    for name in configured(mesh):
        if (provider and name != provider) or not capabilities(name).network_volumes:
            continue
        try:
            answer = call(account(mesh, mesh_vars, name).volumes)
        except (ProviderError, UsageError) as exc:
            problems[name] = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
            continue
        for item in answer:
            users = [r.node or r.name for r in rows
                     if r.provider == name and r.volume == item["id"] and r.status not in common().GONE]  # fmt: skip
            found.append(VolumeRow(name, item["id"], item["name"], item["size_gb"], item["region"], item["tier"],
                                   item["price_per_month"], users))  # fmt: skip
    return found, problems


def volume_of(mesh: Mesh, mesh_vars: dict, ref: str) -> tuple[VolumeRow | None, list[str]]:
    """The network volume the instance REF (``provider:id``) mounts, or None, and the other live
    instances that mount it too (their node or name)."""
    provider, _, instance_id = ref.partition(":")
    if not capabilities(provider).network_volumes:
        return None, []
    client_ = account(mesh, mesh_vars, provider)
    try:
        wanted = client_.get(instance_id).get("volume")
    except common().CloudError as exc:
        if exc.kind == "not-found":  # gone already: nothing of it to ask about
            return None, []
        raise_for(exc)
    if not wanted:
        return None, []
    others = [i["name"] or i["id"] for i in call(client_.list)
              if i.get("volume") == wanted and i["id"] != instance_id and i["status"] not in common().GONE]  # fmt: skip
    row = next((v for v in call(client_.volumes) if v["id"] == wanted), None)
    if row is None:  # listed by the pod, not by the account: nothing of it to delete
        return None, others
    return VolumeRow(provider, row["id"], row["name"], row["size_gb"], row["region"], row["tier"],
                     row["price_per_month"], [instance_id, *others]), others  # fmt: skip


def machine_gone(mesh: Mesh, mesh_vars: dict, node: Node) -> str:
    """How NODE's machine is not there, as its provider says (``stopped at runpod``, ``terminated at
    lambda``, ``gone from lambda``), or '' when it may run, or its provider cannot be asked. A node
    whose machine the head replaces by name (a pool's, one launched again, a pod moved to a new pod
    of its volume) has none gone while an instance named as it runs."""
    provider = provider_of(node)
    if not node.instance or provider is None or provider not in configured(mesh):
        return ""
    api, own = account(mesh, mesh_vars, provider), node.instance.partition(":")[2]
    try:
        status = api.get(own)["status"]
    except common().CloudError as exc:
        if exc.kind != "not-found":
            return ""
        status = "gone"
    except ProviderError:
        return ""
    if status not in (*common().GONE, "stopped", "gone"):
        return ""
    try:
        again = [i for i in api.list() if i["name"] == node.name and i["id"] != own
                 and i["status"] not in (*common().GONE, "stopped", "stopping")]  # fmt: skip
    except (common().CloudError, ProviderError):
        return ""
    if again:
        return ""
    return f"gone from {provider}" if status == "gone" else f"{status} at {provider}"


def delete_volume(mesh: Mesh, mesh_vars: dict, row: VolumeRow) -> None:
    call(account(mesh, mesh_vars, row.provider).delete_volume, row.id)


def moved(mesh: Mesh, nodes: list[Node], mesh_vars: dict) -> tuple[list[tuple[Node, str, int, str]], dict[str, str]]:
    """Rented nodes whose instance runs at another SSH address or port than the one recorded (a
    Runpod pod started again gets another port, a Paperspace machine may get another public IP),
    or that run as another instance now (a Lambda node the head launched again after Slurm
    terminated it while idle: the recorded instance is gone, a running one bears the node's name):
    ``[(node, host, port, instance)]``, and the providers that could not be asked (their message).

    One list call per provider that a node's instance belongs to; nothing when none is configured.
    """
    wanted = {node.instance.split(":", 1)[0] for node in nodes if node.instance}
    moves, problems = [], {}
    for name in [p for p in configured(mesh) if p in wanted]:
        try:
            found = call(client(name, stored_key(mesh, mesh_vars, name)).list)
        except ProviderError as exc:
            problems[name] = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
            continue
        by_ref = {instance_ref(inst): inst for inst in found if inst["status"] not in common().GONE}
        taken = {node.instance for node in nodes if node.instance}
        for node in nodes:
            inst = by_ref.get(node.instance or "")
            if inst is None:
                again = [i for ref, i in by_ref.items() if relaunched_as(i, node) and ref not in taken]
                inst = again[0] if len(again) == 1 else None
            if not inst or inst["status"] != "running" or not inst["ssh_host"] or not inst["ssh_port"]:
                continue
            try:
                host, port = check_host(str(inst["ssh_host"])), int(inst["ssh_port"])
            except (UsageError, TypeError, ValueError):
                problems[name] = f"{name} gave {node.name} an SSH address that is none: {inst['ssh_host']!r}"
                continue
            ref = instance_ref(inst)
            if 0 < port < 65536 and ((host, port) != (node.host, node.port) or ref != node.instance):
                moves.append((node, host, port, ref))
    return moves, problems


def costing(rows: list[MachineRow]) -> tuple[float, list[MachineRow]]:
    """The $/h of every running instance, and the ones that cost money while in no mesh node."""
    running = [r for r in rows if r.status in ("running", "starting", "unhealthy")]
    total = sum(r.price_per_hour or 0.0 for r in running)
    return round(total, 4), [r for r in running if r.node is None]


def find_instance(mesh: Mesh, mesh_vars: dict, provider: str, wanted: str) -> dict:
    """The one instance of PROVIDER named (or with the id) WANTED, running and reachable over SSH."""
    found = call(account(mesh, mesh_vars, provider).list)
    matches = [i for i in found if i["id"] == wanted] or [i for i in found if i["name"] == wanted]
    if not matches:
        names = ", ".join(sorted(i["name"] or i["id"] for i in found)) or "none"
        raise UsageError(f"{provider} has no instance named {wanted!r} (it has: {names})",
                         hint=f"`meshctl machines --provider {provider}` lists them")  # fmt: skip
    if len(matches) > 1:
        ids = ", ".join(i["id"] for i in matches)
        raise UsageError(f"{provider} has {len(matches)} instances named {wanted!r} ({ids})",
                         hint=f"name it by id: `meshctl add-node {provider}:ID`")  # fmt: skip
    inst = matches[0]
    if inst["status"] != "running":
        if inst["status"] in ("starting", "stopping"):
            hint = "wait until it runs (`meshctl machines` shows its status), then add it"
        elif capabilities(provider).can_stop and inst["status"] not in common().GONE:
            hint = "start it in the provider's console, then add it"
        else:
            hint = "it cannot be started again: launch a new one (`meshctl launch`)"
        raise UsageError(f"{provider} instance {wanted} is {inst['status']} ({inst['provider_status']})", hint=hint)
    if not inst["ssh_host"] or not inst["ssh_port"]:
        raise UsageError(f"{provider} instance {wanted} has no SSH address yet",
                         hint="wait until it runs, then add it again")  # fmt: skip
    return inst


def target_of(mesh: Mesh, mesh_vars: dict, target: str) -> tuple[str, str, str, bool, str] | None:
    """For ``PROVIDER:NAME``: (USER@HOST:PORT, provider, instance ref, pod, cloud type: Runpod's SECURE
    or COMMUNITY, else ""); None for an SSH target."""
    match = TARGET_RE.match(target)
    if not match:
        return None
    provider, wanted = match.groups()
    inst = find_instance(mesh, mesh_vars, provider, wanted)
    ssh = f"{inst['ssh_user']}@{inst['ssh_host']}:{inst['ssh_port']}"
    return ssh, provider, instance_ref(inst), capabilities(provider).pod, str(inst.get("cloud") or "")


def node_prices(
    mesh: Mesh, nodes: list[Node], mesh_vars: dict, now: bool = True
) -> tuple[dict[str, float | None], dict[str, str]]:
    """Each node that is a provider's instance: its $/h (``now``: 0 while it is stopped); and problems."""
    rows, problems = machines(mesh, nodes, mesh_vars)
    return prices_of(rows, now), problems


def prices_of(rows: list[MachineRow], now: bool = True) -> dict[str, float | None]:
    """Each node's $/h of ROWS (``now``: 0 while it is stopped)."""
    prices = {}
    for row in rows:
        if row.node is not None:
            running = row.status in ("running", "starting", "unhealthy")
            prices[row.node] = row.price_per_hour if running or not now else 0.0
    return prices


def stopped_bills(rows: list[MachineRow]) -> dict[str, str]:
    """Each node whose instance is stopped and still bills for something: what, as its provider's
    document says (the capability ``stopped_bills``: Runpod's volume disk)."""
    stopped = [row for row in rows if row.node is not None and row.status == "stopped"]
    return {row.node: capabilities(row.provider).stopped_bills for row in stopped
            if capabilities(row.provider).stopped_bills}  # fmt: skip


class PriceLookup:
    """``node_prices`` in a thread, started now and read later: status asks the providers while
    Ansible reads the nodes, so the prices cost no time of their own."""

    def __init__(self, mesh: Mesh, nodes: list[Node], mesh_vars: dict, now: bool = True) -> None:
        import threading

        self.now = now
        self.prices: dict[str, float | None] = {}
        self.stopped: dict[str, str] = {}  # node -> what still bills while its instance is stopped
        self.problems: dict[str, str] = {}
        self.rows: list[MachineRow] = []  # every instance the providers listed (burst pools' among them)
        self.volumes: list[VolumeRow] = []  # the accounts' network volumes (a provider that keeps them)
        self.volume_problems: dict[str, str] = {}
        self._thread = None
        self._started = time.monotonic()
        if configured(mesh):
            self._thread = threading.Thread(target=self._run, args=(mesh, nodes, mesh_vars), daemon=True)
            self._thread.start()

    def _run(self, mesh, nodes, mesh_vars) -> None:
        try:
            rows, self.problems = machines(mesh, nodes, mesh_vars)
            self.rows = rows
            self.prices, self.stopped = prices_of(rows, self.now), stopped_bills(rows)
            self.volumes, self.volume_problems = volumes(mesh, mesh_vars, rows)
        except Exception as exc:
            self.problems = {"providers": str(exc)}

    def result(self, timeout: float = 15) -> tuple[dict[str, float | None], dict[str, str]]:
        """The prices, waiting at most until TIMEOUT seconds after the lookup started (the time the
        nodes' reads took counts: an offline provider adds nothing to an offline node's wait)."""
        if self._thread is not None:
            self._thread.join(max(0.0, self._started + timeout - time.monotonic()))
            if self._thread.is_alive():
                return {}, {"providers": f"no answer within {timeout:.0f} s"}
        return self.prices, self.problems


LAUNCH_TIMEOUT = 900  # seconds a new instance may take to run and answer on SSH


def wait_for_ssh(host: str, port: int, timeout: float, connect=None, clock=None, sleep=None) -> None:
    """Wait until HOST:PORT accepts a TCP connection (sshd is up); raise with what to do after TIMEOUT."""
    import socket
    import time

    connect = connect or socket.create_connection
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    deadline = clock() + timeout
    while True:
        try:
            connect((host, port), timeout=5).close()
            return
        except OSError:
            if clock() >= deadline:
                raise ProviderError(f"{host}:{port} did not answer on SSH within {timeout:.0f} s",
                                    hint="the instance runs (and bills): `meshctl add-node PROVIDER:NAME` once it "
                                    "answers, or terminate it") from None  # fmt: skip
            sleep(5)


class CandidateRefused(ProviderError):
    """A create refused for this offer only (no capacity, a pool the account cannot use), or one that
    failed and, looked up, made nothing: the next candidate may be tried. ``ambiguous``: the provider
    cannot say whether it is the request's fault or no capacity (``request_or_capacity``)."""

    def __init__(self, message: str, hint: str = "", ambiguous: bool = False):
        super().__init__(message, hint=hint)
        self.ambiguous = ambiguous


CREATE_TRIES = core.mesh_machine.CREATE_TRIES  # a create answered with a 5xx that made nothing is sent again


def launch(mesh: Mesh, mesh_vars: dict, provider: str, kind: str, name: str, options: dict,
           timeout: float = LAUNCH_TIMEOUT, clock=None, sleep=None) -> dict:  # fmt: skip
    """Create an instance at PROVIDER and wait until it runs with an SSH address; returns it.

    OPTIONS: what a launch may name beyond the type and name (``mesh_cloud.LAUNCH_KEYS``: ``gpus``,
    ``region``, ``ssh_key_names``, ``image``, ``public_key``, ``template_id``, ``cloud``, ``volume_gb``,
    ``cpus``, ``memory_gb``); the provider's client says which it needs. A create that failed in a way
    that may have made the instance all the same (a 5xx, a lost connection) is looked up by its name,
    and the error says what may bill and how to delete it; a 5xx that made nothing is a passing
    failure upstream (Runpod's create: "Retry the same candidate with backoff"): sent again, up to
    CREATE_TRIES, 5 then 10 s apart. A create refused for this offer only, or looked up and found to
    have made nothing, raises CandidateRefused.
    """
    import time

    clock, sleep = clock or time.monotonic, sleep or time.sleep
    api = account(mesh, mesh_vars, check_provider(provider))
    keys = common().LAUNCH_KEYS
    request = {k: v for k, v in {**options, "type": kind, "name": name}.items() if k in keys and v not in (None, "")}
    try:
        new_id = core.mesh_machine.create(api, request, sleep=sleep, tries=CREATE_TRIES)
    except common().CloudError as error:
        if error.kind in common().CANDIDATE_KINDS or getattr(error, "nothing_made", False):
            raise CandidateRefused(
                error.message, hint=error.hint, ambiguous=getattr(error, "request_or_capacity", False)
            ) from None
        raise_for(error)
    deadline = clock() + timeout
    while True:
        inst = call(api.get, new_id)
        if inst["status"] == "running" and inst["ssh_host"] and inst["ssh_port"]:
            return inst
        if inst["status"] in (*common().GONE, "unhealthy") or clock() >= deadline:
            raise ProviderError(f"{provider} instance {new_id} is {inst['status']} ({inst['provider_status']}), "
                                "not running", hint=f"`meshctl machines --provider {provider}` shows it; "
                                "terminate it at the provider if it stays so")  # fmt: skip
        sleep(5)


def launch_first(mesh: Mesh, mesh_vars: dict, candidates: list, name: str, say=None, **wait) -> tuple:
    """Try CANDIDATES (``(offer, provider, kind, options)``, in order) until one is created; returns
    ``(offer, instance)``. A candidate refused for itself only (CandidateRefused) is skipped, said in
    one line; any other failure stops at once (a create that may have made an instance is never
    followed by another). None created: a ProviderError naming each refusal."""
    say = say or (lambda _line: None)
    refused, ambiguous = [], []
    for offer, provider, kind, options in candidates:
        try:
            return offer, launch(mesh, mesh_vars, provider, kind, name, options, **wait)
        except CandidateRefused as exc:
            where = ", ".join(part for part in (kind, options.get("cloud"), options.get("region")) if part)
            price = f" at ${offer.price_per_hour:.2f}/h" if offer is not None else ""
            refused.append(f"{provider} ({where}){price}: {exc.message}")
            ambiguous.append(exc.ambiguous)
            say(f"skipped {provider} ({where}){price}: {exc.message}" + (" - trying the next offer" if
                len(refused) < len(candidates) else ""))  # fmt: skip
    if len(ambiguous) > 1 and all(ambiguous):
        # A refusal that is a broken rule or no capacity alike (only its words tell) is read as the
        # request's problem when every candidate gives one: a rule breaks the same on each.
        raise ProviderError(f"every offer ({len(refused)}) was refused with an answer that means a problem with "
                            "the request or no capacity alike: read as a problem with the request; the last: "
                            f"{refused[-1]}", hint="check what was asked (the GPU count, the pool's --cpus and "
                            "--memory, the region, the image); if it is right, try again later")  # fmt: skip
    raise ProviderError(f"no offer could be rented ({len(refused)} tried): " + "; ".join(refused),
                        hint="`meshctl offers` lists what there is; try again later, another GPU or a higher "
                        "--max-price (when every offer was refused alike, the last reason may be about the "
                        "request itself)")  # fmt: skip


def raise_for(error) -> None:
    """Raise a client's CloudError as meshctl's error: the user's (``invalid``) or the provider's."""
    if error.kind == "invalid":
        raise UsageError(error.message, hint=error.hint) from None
    if error.kind == "unreachable":  # the network or the provider's side, one outcome (exit 8)
        provider = next((p for p in PROVIDERS if error.message.lower().startswith(p)), None)
        raise ProviderUnreachable(error.message, hint=unreachable_fix(provider)) from None
    raise ProviderError(error.message, hint=error.hint) from None


def terminate(mesh: Mesh, mesh_vars: dict, ref: str) -> None:
    """Delete the instance REF (``provider:id``) at its provider (``mesh_machine.give_back``)."""
    provider, _, instance_id = ref.partition(":")
    call(core.mesh_machine.give_back, account(mesh, mesh_vars, provider), instance_id)


# --- offers across providers --------------------------------------------------------------------


@dataclass
class Offer:
    provider: str
    type: str  # what a launch names (an instance type, a GPU type id)
    gpu: str
    gpus: int
    price_per_hour: float
    price_per_gpu: float
    regions: list[str]
    available: bool
    cloud: str
    vcpus: int | None = None  # what the machine has, where the provider says (Lambda)
    memory_gb: float | None = None


def parse_gpu(text: str | None) -> tuple[str | None, int | None]:
    """``H100:8`` -> ("H100", 8); ``A10`` -> ("A10", None); None -> (None, None)."""
    if not text:
        return None, None
    match = GPU_RE.match(text.strip())
    if not match or (match.group(2) is not None and not 0 < int(match.group(2)) <= 64):
        raise UsageError(f"--gpu {text!r} is not a GPU type with an optional count",
                         hint="write it as TYPE or TYPE:COUNT, for example H100:8 or A10")  # fmt: skip
    return match.group(1), int(match.group(2)) if match.group(2) else None


def gpu_matches(wanted: str, *names: str) -> bool:
    """Whether WANTED (``H100``, ``RTX 4090``, ``a10``) names the GPU of an offer called NAMES: its
    letters and digits appear in one of them as a whole (``a10`` is not ``a100``)."""
    chunks = re.findall(r"[a-z0-9]+", wanted.lower())
    if not chunks:
        return False
    pattern = re.compile(r"(?<![a-z0-9])" + r"[^a-z0-9]*".join(map(re.escape, chunks)) + r"(?![0-9])")
    return any(pattern.search(name.lower()) for name in names if name)


def offers(mesh: Mesh, mesh_vars: dict, gpu: str | None = None, count: int | None = None,
           provider: str | None = None) -> tuple[list[Offer], dict[str, str]]:  # fmt: skip
    """What the configured providers (or PROVIDER) rent now, for GPU and COUNT when given, cheapest $/h
    per GPU first, the available ones before the others; and the providers that could not be asked.
    An offer a launch may scale (``max_gpus``) is shown for COUNT GPUs at COUNT times its price."""
    rows = []
    answers, problems = ask_each(mesh, mesh_vars, "offers", provider, count)
    for name, found in answers.items():
        for item in found:
            if gpu and not gpu_matches(gpu, item["gpu"], item["type"]):
                continue
            gpus, price = item["gpus"], item["price_per_hour"]
            if count is not None:
                if count == gpus:
                    pass
                elif gpus == 1 and count <= item["max_gpus"]:
                    gpus, price = count, round(price * count, 4)
                else:
                    continue
            per_gpu = round(price / gpus, 4) if gpus else price
            rows.append(Offer(name, item["type"], item["gpu"], gpus, price, per_gpu, list(item["regions"]),
                              item["available"], item["cloud"], item.get("vcpus"), item.get("memory_gb")))  # fmt: skip
    rows.sort(key=lambda o: (not o.available, o.price_per_gpu, o.price_per_hour, o.provider, o.type, o.cloud))
    return rows, problems


def cheapest(rows: list[Offer], max_price: float | None = None) -> Offer | None:
    """The first available offer (ROWS as ``offers`` sorts them) at most MAX_PRICE $/h for the machine."""
    return next((o for o in rows if o.available and (max_price is None or o.price_per_hour <= max_price)), None)


def no_offer_sources(mesh: Mesh, mesh_vars: dict) -> list[str]:
    """The configured providers whose API lists nothing to rent and whose types the mesh prices
    none of (``<provider>_prices``: only the types it prices are offered)."""
    return [p for p in configured(mesh) if capabilities(p).price == "setting"
            and not mesh.setting(f"{p}_prices", mesh_vars)]  # fmt: skip
