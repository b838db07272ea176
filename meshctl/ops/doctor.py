"""`meshctl doctor`: the links between every two nodes and an all-reduce across them.

playbooks/doctor.yml measures (module mesh_netprobe: iperf3 over the mesh addresses, one link at
a time, each pair once; role doctor's all-reduce through Slurm in the job environment); each node
reports ``doctor_report``. What a node reports is data: every number and name is checked here
before it is shown, and a report outside its shape is shown as refused, never as sent.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from meshctl import core, display, session, tailnet
from meshctl.errors import UsageError
from meshctl.model import head_of
from meshctl.ops.work import Work

ERROR_CAP = 300


@dataclass
class Link:
    source: str
    target: str
    path: str = "lan"
    rtt_ms: float | None = None
    mbps: float | None = None
    error: str = ""


@dataclass
class AllReduce:
    world_size: int = 0
    results: list[dict] = field(default_factory=list)  # {megabytes, seconds, algbw_gbps, busbw_gbps}
    error: str = ""


def _number(value, low=0.0, high=1e15) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if low <= value <= high else None


def _text(value) -> str:
    return display.clean(value or "")[:ERROR_CAP]


def links_of(source: str, report: dict, names: set[str], on_tailnet: bool) -> tuple[list[Link], str]:
    """The links a node reported, checked; and what was refused in its report ("" when nothing)."""
    raw = report.get("links")
    if not isinstance(raw, list):
        return [], "no list of links"
    path_of = core.tailscale_status.tailscale_peer_path
    status = report.get("tailscale") if isinstance(report.get("tailscale"), str) else None
    links, refused = [], []
    for item in raw:
        if not isinstance(item, dict) or item.get("name") not in names or item.get("name") == source:
            refused.append("a link to no node of the mesh")
            continue
        bps, rtt = _number(item.get("bits_per_second")), _number(item.get("mean_rtt_us"), high=1e9)
        link = Link(source, item["name"], error=_text(item.get("error")))
        if bps is None and not link.error:
            link.error = "no throughput reported"
        link.mbps = None if bps is None else round(bps / 1e6, 1)
        link.rtt_ms = None if rtt is None else round(rtt / 1000, 2)
        if on_tailnet:
            link.path = path_of(status, str(item.get("address") or "")) if status else "unknown (tailscale not read)"
        links.append(link)
    return links, "; ".join(sorted(set(refused)))


def allreduce_of(report: dict | None, why: str = "the head could not be reached") -> AllReduce:
    """The head's all-reduce report, checked; WHY: what kept the head from running it, when it did not."""
    raw = (report or {}).get("allreduce")
    if not isinstance(raw, dict):
        return AllReduce(error=f"not run ({why})")
    lines = raw.get("lines") if isinstance(raw.get("lines"), list) else []
    line = next((str(x) for x in lines if str(x).startswith("{")), "")  # rank 0's one JSON line
    if not line:
        said = _text(raw.get("error")).strip() or f"srun exited {raw.get('rc')}"
        return AllReduce(error=f"srun failed: {said}")
    try:
        data = json.loads(line)
    except ValueError:
        return AllReduce(error="the all-reduce printed no JSON")
    if not isinstance(data, dict):
        return AllReduce(error="the all-reduce printed JSON that is not an object")
    if data.get("error"):
        return AllReduce(error=_text(data["error"]))
    out = AllReduce(world_size=int(_number(data.get("world_size"), 1, 1e6) or 0))
    for row in data.get("results") or []:
        if not isinstance(row, dict):
            continue
        values = {key: _number(row.get(key)) for key in ("megabytes", "seconds", "algbw_gbps", "busbw_gbps")}
        if None not in values.values():
            out.results.append(values)
    if not out.world_size or not out.results:
        out.error = "the all-reduce reported nothing usable"
    return out


NOT_REACHED = "could not be reached"  # how a node that did not answer is said (the command's exit 7)


def doctor(w: Work, progress, verbosity: int = 0):
    """(links, all-reduce, problems): measure, then check what the nodes reported."""
    nodes, mesh_vars = w.nodes, w.mesh_vars
    active = [n.name for n in nodes if n.state == "active"]
    if len(active) < 2:
        raise UsageError(f"`meshctl doctor` measures the links between two nodes or more; the mesh has "
                         f"{len(active)} active ({', '.join(active) or 'none'})",
                         hint="add a node first: `meshctl add-node [USER@]HOST`")  # fmt: skip
    result = w.run("doctor.yml", progress, verbosity=verbosity)
    names = {n.name for n in nodes}
    on_tailnet = tailnet.uses_tailscale(mesh_vars)
    links: list[Link] = []
    problems: dict[str, str] = {}
    for node in nodes:
        report = result.reports.get(node.name)
        if report is None:
            continue
        mine, refused = links_of(node.name, report, names, on_tailnet)
        links += mine
        if refused:
            problems[node.name] = f"reported what meshctl refuses ({refused})"
    for name, said in session.unreachable_rows(result).items():
        problems[name] = f"{NOT_REACHED} ({said}): its links are not measured"
    for failure in result.failures:
        if failure.host not in problems and failure.host in names:
            problems[failure.host] = f"{failure.task}: {_text(failure.message)}"
    head = head_of(nodes).name
    why = problems.get(head, "the head could not be reached") if head not in result.unreachable else (
        "the head could not be reached")  # fmt: skip
    return links, allreduce_of(result.reports.get(head), why), problems
