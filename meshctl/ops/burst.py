"""Burst pools: a queued job that fits no node rents the cheapest machine that fits, and gives it back.

``meshctl burst add NAME --gpu TYPE:N --max-nodes K --max-price USD`` records a pool in ``mesh.yml``
(``burst_pools``; ``pool_record`` sizes its nodes from the offers); the next run declares its K
nodes ``NAME-1..K`` to Slurm as cloud nodes (module_utils/mesh_burst.py). When Slurm resumes one
for a job, the head's power program asks the head's relaunch service (root), which runs
``rent`` here: the cheapest available offer within the pool's ``max_price`` and the mesh's
``burst_max_spend``, candidates tried in order (``cloud.launch_first``), the machine named as the
node, added as ``add-node`` adds one (preflight, then the node and the head converged), each phase
said with its seconds. Anything that fails terminates what was created, and the command marks the
node DOWN with the reason; a service killed midway leaves its marker (``launching/<node>``), and
``reap`` (the service's ExecStopPost) terminates what it made. Idle for the pool's idle time, the
power program terminates the machine (``terminate_named``) and Slurm keeps the node powered down.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from meshctl import burst as pooled
from meshctl import cloud, core, hostkeys, resources, runner, ssh
from meshctl.errors import MeshctlError, PartialError, ProviderError, UsageError, unreachable
from meshctl.mesh import Mesh, atomic_write
from meshctl.model import Node
from meshctl.ops import add, launch, work

LAUNCHING = "launching"  # in the head's copy of the mesh: <node>, while a rent is under way


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
        seconds = power.duration_seconds(text)
    except power.PowerSaveError as exc:
        raise UsageError(str(exc).replace("idle_stop", "--idle"), hint="write it as 10m, 1h or 600s") from None
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


def register_keys(mesh: Mesh, mesh_vars: dict, providers: list[str], public: str) -> list[str]:
    """The head's key registered where a launch names a registered key (Lambda); its names."""
    from meshctl.ops.relaunch import register_key

    names = []
    for provider in providers:
        if "ssh_key_names" in cloud.capabilities(provider).launch_needs:
            names.append(register_key(cloud.account(mesh, mesh_vars, provider), public))
    return sorted(set(names))


def authorize(node: Node, mesh: Mesh, authorized: Path | None) -> None:
    """The control machine's key on the new machine, so that `meshctl` there reaches it as any node."""
    if authorized is None or not authorized.is_file():
        return
    argv = ssh.ssh_argv(node.host, node.user, node.port, node.ssh_key, mesh.known_hosts)
    done = ssh.run(argv, "umask 077; mkdir -p ~/.ssh; cat >> ~/.ssh/authorized_keys",
                   stdin=authorized.read_text(encoding="utf-8").strip() + "\n")  # fmt: skip
    if done.rc != 0:
        what, todo = ssh.explain_failure(done.stderr, node.user, node.host, node.port)
        raise UsageError(f"{node.name}: cannot reach the new machine: {what}", hint=todo)


def setup(w: work.Work, target: str, name: str, key_file: Path) -> None:
    """The new machine added as ``meshctl add-node PROVIDER:ID --name NAME`` adds one: its
    preflight, then it and the head converged."""
    add.add_node(w, add.plan_add(w, target, name, None, str(key_file), None), runner.Progress())


def rent(mesh: Mesh, name: str, key_file: Path, authorized: Path | None, say: Callable[[str], None] = print,
         setup=setup, launch_timeout: float = cloud.LAUNCH_TIMEOUT, clock=time.monotonic) -> Node:  # fmt: skip
    """Rent a machine for the pool node NAME and set it up; each phase said with its seconds. A
    machine created that cannot be set up is terminated."""
    started = clock()

    def phase(what: str, since: float) -> float:
        now = clock()
        say(f"{name}: {what} in {now - since:.0f} s")
        return now

    with work.changing(mesh, f"burst {name}", 600) as w:
        nodes, mesh_vars = w.nodes, w.mesh_vars
        pool = pooled.pool_of(mesh_vars, name)
        if pool is None:
            raise UsageError(f"{name} is no burst pool's node", hint="`meshctl burst list` shows the pools")
        every, configured = pooled.pools(mesh_vars), cloud.configured(mesh)
        providers = core.mesh_burst.providers_of(pool, configured)
        if not providers:
            raise UsageError(f"pool {pool['name']} has no provider account on the head",
                             hint=f"{cloud.ADD_ACCOUNT}, then `meshctl apply`")  # fmt: skip
        pooled.terminate_named(mesh, mesh_vars, name, say)  # a rent cut short before this one
        running, up = spend(mesh, mesh_vars, every, configured, leave_out=name)
        limit = pooled.limit_of(mesh, mesh_vars)
        budget = float(pool["max_price"]) if limit is None else min(float(pool["max_price"]), limit - running)
        if limit is not None and budget < 0.01:
            raise ProviderError(f"burst_max_spend ${limit:.2f}/h reached: the pools' machines up cost "
                                f"${running:.2f}/h ({', '.join(up)})", hint="the job waits; raise burst_max_spend "
                                "or let a pool machine go idle")  # fmt: skip
        public = Path(f"{key_file}.pub").read_text(encoding="utf-8").strip()
        # What each machine must have (the pool's, as slurm.conf says it): a provider that filters its
        # placement by it (Runpod) rents no smaller one, which Slurm would drain at registration.
        options = {**(pool.get("launch") or {}), "cpus": int(pool["cpus"]), "memory_gb": int(pool["memory_mb"]) / 1024}
        key_names = register_keys(mesh, mesh_vars, providers, public)
        if key_names:
            options["ssh_key_names"] = key_names
        request = launch.Request(name=name, gpu=f"{pool['gpu']}:{pool['gpus']}",
                                 only=providers[0] if len(providers) == 1 else "any", max_price=budget,
                                 options=options, ssh_key=str(key_file))  # fmt: skip
        others = work.Work(mesh, [n for n in nodes if n.name != name], mesh_vars)
        try:
            chosen = launch.plan(others, request, say=lambda line: say(f"{name}: {line}"),
                                 warn=lambda line: say(f"{name}: {line}"))  # fmt: skip
        except UsageError as exc:
            spent = f"; burst_max_spend ${limit:.2f}/h, pools up ${running:.2f}/h" if limit is not None else ""
            raise ProviderError(f"{exc.message} (pool max_price ${float(pool['max_price']):.2f}/h{spent})",
                                hint=exc.hint) from None  # fmt: skip
        chosen.candidates = [c for c in chosen.candidates if c[1] in providers]
        if not chosen.candidates:
            raise ProviderError(f"no offer of {pool['gpu']}:{pool['gpus']} at {', '.join(providers)} within "
                                f"${budget:.2f}/h", hint="`meshctl offers` lists what there is")  # fmt: skip
        marker = mesh.path / LAUNCHING / name
        marker.parent.mkdir(mode=0o700, exist_ok=True)
        atomic_write(marker, "\n", mode=0o600)
        since = phase("offers asked", started)
        offer, inst = cloud.launch_first(mesh, mesh_vars, chosen.candidates, name,
                                         say=lambda line: say(f"{name}: {line}"), timeout=launch_timeout)  # fmt: skip
        ref = cloud.instance_ref(inst)
        price = offer.price_per_hour if offer is not None else float(pool["max_price"])
        rented_dir(mesh).mkdir(mode=0o700, exist_ok=True)
        atomic_write(rented_dir(mesh) / f"{name}.json", json.dumps(
            {"node": name, "pool": pool["name"], "instance": ref, "price": price, "since": int(time.time())}) + "\n",
            mode=0o600)  # fmt: skip
        say(f"{name}: rented {ref} ({inst.get('gpu_type') or pool['gpu']}) at ${price:.2f}/h")
        since = phase("launch (created, running)", since)
        try:
            cloud.wait_for_ssh(inst["ssh_host"], inst["ssh_port"], launch_timeout)
            since = phase("boot (SSH answers)", since)
            probe = Node(name, inst["ssh_host"], inst["ssh_user"] or "root", int(inst["ssh_port"]), str(key_file))
            hostkeys.forget(mesh.known_hosts, probe.host, probe.port)
            authorize(probe, mesh, authorized)
            from meshctl import headcopy

            setup(others, ref, name, key_file)
            node = next(n for n in others.nodes if n.name == name)
            headcopy.write_record(mesh, name, ref, node.host, node.port, node.mesh_address)
            phase("setup (add-node: preflight, converge)", since)
        except (MeshctlError, StopIteration) as exc:
            error = exc if isinstance(exc, MeshctlError) else ProviderError(f"{name} was not recorded after its setup")
            try:
                cloud.terminate(mesh, mesh_vars, ref)
                error.hint = (error.hint + "; " if error.hint else "") + f"the new machine {ref} was terminated"
            except MeshctlError as gone:
                error.hint = (error.hint + "; " if error.hint else "") + f"terminate {ref} by hand: {gone}"
            raise error from None
        finally:
            marker.unlink(missing_ok=True)
    say(f"{name}: ready {clock() - started:.0f} s after the request; its slurmd registers by itself")
    return node


def reap(mesh: Mesh, say: Callable[[str], None] = print) -> list[str]:
    """What a rent cut short left (its marker): every instance named as the node terminated; returns
    the nodes reaped (the caller marks them DOWN)."""
    folder = mesh.path / LAUNCHING
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    if not names:
        return []
    _nodes, mesh_vars = mesh.load()
    for name in names:
        try:
            pooled.terminate_named(mesh, mesh_vars, name, say)
        finally:
            (folder / name).unlink(missing_ok=True)
    return names


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
    w.save()
    try:
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


def give_back(name: str, run=None) -> None:
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
# (a node an administrator set DOWN stays so).
RETRY = """for i in $(seq 90); do
  case "$(sinfo -h -N -n "$1" -o %T | head -n 1)" in *%) sleep 2;; *) break;; esac
done
scontrol show node "$1" | grep -q 'Reason=meshctl: ' && exec scontrol update nodename="$1" state=idle"""


def retry_later(name: str, seconds: int, run=None) -> None:
    """After SECONDS, the DOWN pool node NAME offered to Slurm again (a transient systemd timer, RETRY)."""
    import subprocess

    run = run or subprocess.run
    done = run(["systemd-run", f"--unit=meshctl-burst-retry-{name}", f"--on-active={max(1, int(seconds))}",
                "--timer-property=AccuracySec=1s", "--collect", "/bin/sh", "-c", RETRY, "retry", name],
               capture_output=True, check=False)  # fmt: skip
    said_failed("systemd-run (the retry's timer)", name, done)


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
