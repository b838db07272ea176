"""Burst pools: a queued job that fits no node rents the cheapest machine that fits, and gives it back.

``meshctl burst add NAME --gpu TYPE:N --max-nodes K --max-price USD`` records a pool in ``mesh.yml``
(``burst_pools``; ``pool_record`` sizes its nodes from the offers); the next run declares its K
nodes ``NAME-1..K`` to Slurm as cloud nodes (module_utils/mesh_burst.py). When Slurm resumes one
for a job, the head's power program asks the head's relaunch service (root), which rents a machine
for it (``meshctl.ops.machine.rent``): the cheapest available offer within the pool's
``max_price`` and the mesh's ``burst_max_spend`` (``spend``, here), the machine named as the node,
added as ``add-node`` adds one. Anything that fails gives back what was created, and the node is
marked DOWN with the reason, powered down (``power_down``) and offered again after a cool-down
(``retry_later``), its waiting jobs told (``note_jobs``). Idle for the pool's idle time, the power
program gives the machine back and Slurm keeps the node powered down.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from meshctl import burst as pooled
from meshctl import cloud, core, hostkeys, resources, runner
from meshctl.errors import MeshctlError, PartialError, ProviderError, UsageError, unreachable
from meshctl.mesh import Mesh
from meshctl.model import Node
from meshctl.ops import launch, work


def rented_dir(mesh: Mesh) -> Path:
    """The head's records (in its copy of the mesh) of the machines it rented: ``<node>.json``, the
    instance a pool node runs as, its $/h and since when (role relaunch's ``relaunch_rented``,
    which ``meshctl status`` reads)."""
    return mesh.path / resources.role_defaults("relaunch")["relaunch_rented"]


PROVIDERS = cloud.PROVIDERS  # what --provider may name, besides any
MAX_NODES = core.mesh_burst.MAX_NODES  # the most nodes a pool may have
PROVIDER_OPTIONS = launch.PROVIDER_OPTIONS  # each provider's own launch options (burst add takes them too)
POOL_DECIDES = core.mesh_burst.POOL_DECIDES  # what a pool's rent decides itself: no option of the user's


def idle_seconds(text: str) -> int:
    """``--idle`` (10m, 1h, 600s) in seconds, refused when it is not a time or is none."""
    power = core.power_save
    try:
        seconds = power.duration_seconds(text, what="--idle", never=None)
    except power.PowerSaveError as exc:
        raise UsageError(str(exc), hint="write it as 10m, 1h or 600s") from None
    if not seconds:
        raise UsageError("--idle must be a time: a pool machine is always given back when idle", hint="e.g. --idle 10m")
    return seconds


def pool_idle(pool: dict) -> int:
    """A pool's idle time in seconds (mesh.yml may say 600 or 10m)."""
    return core.mesh_burst.idle_seconds(pool.get("idle")) or 0


def hostlist(pool: dict) -> str:
    """The pool's Slurm nodes as Slurm writes them: ``h100-[1-2]``."""
    return core.mesh_burst.hostlist(pool)


def gres(pool: dict) -> str:
    """What a job asks for one of the pool's machines: ``gpu:h100:1``."""
    return f"gpu:{core.mesh_burst.gres_type(pool['gpu'])}:{pool['gpus']}"


def listing(w: work.Work) -> tuple[list[dict], float | None]:
    """The mesh's pools, and its burst_max_spend ($/h; None when not set)."""
    return pooled.pools(w.mesh_vars), pooled.limit_of(w.mesh, w.mesh_vars)


def read_rented(mesh: Mesh, name: str) -> dict:
    try:
        record = json.loads((rented_dir(mesh) / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def spend(mesh: Mesh, mesh_vars: dict, every: list[dict], configured: list[str], leave_out: str = "") -> tuple:
    """What the pools' machines up now cost an hour together (the providers' lists are the truth;
    each at the price the head rented it for, else its pool's max_price), and them as words."""
    nodes = core.mesh_burst.pool_nodes(every)
    providers = core.mesh_burst.burst_providers(every, configured)
    found, problems = pooled.live_named(mesh, mesh_vars, providers, set(nodes) - {leave_out})
    if problems:  # a pool machine the limit cannot see could be billing: nothing is rented blind
        said = "; ".join(f"{p}: {m}" for p, m in problems.items())
        raise ProviderError(f"cannot tell what the pools' machines cost now: {said}",
                            hint="the node is offered again after the cool-down")  # fmt: skip
    total, words = 0.0, []
    for inst in found:
        record = read_rented(mesh, inst["name"])
        ref = cloud.instance_ref(inst)
        price = record.get("price") if record.get("instance") == ref else None
        price = float(price) if isinstance(price, (int, float)) else float(nodes[inst["name"]]["max_price"])
        total += price
        words.append(f"{inst['name']} ${price:.2f}/h")
    return total, words


def pool_prices(mesh: Mesh, mesh_vars: dict, named: set[str], known: dict, problems: dict) -> dict:
    """``{node: (price, pool)}`` for each pool node of NAMED (the nodes accounting names) that KNOWN
    prices not (its machine is gone, as a pool's is when idle): what the pool would rent at today,
    its cheapest available offer within its max price (else its max price). A provider that could
    not be asked goes into PROBLEMS."""
    members = core.mesh_burst.pool_nodes(pooled.pools(mesh_vars))
    wanted = sorted(n for n in named if n in members and not known.get(n))
    found, by_pool = {}, {}
    for name in wanted:
        pool = members[name]
        if pool["name"] not in by_pool:
            rows, said = cloud.offers(mesh, mesh_vars, pool["gpu"], int(pool["gpus"]))
            problems.update(said)
            chosen = core.mesh_burst.providers_of(pool, cloud.configured(mesh))
            offer = cloud.cheapest([o for o in rows if o.provider in chosen], float(pool["max_price"]))
            by_pool[pool["name"]] = offer.price_per_hour if offer is not None else float(pool["max_price"])
        found[name] = (by_pool[pool["name"]], pool)
    return found


def pool_record(mesh: Mesh, mesh_vars: dict, name: str, gpu: str, max_nodes: int, max_price: float,
                providers: list[str], idle: int, cpus: int | None, memory_gb: float | None,
                say: Callable[[str], None], own: dict | None = None) -> dict:  # fmt: skip
    """A pool as ``burst_pools`` holds it, checked, with what each offer it may rent must have; OWN:
    the providers' own launch options given (``launch.provider_options``), kept as its ``launch``."""
    wanted, count = cloud.parse_gpu(gpu)
    chosen = sorted(set(providers)) if providers and "any" not in providers else ["any"]
    given = launch.provider_options(own or {}, chosen[0] if len(chosen) == 1 and chosen[0] != "any" else None)
    configured = cloud.configured(mesh)
    missing = [p for p in chosen if p != "any" and p not in configured]
    if missing or not configured:
        which = missing[0] if missing else "|".join(cloud.PROVIDERS)
        raise UsageError(f"the mesh has no {which} account to rent from",
                         hint=f"`meshctl provider add {which} --key-file FILE` first")  # fmt: skip
    record = {"name": name, "gpu": wanted, "gpus": count or 1, "max_nodes": max_nodes, "max_price": max_price,
              "providers": chosen, "idle": idle, "cpus": cpus or 1,
              "memory_mb": int((memory_gb or 1) * 1024), **({"launch": given} if given else {})}  # fmt: skip
    sized = {"cpus": cpus is not None, "memory_mb": memory_gb is not None}
    problems = core.mesh_burst.pool_problems(record, cloud.PROVIDERS)
    if problems:
        raise UsageError("; ".join(problems), hint="`meshctl burst add --help` says what each option takes")
    if any(p.get("name") == name for p in pooled.pools(mesh_vars)):
        raise UsageError(f"a pool named {name} is already declared", hint=f"`meshctl burst remove {name}` first")
    taken = {n.name for n in mesh.load()[0]} & set(core.mesh_burst.node_names(record))
    if taken:
        raise UsageError(f"pool {name}'s nodes would be named as nodes of the mesh: {', '.join(sorted(taken))}",
                         hint="pick another pool name")  # fmt: skip
    rows, problems = cloud.offers(mesh, mesh_vars, wanted, count or 1, chosen[0] if len(chosen) == 1 and
                                  chosen[0] != "any" else None)  # fmt: skip
    for where, said in problems.items():
        say(f"{where} could not be asked: {said}")
    fit = [o for o in rows if o.price_per_hour <= max_price and ("any" in chosen or o.provider in chosen)]
    if not fit and problems:  # what could not be asked may have had it: never "no offer"
        raise ProviderError(f"no offer of {gpu} within ${max_price:.2f}/h from the providers that answered; "
                            + "; ".join(f"{p}: {m}" for p, m in problems.items()),
                            hint="check this machine's network and each account (`meshctl provider list`), "
                            "then run the command again")  # fmt: skip
    if not fit:
        cheapest = min((o.price_per_hour for o in rows), default=None)
        raise UsageError(f"no offer of {gpu} at most ${max_price:.2f}/h" + (
            f"; the cheapest is ${cheapest:.2f}/h" if cheapest is not None else ""),
            hint=f"`meshctl offers --gpu {gpu} --all` lists what there is; raise --max-price")  # fmt: skip
    say(f"pool {name}: {len(fit)} offer(s) of {gpu} within ${max_price:.2f}/h now, from "
        f"${fit[0].price_per_hour:.2f}/h ({fit[0].provider} {fit[0].type})")  # fmt: skip
    # Slurm drains a node that registers with less than slurm.conf says: the smallest offer's, where
    # every offer says what it has (Lambda's specs); else 1 CPU and 1 GiB unless told.
    for key, field, scale in (("cpus", "vcpus", 1), ("memory_mb", "memory_gb", 1024)):
        known = [getattr(o, field) for o in fit if getattr(o, field)]
        if not sized[key] and known and len(known) == len(fit):
            record[key] = int(min(known) * scale)
    said = "given" if all(sized.values()) else "the smallest offer's" if record["cpus"] > 1 else "unless told"
    say(f"pool {name}: each node {record['cpus']} CPU(s), {record['memory_mb']} MiB ({said}; a machine with less "
        "would register drained)")  # fmt: skip
    return record


def head_name(nodes: list[Node]) -> str:
    return next(n.name for n in nodes if "head" in n.roles)


def again() -> str:
    """The command line to run again (runner.again)."""
    return runner.again()


def converge_head(w: work.Work, verbosity: int = 0) -> None:
    """The head converged: slurm.conf declares the pools' nodes, the power program and the relaunch
    service know them."""
    from meshctl.model import head_of
    from meshctl.ops import apply

    apply.apply(w, runner.Progress(), head_of(w.nodes).name, verbosity=verbosity)


def add_pool(w: work.Work, record: dict, verbosity: int = 0, converge=converge_head) -> dict:
    """The pool RECORD (``pool_record``'s) added to mesh.yml and the head converged; a converge that
    fails (or is interrupted) leaves mesh.yml as it was."""
    before = w.mesh_vars.get("burst_pools")
    w.mesh_vars["burst_pools"] = [*pooled.pools(w.mesh_vars), record]
    try:  # the write inside: a Ctrl+C that lands just after it leaves mesh.yml as it was too
        w.save()
        converge(w, verbosity)
    except BaseException:
        _put_back(w.mesh_vars, before)
        w.save()
        raise
    return record


def _put_back(mesh_vars: dict, before) -> None:
    if before is None:
        mesh_vars.pop("burst_pools", None)
    else:
        mesh_vars["burst_pools"] = before


def remove_pool(w: work.Work, name: str, say: Callable[[str], None], verbosity: int = 0,
                converge=converge_head) -> list[str]:  # fmt: skip
    """Pool NAME out: every machine it holds terminated (their jobs end), its nodes out of mesh.yml
    and of Slurm (the head converged). Returns the machines terminated."""
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    every = pooled.pools(mesh_vars)
    pool = next((p for p in every if p["name"] == name), None)
    if pool is None:
        known = ", ".join(p["name"] for p in every) or "none"
        raise UsageError(f"no burst pool named {name} (pools: {known})", hint="`meshctl burst list` shows them")
    members = set(core.mesh_burst.node_names(pool))
    done = []
    for node in sorted(members):
        done += pooled.terminate_named(mesh, mesh_vars, node, say)
    kept = [n for n in nodes if n.name not in members]
    for node in (n for n in nodes if n.name in members):
        hostkeys.forget(mesh.known_hosts, node.host, node.port)
    mesh_vars["burst_pools"] = [p for p in every if p["name"] != name]
    if not mesh_vars["burst_pools"]:
        mesh_vars.pop("burst_pools")
    # The head converged from the mesh without the pool, and mesh.yml written only once it has: a
    # converge that fails, or is interrupted, leaves the pool declared, and the same command again
    # finishes it (its machines are given back already).
    w.nodes = kept
    try:
        converge(w, verbosity)
    except MeshctlError as exc:
        said = f"pool {name}'s machines are given back; it stays in mesh.yml until the head's Slurm has let go of it"
        if isinstance(exc, PartialError):
            raise unreachable(said, exc.unreachable, again(), head=head_name(kept)) from None
        raise
    w.save(kept)
    return done


def power_down(name: str, run=None) -> None:
    """A pool node that could not be had, powered down again (its reason kept): Slurm would otherwise
    hold it powering up until ResumeTimeout. The power program's suspend terminates anything under
    its name; Slurm shows it ``down~``."""
    import subprocess

    run = run or subprocess.run
    done = run(["scontrol", "update", f"nodename={name}", "state=power_down_force"], capture_output=True, check=False)
    said_failed("scontrol update state=power_down_force", name, done)


def said_failed(what: str, name: str, done) -> None:
    """A head-side Slurm step that failed, said in the journal (the relaunch service's stderr)."""
    code = getattr(done, "returncode", 0)
    if code:
        import sys

        err = getattr(done, "stderr", b"") or b""
        err = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
        print(f"meshctl: {what} for {name} failed (exit {code}): {err.strip()[:300]}", file=sys.stderr)


# After the cool-down: the node idle and powered down again (``idle~``: a waiting job resumes it and
# the head tries again), once it is done powering down, and only while its reason is still meshctl's
# (a node an administrator set DOWN stays so). A transient systemd timer runs ``meshctl offer-again
# NODE`` (``offer_again``), whose lines go to its unit's journal (`journalctl -u
# 'meshctl-burst-retry-*'`). Its command line and description are plain words: systemd 252 (Debian
# 12) writes a transient unit's file with escapes it cannot read back, so that at the next
# daemon-reload (any converge of the head) a shell script given to it ran with its `$` gone, and a
# description with a newline broke the timer (shown on the bed's node image).
RETRY_POLLS, RETRY_POLL_SECONDS = 90, 2  # at most 180 s for the node to be done powering down
RETRY_ARG = re.compile(r"[A-Za-z0-9_./=:@+-]+")  # what systemd writes into a transient unit's file as it is


def retry_unit(name: str) -> str:
    """The transient units' name of NAME's retry (``.timer`` and ``.service``)."""
    return f"meshctl-burst-retry-{name}"


def retry_later(name: str, seconds: int, run=None) -> None:
    """After SECONDS, the DOWN pool node NAME offered to Slurm again (a transient systemd timer that
    runs ``offer_again``). A retry of the node still pending or running is stopped first: systemd
    refuses a transient unit whose name is loaded (a timer stays loaded while its service runs), and
    the latest refusal's cool-down is the one that counts."""
    import subprocess

    run = run or subprocess.run
    unit = retry_unit(name)
    stop = ["systemctl", "stop", f"{unit}.timer", f"{unit}.service"]
    run(stop, capture_output=True, check=False)  # failure ignored: nothing to stop ("not loaded") is the usual case
    # meshctl as this process has it: the relaunch service's python, its code from PYTHONPATH only
    # (role relaunch: the service's environment), which a transient unit does not inherit.
    source = Path(__file__).resolve().parents[2]
    command = ["--working-directory=/", f"--setenv=PYTHONPATH={source}", "--setenv=PYTHONSAFEPATH=1",
               sys.executable, "-m", "meshctl", "offer-again", name]  # fmt: skip
    if not all(RETRY_ARG.fullmatch(word) for word in command):
        print(f"meshctl: no retry for {name}: {command!r} is not plain words a systemd unit keeps", file=sys.stderr)
        return
    done = run(["systemd-run", f"--unit={unit}", f"--on-active={max(1, int(seconds))}",
                "--timer-property=AccuracySec=1s", f"--description=meshctl-offer-again-{name}", "--collect",
                *command], capture_output=True, check=False)  # fmt: skip
    said_failed("systemd-run (the retry's timer)", name, done)


def offer_again(name: str, run=None, sleep=None) -> tuple[bool, str]:
    """The retry itself: NAME offered to Slurm again (``state=idle``) once it is done powering down
    (its state no longer ends in ``%``; at most RETRY_POLLS looks), only while its reason is
    meshctl's. Returns whether nothing failed, and the line that says what it did."""
    import subprocess
    import time

    run, sleep = run or subprocess.run, sleep or time.sleep
    state = ""
    for _ in range(RETRY_POLLS):
        shown = run(["sinfo", "-h", "-N", "-n", name, "-o", "%T"], capture_output=True, text=True, check=False)
        state = next(iter((shown.stdout or "").split()), "") if shown.returncode == 0 else "sinfo failed"
        if not state.endswith("%"):
            break
        sleep(RETRY_POLL_SECONDS)
    node = run(["scontrol", "show", "node", name], capture_output=True, text=True, check=False)
    if node.returncode:
        return False, f"{name} ({state}): scontrol show node failed: {(node.stderr or '').strip()[:300]}"
    if "Reason=meshctl: " not in (node.stdout or ""):
        return True, f"{name} ({state or 'unknown'}): left as it is: its reason is no longer meshctl's"
    done = run(["scontrol", "update", f"nodename={name}", "state=idle"], capture_output=True, text=True, check=False)
    if done.returncode:
        return False, f"{name} ({state}): scontrol update state=idle failed: {(done.stderr or '').strip()[:300]}"
    return True, f"{name} ({state}): offered to Slurm again"


def note_jobs(name: str, reason: str, run=None) -> list[str]:
    """The jobs waiting for the pool node NAME (allocated to it while it powered up) get REASON as
    their comment (`squeue -o %k`, `scontrol show job`): Slurm requeues them, and its own reason
    (BeginTime, then ReqNodeNotAvail) does not say why. Returns their ids."""
    import subprocess

    run = run or subprocess.run
    listed = run(["squeue", "-h", "-w", name, "-t", "CONFIGURING,PENDING", "-o", "%i"], capture_output=True,
                 text=True, check=False)  # fmt: skip
    jobs = [j for j in (listed.stdout or "").split() if j.isdigit()] if listed.returncode == 0 else []
    text = core.mesh_text.slurm_reason(f"meshctl: {name}: {reason}")
    for job in jobs:
        done = run(["scontrol", "update", f"jobid={job}", f"comment={text}"], capture_output=True, check=False)
        said_failed(f"scontrol update jobid={job} comment", name, done)
    return jobs
