"""A machine for node NAME, on the head: what the head's program (the relaunch service, `meshctl
relaunch-node`, ``meshctl.ops.relaunch_node``) does for a node Slurm asked for, and the steps those
share.

- ``rent``: a burst pool's node gets the cheapest machine that fits (``meshctl.ops.burst`` keeps
  the pools and what they spend), added as ``add-node`` adds one.
- ``relaunch``: a node whose provider cannot stop it, terminated while idle, is launched again
  as its spec says (``meshctl.ops.relaunch`` reads the spec and the head's copy), set up as
  ``apply --limit NAME``.
- ``reap``: what a rent cut short made (its marker, ``launching/<node>``) is given back.

Both go the same way once the provider made the machine: the head's key registered where a launch
names a registered key (``register_keys``), the machine reached over SSH with the control
machine's key authorized on it (``reach``), set up, and given back when it cannot be
(``given_back_on_failure``): a machine made is never left billing unsaid. Every create, start, stop
and delete at a provider goes through ``meshctl.cloud`` to ``plugins/module_utils/mesh_machine.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from meshctl import burst as pooled
from meshctl import cloud, core, headcopy, hostkeys, runner, ssh
from meshctl.errors import MeshctlError, ProviderError, UsageError
from meshctl.mesh import Mesh, atomic_write
from meshctl.model import Node
from meshctl.ops import add, apply, burst, launch, work
from meshctl.ops.relaunch import read_plain_file as relaunch_read
from meshctl.ops.relaunch import read_spec

KEY_NAME = "meshctl-head-"  # + the first 12 hex digits of the head key's sha256: its name at the provider
LAUNCHING = "launching"  # in the head's copy of the mesh: <node>, while a rent is under way
KEPT_EARLIER = 16  # records kept per pool node of the machines it ran on before (``keep_earlier``)


def key_name(public_key: str) -> str:
    return KEY_NAME + hashlib.sha256(" ".join(public_key.split()[:2]).encode()).hexdigest()[:12]


def register_key(api, public_key: str) -> str:
    """The head's key's name at the provider, registered first when it is not (one key per launch)."""
    return cloud.call(api.register_key, key_name(public_key), public_key)


def register_keys(mesh: Mesh, mesh_vars: dict, providers: list[str], public: str) -> list[str]:
    """The head's key registered where a launch names a registered key (Lambda); its names."""
    names = []
    for provider in providers:
        if "ssh_key_names" in cloud.capabilities(provider).launch_needs:
            names.append(register_key(cloud.account(mesh, mesh_vars, provider), public))
    return sorted(set(names))


def authorize(node: Node, mesh: Mesh, authorized: Path | None) -> None:
    """The control machine's key (AUTHORIZED) on the new machine, so that `meshctl` there reaches it as any node."""
    if authorized is None or not authorized.is_file():
        return
    argv = ssh.ssh_argv(node.host, node.user, node.port, node.ssh_key, mesh.known_hosts)
    done = ssh.run(argv, "umask 077; mkdir -p ~/.ssh; cat >> ~/.ssh/authorized_keys",
                   stdin=authorized.read_text(encoding="utf-8").strip() + "\n")  # fmt: skip
    if done.rc != 0:
        what, todo = ssh.explain_failure(done.stderr, node.user, node.host, node.port)
        raise UsageError(f"{node.name}: cannot reach the new machine: {what}", hint=todo)


def reach(mesh: Mesh, node: Node, inst: dict, key_file: Path, authorized: Path | None, timeout: float) -> Node:
    """NODE (a probe, or the node in the head's mesh) moved to the running machine INST: its SSH
    answers within TIMEOUT, the host keys learnt for its old and new address forgotten (a new
    machine has new ones), reached with the head's key (KEY_FILE) and the control machine's key
    authorized on it."""
    cloud.wait_for_ssh(inst["ssh_host"], inst["ssh_port"], timeout)
    hostkeys.forget(mesh.known_hosts, node.host, node.port)
    hostkeys.forget(mesh.known_hosts, inst["ssh_host"], inst["ssh_port"])
    node.move_to(inst["ssh_host"], int(inst["ssh_port"]), cloud.instance_ref(inst))
    node.user, node.ssh_key = inst["ssh_user"] or "root", str(key_file)
    authorize(node, mesh, authorized)
    return node


@contextlib.contextmanager
def given_back_on_failure(mesh: Mesh, mesh_vars: dict, ref: str, what: str = "machine") -> Iterator[None]:
    """The machine REF given back (it would bill) when what the block does with it fails; the error
    then says so, or how to give it back by hand when that failed too."""
    try:
        yield
    except (MeshctlError, StopIteration) as exc:
        error = exc if isinstance(exc, MeshctlError) else ProviderError(f"{ref} was not recorded after its setup")
        try:
            cloud.terminate(mesh, mesh_vars, ref)
            error.hint = (error.hint + "; " if error.hint else "") + f"the new {what} {ref} was terminated"
        except MeshctlError as gone:
            error.hint = (error.hint + "; " if error.hint else "") + f"terminate {ref} by hand: {gone}"
        raise error from None


def converge(w: work.Work, name: str) -> None:
    """A relaunched node and the head set up: ``apply --limit NAME``."""
    apply.apply(w, runner.Progress(), limit=name)


def relaunch(mesh: Mesh, name: str, spec_file: Path, key_file: Path, authorized: Path | None,
             converge=converge, say=print, launch_timeout: float = cloud.LAUNCH_TIMEOUT) -> Node:  # fmt: skip
    """Launch NAME again as its spec says, reach it with the head's key (KEY_FILE), authorize the
    control machine's key on it (AUTHORIZED), record it in the head's mesh and set it and the head
    up: ``converge(work, NAME)`` (``apply --limit NAME``; a test passes its own).
    A new instance that cannot be set up is terminated (it would bill)."""
    spec = read_spec(spec_file)
    with work.changing(mesh, f"relaunch {name}", 600) as w:
        nodes, mesh_vars = w.nodes, w.mesh_vars
        node = next((n for n in nodes if n.name == name), None)
        provider = cloud.provider_of(node) if node is not None else None
        if provider not in cloud.RELAUNCHED:
            raise UsageError(f"{name} is no node the head launches again (its provider can stop it, or it has "
                             "no instance)", hint="`meshctl status` lists the nodes")  # fmt: skip
        api = cloud.account(mesh, mesh_vars, provider)
        public = Path(f"{key_file}.pub").read_text(encoding="utf-8").strip()
        key = register_key(api, public)
        say(f"{name}: launching {spec['instance_type']} in {spec['region']} at {provider} (key {key})")
        inst = cloud.launch(mesh, mesh_vars, provider, spec["instance_type"], name,
                            {"region": spec["region"], "ssh_key_names": [key]}, timeout=launch_timeout)  # fmt: skip
        ref = cloud.instance_ref(inst)
        with given_back_on_failure(mesh, mesh_vars, ref, "instance"):
            reach(mesh, node, inst, key_file, authorized, launch_timeout)
            w.save()
            headcopy.write_record(mesh, name, ref, node.host, node.port)
            say(f"{name}: {ref} runs at {node.host}:{node.port}; setting it up (apply --limit {name})")
            converge(w, name)
    spec_file.unlink(missing_ok=True)
    return node


def setup(w: work.Work, target: str, name: str, key_file: Path) -> None:
    """The new machine added as ``meshctl add-node PROVIDER:ID --name NAME`` adds one: its
    preflight, then it and the head converged."""
    add.add_node(w, add.plan_add(w, target, name, None, str(key_file), None), runner.Progress())


def keep_earlier(mesh: Mesh, name: str, ended: Path | None, now: float) -> None:
    """The head's record of the machine pool node NAME ran on before (``burst/<node>.json``) kept
    beside as ``<node>@<since>.json`` with when it ended (``until``) and why: the power program's
    record of that end (ENDED: its ``ended/<node>.json``, SlurmUser's, read without following a
    link) when it names that machine, else NOW (``until_known`` false: at most then). `meshctl
    usage` lists every machine a pool rented, the lost ones with the rest."""
    record = burst.read_rented(mesh, name)
    if not record.get("instance") or not isinstance(record.get("since"), int):
        return
    end: dict = {}
    if ended is not None:
        with contextlib.suppress(OSError, ValueError, UsageError):
            end = json.loads(relaunch_read(ended / f"{name}.json"))
    end = end if isinstance(end, dict) else {}
    named = isinstance(end.get("instances"), list) and record["instance"] in end["instances"]
    at = end.get("at") if named and isinstance(end.get("at"), int) and end["at"] >= record["since"] else None
    why = core.mesh_text.slurm_reason(str(end.get("why") or "")) if at is not None else ""
    kept = {**record, "until": at if at is not None else int(now), "until_known": at is not None,
            "lost": bool(end.get("lost")) and at is not None, "why": why}  # fmt: skip
    folder = burst.rented_dir(mesh)
    atomic_write(folder / f"{name}@{record['since']}.json", json.dumps(kept) + "\n", mode=0o600)
    earlier = sorted(folder.glob(f"{name}@*.json"), key=lambda p: p.name.split("@")[1].zfill(16))
    for old in earlier[:-KEPT_EARLIER]:  # the head keeps the last few: `usage` reads them
        old.unlink(missing_ok=True)


def rent(mesh: Mesh, name: str, key_file: Path, authorized: Path | None, say: Callable[[str], None] = print,
         setup=setup, launch_timeout: float = cloud.LAUNCH_TIMEOUT, clock=time.monotonic,
         ended: Path | None = None) -> Node:  # fmt: skip
    """Rent a machine for the pool node NAME and set it up; each phase said with its seconds. A
    machine created that cannot be set up is terminated. The record of the machine it ran on
    before is kept (``keep_earlier``; ENDED: the power program's records of machines' ends)."""
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
        running, up = burst.spend(mesh, mesh_vars, every, configured, leave_out=name)
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
        # A create that failed may have made a machine all the same: the marker stays, and reap
        # (the service's ExecStopPost) gives back whatever is named as the node.
        offer, inst = cloud.launch_first(mesh, mesh_vars, chosen.candidates, name,
                                         say=lambda line: say(f"{name}: {line}"), timeout=launch_timeout)  # fmt: skip
        ref = cloud.instance_ref(inst)
        price = offer.price_per_hour if offer is not None else float(pool["max_price"])
        burst.rented_dir(mesh).mkdir(mode=0o700, exist_ok=True)
        keep_earlier(mesh, name, ended, time.time())
        atomic_write(burst.rented_dir(mesh) / f"{name}.json", json.dumps(
            {"node": name, "pool": pool["name"], "instance": ref, "price": price, "since": int(time.time())}) + "\n",
            mode=0o600)  # fmt: skip
        say(f"{name}: rented {ref} ({inst.get('gpu_type') or pool['gpu']}) at ${price:.2f}/h")
        since = phase("launch (created, running)", since)
        try:
            with given_back_on_failure(mesh, mesh_vars, ref):
                probe = Node(name, inst["ssh_host"], inst["ssh_user"] or "root", int(inst["ssh_port"]), str(key_file))
                reach(mesh, probe, inst, key_file, authorized, launch_timeout)
                since = phase("boot (SSH answers)", since)
                setup(others, ref, name, key_file)
                node = next(n for n in others.nodes if n.name == name)
                headcopy.write_record(mesh, name, ref, node.host, node.port, node.mesh_address)
                phase("setup (add-node: preflight, converge)", since)
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
