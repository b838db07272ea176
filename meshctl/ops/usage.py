"""`meshctl usage`: GPU-hours, CPU-hours and cost per user for a period, from Slurm's accounting.

The controller reads the period's jobs (``sacct --allocations --parsable2``: user, nodes,
elapsed seconds, allocated TRES; roles/slurm_accounting/tasks/usage.yml); the sums are made here. Cost is an
estimate at today's prices: each job pays, on each of its nodes, the node's $/h (its provider's,
meshctl/cloud.py) times its share of the node (GPUs allocated over the node's GPUs, else CPUs over
CPUs) times its hours. A node without a known price (a desktop) costs nothing.
"""

from __future__ import annotations

import datetime
import io
import re
import time
from dataclasses import dataclass, field

from meshctl import cloud, core, resources, runner
from meshctl.errors import UsageError
from meshctl.model import head_of
from meshctl.ops import burst
from meshctl.ops.work import Work

USER_RE = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}\Z")
HOSTLIST_RE = re.compile(r"([a-z0-9-]+?)(?:\[([0-9,\-]+)\])?(?:,|\Z)")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?\Z|^now\Z")


def hostnames(hostlist: str) -> list[str]:
    """Slurm's compressed host list (``gpu[1-3,5],head``) as names; "" or ``None assigned`` -> []."""
    text = (hostlist or "").strip()
    if not text or text.startswith("None"):
        return []
    names: list[str] = []
    for prefix, ranges in HOSTLIST_RE.findall(text):
        if not ranges:
            names.append(prefix)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            width = len(low)
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{number:0{width}d}")
    return names


def tres(text: str) -> dict[str, float]:
    """AllocTRES (``billing=2,cpu=2,gres/gpu=1,gres/gpu:a4000=1,mem=1000M,node=1``) as numbers.

    ``gpu`` sums ``gres/gpu`` (not its typed duplicates); ``cpu`` and ``node`` as given."""
    out = {"cpu": 0.0, "gpu": 0.0, "node": 0.0}
    for item in (text or "").split(","):
        key, _, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            continue
        if key in ("cpu", "node"):
            out[key] = number
        elif key == "gres/gpu":
            out["gpu"] = number
    return out


@dataclass
class UserUsage:
    user: str
    jobs: int = 0
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    cost: float = 0.0
    nodes: set[str] = field(default_factory=set)


def summarize(lines: list[str], node_gpus: dict[str, int], node_cpus: dict[str, int],
              prices: dict[str, float | None]) -> list[UserUsage]:  # fmt: skip
    """Per user, from sacct's lines (User|JobID|NodeList|ElapsedRaw|AllocTRES|State); sorted by cost,
    then GPU-hours. A line that is not one is skipped."""
    users: dict[str, UserUsage] = {}
    for line in lines:
        parts = str(line).split("|")
        if len(parts) != 6 or not USER_RE.match(parts[0]) or not parts[3].isdigit():
            continue
        user, _job, hostlist, elapsed, alloc, _state = parts
        hours = int(elapsed) / 3600
        held = tres(alloc)
        names = hostnames(hostlist) or []
        row = users.setdefault(user, UserUsage(user))
        row.jobs += 1
        row.gpu_hours += held["gpu"] * hours
        row.cpu_hours += held["cpu"] * hours
        row.nodes.update(names)
        for name in names:  # the job's share of each node, at that node's price
            price = prices.get(name)
            if not price:
                continue
            if node_gpus.get(name):
                share = min(1.0, held["gpu"] / len(names) / node_gpus[name])
            else:
                share = min(1.0, held["cpu"] / len(names) / max(1, node_cpus.get(name, 1)))
            row.cost += price * share * hours
    return sorted(users.values(), key=lambda u: (-u.cost, -u.gpu_hours, u.user))


@dataclass
class PoolMachine:
    """A machine a burst pool rented (the head's record): what it cost over the period."""

    node: str
    pool: str
    instance: str
    price_per_hour: float
    since: int
    until: int | None  # None: it still runs
    lost: bool = False  # taken away (the head's watch found it lost), not given back when idle
    why: str = ""  # how it ended
    cost: float = 0.0  # its $/h times its hours within the period
    until_known: bool = True  # False: the power program did not record its end; it ended by `until` (the next rent)


def pool_machines(records: dict, start: float, end: float, now: float, ended: dict | None = None) -> list[PoolMachine]:
    """Every machine the head's records name (``<node>.json``, the one a pool node runs on now or
    last, ``<node>@<since>.json``, one it ran on before: ``ops.machine.keep_earlier``) that was up
    within START..END (seconds since the epoch), with its cost there. The one a node ran on last
    ended when the power program's record of its end says (ENDED: ``ended/<node>.json`` by node,
    lost or given back), else it runs now. A record not of that shape is left out (the head's
    files, read as text)."""
    import json

    rows = []
    for key, text in sorted((records or {}).items()):
        try:
            record = json.loads(str(text))
        except ValueError:
            continue
        if not isinstance(record, dict) or str(key).split("@")[0] != record.get("node"):
            continue
        if "@" not in str(key):
            record = {**record, **ended_of(record, (ended or {}).get(key))}
        node, pool, instance = record.get("node"), record.get("pool"), record.get("instance")
        price, since, until = record.get("price"), record.get("since"), record.get("until")
        if not all(isinstance(v, str) and v for v in (node, pool, instance)):
            continue
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 <= price <= 1000:
            continue
        if isinstance(since, bool) or not isinstance(since, int) or since <= 0:
            continue
        if until is not None and (isinstance(until, bool) or not isinstance(until, int) or until < since):
            continue
        upto = min(until if until is not None else now, end)
        hours = max(0.0, upto - max(since, start)) / 3600
        if hours <= 0 and not (since <= end and (until or now) >= start):
            continue
        why = core.mesh_text.clean(str(record.get("why") or ""))[:200]
        rows.append(PoolMachine(node, pool, instance, float(price), since, until, record.get("lost") is True, why,
                                round(price * hours, 4), record.get("until_known") is not False))  # fmt: skip
    return sorted(rows, key=lambda m: (m.since, m.node))


def ended_of(record: dict, text) -> dict:
    """``until``, ``lost`` and ``why`` of the machine RECORD names from the power program's record
    of its node's last end (TEXT, JSON), when that names this very machine after its rent; {} else."""
    import json

    try:
        end = json.loads(str(text)) if text is not None else None
    except ValueError:
        return {}
    if not isinstance(end, dict) or not isinstance(end.get("instances"), list):
        return {}
    at, since = end.get("at"), record.get("since")
    if record.get("instance") not in end["instances"] or isinstance(at, bool) or not isinstance(at, int):
        return {}
    if not isinstance(since, int) or at < since:
        return {}
    return {"until": at, "lost": end.get("lost") is True, "why": str(end.get("why") or "")}


def period(since: str | None, until: str | None, today: datetime.date | None = None) -> tuple[str, str]:
    """sacct's --starttime and --endtime: the first of this month until now by default."""
    today = today or datetime.date.today()
    start = since or today.replace(day=1).isoformat()
    end = until or "now"
    for name, value in (("--since", start), ("--until", end)):
        if not DATE_RE.match(value):
            raise UsageError(f"{name} {value!r} is not a date", hint="use YYYY-MM-DD (or YYYY-MM-DDTHH:MM)")
        try:
            if value != "now":
                datetime.datetime.fromisoformat(value)
        except ValueError as exc:
            raise UsageError(f"{name} {value!r} is no day of the calendar ({exc})",
                             hint="use YYYY-MM-DD with a real month and day") from None  # fmt: skip
    begins = datetime.datetime.fromisoformat(start)
    ends = datetime.datetime.now() if end == "now" else datetime.datetime.fromisoformat(end)
    if begins > ends:
        raise UsageError(f"--since {start} is after --until {end}: the period would be empty",
                         hint="give the earlier date to --since")  # fmt: skip
    return start, end


def accounting_on(w: Work, head: str) -> bool:
    """Whether the mesh turns Slurm's accounting on for the head anywhere a user sets it (mesh.yml's
    vars, any group_vars file, the head's host_vars), else role slurm's default."""
    import json

    import yaml

    from meshctl import resources, settings

    found = [w.mesh_vars.get("slurm_accounting")]
    for path in settings.vars_files(w.mesh.path):  # what Ansible reads: every group's, and the head's own
        parts = path.relative_to(w.mesh.path).parts
        if parts[0] == "host_vars" and parts[1].split(".")[0] != head:
            continue
        try:
            text = path.read_text(encoding="utf-8")
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError):
            data = None
        if isinstance(data, dict):
            found.append(data.get("slurm_accounting"))
    default = resources.role_defaults("slurm_defaults").get("slurm_accounting")
    return any(v is True or str(v).lower() in ("true", "yes") for v in [*found, default] if v is not None)


def usage(w: Work, since: str | None, until: str | None, verbosity: int = 0):
    """(rows, start, end, problems, volumes, machines): each user's usage of the period, what the
    providers said, the accounts' network volumes (``cloud.VolumeRow``: storage billed by the month,
    apart from the nodes' hours) and every machine the burst pools rented that was up in the period
    (``pool_machines``: the lost ones and their replacements, each with what it cost)."""
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    start, end = period(since, until)
    if not accounting_on(w, head_of(nodes).name):
        raise UsageError("`meshctl usage` reads Slurm's accounting, which this mesh does not keep",
                         hint="set `slurm_accounting: true` in group_vars/all.yml and run `meshctl apply` (jobs "
                         "from then on are counted)")  # fmt: skip
    prices = cloud.PriceLookup(mesh, nodes, mesh_vars, now=False)  # asked while Ansible reads the accounting
    ended = f"{resources.role_defaults('mesh')['mesh_power_state_dir']}/{core.mesh_watch.ENDED}"  # the power program's
    result = w.run(
        "usage.yml",
        runner.Progress() if verbosity else runner.Progress(out=io.StringIO(), live=False),
        targets=[head_of(nodes)],
        verbosity=verbosity,
        extravars={"slurm_accounting_usage_start": start, "slurm_accounting_usage_end": end, "usage_ended_dir": ended},
        converge=False,
        mitogen=False,
        stream=bool(verbosity),
    )
    runner.raise_for(result, f"fix the problem and run `{runner.again('meshctl usage')}` again",
                     head=head_of(nodes).name)  # fmt: skip
    lines = (result.reports.get(head_of(nodes).name) or {}).get("lines") or []
    facts = mesh.load_facts()
    gpus = {n: len([g for g in f.get("gpus", []) if g.get("file")]) for n, f in facts.items()}
    cpus = {n: int(f.get("cpus", 1) or 1) for n, f in facts.items()}
    node_prices, problems = prices.result()
    named = {n for line in map(str, lines) if len(line.split("|")) == 6 for n in hostnames(line.split("|")[2]) or []}
    pooled = burst.pool_prices(mesh, mesh_vars, named, node_prices, problems)
    for name, (price, pool) in pooled.items():  # a pool node's hours at what the pool rents at today
        node_prices[name], gpus[name], cpus[name] = price, int(pool["gpus"]), int(pool["cpus"])
    volumes = prices.volumes if not problems else []
    report = result.reports.get(head_of(nodes).name) or {}
    begins = datetime.datetime.fromisoformat(start).timestamp()
    ends = time.time() if end == "now" else datetime.datetime.fromisoformat(end).timestamp()
    machines = pool_machines(report.get("machines") or {}, begins, ends, time.time(), report.get("ended") or {})
    rows = summarize([str(line) for line in lines], gpus, cpus, node_prices)
    return rows, start, end, problems, volumes, machines
