# Copyright: meshctl contributors; Apache-2.0
"""Burst pools: Slurm cloud nodes that a queued job turns into a rented machine (plain functions).

A pool (``burst_pools`` in ``mesh.yml``'s vars, written by ``meshctl burst add``) is K Slurm nodes
``NAME-1..K``, declared ``State=CLOUD`` with the pool's GPUs as gres: Slurm's power saving resumes
one when a job needs it, the head's relaunch service rents the cheapest offer that fits and sets
it up, and one idle for the pool's idle time is terminated. Here, once for meshctl, the roles and
the head's programs: what a pool may say (``pool_problems``), its nodes (``node_names``,
``pool_nodes``), its slurm.conf and gres.conf lines, and the mesh-wide spend limit
(``burst_max_spend``) as a number.
"""

from __future__ import annotations

import re

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import LAUNCH_KEYS

NAME_RE = re.compile(r"[a-z][a-z0-9]{0,15}")  # a pool's name: its partition's, its nodes' stem
GPU_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.-]{0,40}")
# Names Slurm or meshctl already gives a partition or a node set.
RESERVED = ("main", "gpu", "meshctl", "default", "all", "cloud")
MAX_NODES = 64
MAX_PRICE = 1000.0  # $/h of one machine: above it is a typo
MIN_IDLE = 60  # seconds: Slurm's power saving looks about once a minute
KEYS = ("name", "gpu", "gpus", "max_nodes", "max_price", "providers", "idle", "cpus", "memory_mb", "launch")
# A pool's ``launch``: what its rents add to every create (a provider's own launch options, given to
# `meshctl burst add` as to `meshctl launch`: Runpod's --cloud, Paperspace's --template-id); never
# what the pool or the head decides itself (the machine's name, type, GPUs, size and the head's key).
POOL_DECIDES = ("name", "type", "gpus", "public_key", "ssh_key_names", "cpus", "memory_gb")
LAUNCH_VALUE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.:/@+=-]{0,199}")
WEIGHT = 1000  # Slurm fills nodes of lower weight first: every owned or rented node (1) before a pool's
FEATURE = "meshctl_burst"  # every pool node's feature (the pool's own name is its partition)
DEVICE = "/dev/nvidia"  # a rented NVIDIA machine's GPU devices: /dev/nvidia0..N-1
DEFAULT_IDLE = 600


class BurstError(ValueError):
    pass


def gres_type(gpu):
    """The GRES type a pool's GPU gives (``H100`` -> ``h100``, ``RTX 4090`` -> ``rtx_4090``): what a
    job asks (``--gres=gpu:h100:1``); the pool's nodes register with it, whatever the rented machine's
    own model string is."""
    name = re.sub(r"^nvidia\s+", "", str(gpu).strip().lower())
    return re.sub(r"[^a-z0-9]+", "_", name).strip("_")


def _number(value, kind, low, high):
    if isinstance(value, bool):
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        return None
    if kind is int and isinstance(value, float) and not value.is_integer():
        return None
    return number if low <= number <= high else None


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION_RE = re.compile(r"^(?:\d{1,9}[smhd])+\Z")


def idle_seconds(value):
    """A pool's ``idle``: seconds (600, as `meshctl burst add` writes it) or a time as --idle takes it
    (10m, 1h30m, 600s); None when it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = re.sub(r"\s+", "", str(value).lower()) if isinstance(value, str) else ""
    if text.isdigit():
        return int(text)
    if not DURATION_RE.fullmatch(text):
        return None
    return sum(int(n) * UNITS[u] for n, u in re.findall(r"(\d+)([smhd])", text))


def pool_problems(pool, providers=()):
    """What is wrong with one pool (a dict as ``burst_pools`` holds it); PROVIDERS: the names a pool
    may rent from (besides ``any``)."""
    if not isinstance(pool, dict):
        return [f"a pool must be a mapping of {', '.join(KEYS)}"]
    name = pool.get("name")
    label = f"pool {name}" if isinstance(name, str) else "a pool"
    problems = [f"{label}: unknown key {key!r}" for key in pool if key not in KEYS]
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        problems.append(f"{label}: name must be a lower-case letter then up to 15 letters or digits (h100, a10x)")
    elif name in RESERVED or name.startswith("meshctl"):
        problems.append(f"{label}: {name} is a partition meshctl or Slurm already names; pick another")
    gpu = pool.get("gpu")
    if not isinstance(gpu, str) or not GPU_RE.fullmatch(gpu) or not gres_type(gpu):
        problems.append(f"{label}: gpu must be a GPU type (H100, A10, RTX 4090)")
    checks = (
        ("gpus", int, 1, 64),
        ("max_nodes", int, 1, MAX_NODES),
        ("max_price", float, 0.01, MAX_PRICE),
        ("cpus", int, 1, 4096),
        ("memory_mb", int, 256, 64 * 1024 * 1024),
        ("idle", int, MIN_IDLE, 86400 * 7),
    )
    for key, kind, low, high in checks:
        value = idle_seconds(pool.get(key)) if key == "idle" else pool.get(key)
        if _number(value, kind, low, high) is None:
            problems.append(f"{label}: {key} must be a number from {low} to {high}, not {pool.get(key)!r}")
    launch = pool.get("launch")
    if launch is not None and not isinstance(launch, dict):
        problems.append(f"{label}: launch must be a mapping of launch options (`meshctl burst add` writes it)")
    for key, value in (launch or {}).items() if isinstance(launch, dict) else ():
        values = value if isinstance(value, list) else [value]
        if key not in LAUNCH_KEYS or key in POOL_DECIDES:
            problems.append(f"{label}: launch option {key!r} is none a pool may set")
        elif not values or not all(isinstance(v, str) and LAUNCH_VALUE_RE.fullmatch(v) for v in values):
            problems.append(f"{label}: launch option {key} must be plain text (letters, digits, . _ : / @ + = -)")
    chosen = pool.get("providers")
    if not isinstance(chosen, list) or not chosen or not all(isinstance(p, str) for p in chosen):
        problems.append(f"{label}: providers must be a list: [any] or some of {', '.join(providers)}")
    else:
        unknown = [p for p in chosen if p != "any" and p not in providers]
        if unknown or ("any" in chosen and len(chosen) > 1):
            problems.append(f"{label}: providers {chosen} must be [any] or some of {', '.join(providers)}")
    return problems


def pools_problems(pools, providers=()):
    """What is wrong with ``burst_pools``: each pool's problems, and names or nodes given twice."""
    if pools in (None, ""):
        return []
    if not isinstance(pools, list):
        return ["burst_pools must be a list of pools (`meshctl burst add` writes it)"]
    problems, seen = [], set()
    for pool in pools:
        problems += pool_problems(pool, providers)
        name = pool.get("name") if isinstance(pool, dict) else None
        if name in seen:
            problems.append(f"pool {name}: declared twice")
        seen.add(name)
    return problems


def check_pools(pools, providers=()):
    """``burst_pools`` as a list of pools, or BurstError naming every problem."""
    problems = pools_problems(pools, providers)
    if problems:
        raise BurstError("; ".join(problems))
    return list(pools or [])


def node_names(pool):
    return [f"{pool['name']}-{i}" for i in range(1, int(pool["max_nodes"]) + 1)]


def pool_nodes(pools):
    """``{node: pool}`` for every node of every pool."""
    return {node: pool for pool in pools or [] if isinstance(pool, dict) for node in node_names(pool)}


def pool_of(name, pools):
    return pool_nodes(pools).get(name)


def hostlist(pool):
    count = int(pool["max_nodes"])
    return f"{pool['name']}-1" if count == 1 else f"{pool['name']}-[1-{count}]"


def providers_of(pool, configured):
    """The providers POOL rents from: its list, or every one the mesh holds a key for (``any``)."""
    chosen = pool.get("providers") or ["any"]
    return sorted(configured) if "any" in chosen else [p for p in chosen if p in configured]


def burst_providers(pools, configured):
    """Every provider a pool of POOLS may rent from (their keys go to the head)."""
    return sorted({p for pool in pools or [] for p in providers_of(pool, configured)})


def max_spend(value):
    """``burst_max_spend`` ($/h of every pool machine running together) as a number, None for no
    limit beyond the pools' own (each at most max_nodes x max_price)."""
    if value in (None, "", False):
        return None
    number = _number(value, float, 0.0, 100000.0)
    if number is None:
        raise BurstError(f"burst_max_spend {value!r} must be dollars an hour (a number, 0 to 100000)")
    return number


def slurm_lines(pools, features=(), power_prefix="meshctl_idle_", access=""):
    """slurm.conf's lines for POOLS: one cloud node line per pool (its GPUs as gres, CPUs and memory
    no more than the smallest offer has, the pool's GPU type and idle feature beside FEATURES, a
    weight above every other node's), and a partition named after the pool (ACCESS: what each
    partition adds, its AllowGroups)."""
    lines = []
    for pool in pools or []:
        kind = gres_type(pool["gpu"])
        names = [*features, kind, FEATURE, f"{power_prefix}{idle_seconds(pool['idle'])}"]
        lines.append(f"NodeName={hostlist(pool)} State=CLOUD CPUs={int(pool['cpus'])} "
                     f"RealMemory={int(pool['memory_mb'])} Gres=gpu:{kind}:{int(pool['gpus'])} "
                     f"Feature={','.join(dict.fromkeys(names))} Weight={WEIGHT}")  # fmt: skip
        lines.append(f"PartitionName={pool['name']} Nodes={hostlist(pool)} MaxTime=INFINITE State=UP{access}")
    return lines


def gres_lines(pools):
    """gres.conf's lines for POOLS: each node's GPUs as /dev/nvidia0..N-1, of the pool's type."""
    lines = []
    for pool in pools or []:
        count = int(pool["gpus"])
        files = f"{DEVICE}0" if count == 1 else f"{DEVICE}[0-{count - 1}]"
        lines.append(f"NodeName={hostlist(pool)} Name=gpu Type={gres_type(pool['gpu'])} File={files}")
    return lines


def within(price, pool, running, limit):
    """Whether a machine at PRICE $/h may be rented for POOL with RUNNING $/h of pool machines up and
    the mesh-wide LIMIT (None: none): at most the pool's max_price, and the sum at most LIMIT."""
    return price <= float(pool["max_price"]) and (limit is None or running + price <= limit + 1e-9)
