# Copyright: meshctl contributors; Apache-2.0
"""Plain parsing functions for hardware command outputs (lscpu, free -m, slurmd -C, nvidia-smi).

Standard library only: this file runs on nodes as Ansible module_utils, and meshctl loads the
same file for ``meshctl render-node``. Every function takes text and returns plain data, so it
is unit-tested against real outputs in tests/fixtures.
"""

from __future__ import annotations

import re

NVIDIA_SMI_FAILED = "NVIDIA-SMI has failed"
# The query the facts module runs; a CSV without header is read in this column order.
GPU_QUERY_FIELDS = ("index", "name", "uuid", "memory.total")


class HwParseError(ValueError):
    """An output was not in any format we know."""


# What a real machine can report. Anything outside is a lying or broken output, refused before it
# reaches slurm.conf (Slurm itself caps CPUs per node far below 65536).
LIMITS = {"cpus": 65536, "sockets": 1024, "cores_per_socket": 4096, "threads_per_core": 16, "boards": 64,
          "memory_mb": 64 * 1024 * 1024, "gpu_index": 1023}  # fmt: skip
GRES_TYPE_RE = re.compile(r"^[a-z0-9_]+\Z")
DEVICE_FILE_RE = re.compile(r"^/dev/nvidia[0-9]+\Z")


def _int(value, what, low=0, high=None):
    """A whole number in ASCII digits (``str.isdigit`` would take '²'), within [low, high]."""
    text = str(value).strip()
    if not re.fullmatch(r"-?[0-9]{1,20}", text):
        raise HwParseError(f"{what}: expected a whole number, got {value!r}")
    number = int(text)
    if number < low or (high is not None and number > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise HwParseError(f"{what}: {number} is not a possible value (expected {bound})")
    return number


# Free text a node reports (a GPU model, nvidia-smi's first line): printable ASCII without the
# characters of a Jinja or shell construct, and short. A model outside it is not a GPU's name.
FREE_TEXT_RE = re.compile(r"^[A-Za-z0-9 _.,:;()/+=@'?!-]*\Z")
UUID_RE = re.compile(r"^[A-Za-z0-9-]{1,80}\Z")
SLURM_VERSION_RE = re.compile(r"^[0-9]{1,4}\.[0-9]{1,2}\.[0-9]{1,4}\Z")
SLURM_MAJOR_RE = re.compile(r"^[0-9]{1,4}\.[0-9]{2}\Z")
MAX_GPUS = 1024
# The exact fact set ``node_facts`` plus the module returns: key -> what it may be.
FACT_KEYS = {
    "cpus": ("count", "cpus"),
    "sockets": ("count", "sockets"),
    "cores_per_socket": ("count", "cores_per_socket"),
    "threads_per_core": ("count", "threads_per_core"),
    "topology_source": ("choice", ("lscpu", "slurmd -C")),
    "topology_adjusted": ("bool", None),
    "memory_total_mb": ("count", "memory_mb"),
    "real_memory_mb": ("count", "memory_mb"),
    "gpus": ("gpus", None),
    "gpu_status": ("choice", ("ok", "none", "absent", "failed")),
    "gpu_error": ("text", 300),
    "slurm_version": ("match", SLURM_VERSION_RE),
    "slurm_major": ("match", SLURM_MAJOR_RE),
    "in_container": ("bool", None),
    "cgroup_version": ("choice", (None, 1, 2)),
}
GPU_KEYS = {
    "index": ("index", None),
    "model": ("text", 96),
    "type": ("match", GRES_TYPE_RE),
    "uuid": ("match", UUID_RE),
    "memory_mb": ("size", "memory_mb"),
    "mig_devices": ("size", "gpu_index"),
    "file": ("match", DEVICE_FILE_RE),
}
GPU_REQUIRED = ("index", "model", "type")


def _value_problem(key, value, kind, arg):
    """What is wrong with one value of the fact schema, or None."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if kind == "gpus":
        return None  # each entry is checked against GPU_KEYS
    if kind == "count":
        ok, want = is_int and 1 <= value <= LIMITS[arg], f"a whole number from 1 to {LIMITS[arg]}"
    elif kind in ("size", "index"):
        high = LIMITS[arg or "gpu_index"]
        ok, want = (
            (is_int and 0 <= value <= high) or (value is None and kind == "size"),
            f"a whole number from 0 to {high}",
        )
    elif kind == "bool":
        ok, want = isinstance(value, bool), "true or false"
    elif kind == "choice":
        ok, want = any(_same(value, c) for c in arg), f"one of {list(arg)}"
    elif kind == "text":
        ok = value is None or (isinstance(value, str) and len(value) <= arg and bool(FREE_TEXT_RE.fullmatch(value)))
        want = f"plain text of at most {arg} characters"
    else:  # "match": a word of that pattern, or null where the key may be unknown
        ok = (value is None and key not in GPU_REQUIRED) or (isinstance(value, str) and bool(arg.fullmatch(value)))
        want = arg.pattern
    return None if ok else f"{key} is {_brief(value)}, not {want}"


def _same(value, choice):
    """``value`` is ``choice``: text equal as text (Ansible hands plugins str subclasses), a number
    as a number (never a bool, never text), None as None."""
    if choice is None or isinstance(choice, bool) or isinstance(value, bool):
        return value is choice
    if isinstance(choice, str):
        return isinstance(value, str) and value == choice
    return isinstance(value, int) and value == choice


def _brief(value):
    """A value for a message: its type for containers, a short repr otherwise (never the whole of it)."""
    if isinstance(value, (dict, list, tuple, set)):
        return f"a {type(value).__name__}"
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _keys_problems(what, data, schema, required):
    problems = []
    unknown = sorted(str(k) for k in data if k not in schema)
    if unknown:
        problems.append(f"{what}unknown keys {', '.join(_brief(k) for k in unknown[:5])}")
    missing = [k for k in required if k not in data]
    if missing:
        problems.append(f"{what}missing keys {', '.join(missing)}")
    for key, (kind, arg) in schema.items():
        if key in data:
            problem = _value_problem(key, data[key], kind, arg)
            if problem:
                problems.append(what + problem)
    return problems


def facts_problems(hw):
    """What is wrong with a fact set; [] when it is sound. The one schema of ``mesh_hw``.

    Facts come from nodes, and a rented node may lie: the fact set must have exactly the keys
    ``node_facts`` and the module return, each of its type and within what a real machine can
    report (counts, a GPU type or device file that adds no line to slurm.conf or gres.conf, free
    text without a Jinja or shell construct). meshctl checks it before recording a node's facts
    and again when loading them; the roles check it after gathering and before rendering.
    """
    if not isinstance(hw, dict):
        return ["not a mapping"]
    problems = _keys_problems("", hw, FACT_KEYS, tuple(FACT_KEYS))
    gpus = hw.get("gpus", [])
    if not isinstance(gpus, list):
        return [*[p for p in problems if not p.startswith("gpus ")], "gpus is not a list"]
    if len(gpus) > MAX_GPUS:
        return [*problems, f"gpus lists {len(gpus)} GPUs, more than {MAX_GPUS}"]
    for position, gpu in enumerate(gpus):
        if not isinstance(gpu, dict):
            problems.append(f"GPU entry {position} is not a mapping")
            continue
        problems += _keys_problems(f"GPU {position}: ", gpu, GPU_KEYS, GPU_REQUIRED)
    return problems


def parse_key_values(text):
    """Split ``Key: value`` lines on the first colon; indentation and wrapped lines are ignored."""
    values = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        if key and key not in values:
            values[key] = value.strip()
    return values


def parse_lscpu(text):
    """CPU topology from ``lscpu`` (old and new util-linux layouts, ARM clusters, hybrid chips).

    Returns cpus, sockets, cores_per_socket, threads_per_core, and ``topology_adjusted`` when the
    reported numbers did not multiply out to ``CPU(s)`` (hybrid P/E-core chips) and a consistent
    topology was chosen instead: Slurm rejects a node whose Sockets x Cores x Threads is not CPUs.
    """
    kv = parse_key_values(text)
    if "CPU(s)" not in kv:
        raise HwParseError("lscpu: no 'CPU(s):' line; is this lscpu output?")
    cpus = _int(kv["CPU(s)"], "lscpu CPU(s)", 1, LIMITS["cpus"])
    threads = _int(kv.get("Thread(s) per core", "1"), "lscpu Thread(s) per core", 1, LIMITS["threads_per_core"])
    cores_text = kv.get("Core(s) per socket") or kv.get("Core(s) per cluster")
    sockets_text = kv.get("Socket(s)", "-")
    if sockets_text in ("", "-"):
        sockets_text = kv.get("Cluster(s)", "1")
    sockets = _int(sockets_text, "lscpu Socket(s)", 1, LIMITS["sockets"])
    cores = (_int(cores_text, "lscpu Core(s) per socket", 1, LIMITS["cores_per_socket"]) if cores_text
             else max(cpus // (sockets * threads), 1))  # fmt: skip
    adjusted = False
    if sockets * cores * threads != cpus:
        adjusted = True
        if cpus % (sockets * threads) == 0:
            cores = cpus // (sockets * threads)
        else:
            threads = 1
            cores = cpus // sockets if cpus % sockets == 0 else cpus
            sockets = sockets if cpus % sockets == 0 else 1
    return {
        "cpus": cpus,
        "sockets": sockets,
        "cores_per_socket": cores,
        "threads_per_core": threads,
        "topology_adjusted": adjusted,
        "architecture": kv.get("Architecture"),
        "model_name": kv.get("Model name"),
    }


def parse_free(text):
    """Total memory in MiB from ``free -m`` (procps 3.3 and 4, with or without the buffers row)."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "Mem:":
            if len(fields) < 2:
                break
            return {"memory_total_mb": _int(fields[1], "free -m Mem total", 1, LIMITS["memory_mb"])}
    raise HwParseError("free -m: no 'Mem:' row; run `free -m` and pass its output")


def parse_slurmd_c(text):
    """Slurm's own view from ``slurmd -C``: only the line with the hardware counts is read.

    Lines such as ``slurmd: Considering each NUMA node as a socket`` and ``Found gpu ...`` are
    skipped; ``UpTime=`` is ignored.
    """
    for line in text.splitlines():
        line = line.strip()
        if "CPUs=" not in line or line.startswith("slurmd:"):
            continue
        pairs = dict(item.split("=", 1) for item in line.split() if "=" in item)
        boards = _int(pairs.get("Boards", "1"), "slurmd -C Boards", 1, LIMITS["boards"])
        sockets = _int(pairs.get("SocketsPerBoard", pairs.get("Sockets", "1")), "slurmd -C SocketsPerBoard", 1,
                       LIMITS["sockets"])  # fmt: skip
        result = {
            "cpus": _int(pairs["CPUs"], "slurmd -C CPUs", 1, LIMITS["cpus"]),
            "sockets": boards * sockets,
            "cores_per_socket": _int(
                pairs.get("CoresPerSocket", "1"), "slurmd -C CoresPerSocket", 1, LIMITS["cores_per_socket"]
            ),
            "threads_per_core": _int(
                pairs.get("ThreadsPerCore", "1"), "slurmd -C ThreadsPerCore", 1, LIMITS["threads_per_core"]
            ),
        }
        if "RealMemory" in pairs:
            result["memory_total_mb"] = _int(pairs["RealMemory"], "slurmd -C RealMemory", 1, LIMITS["memory_mb"])
        if "NodeName" in pairs:
            result["node_name"] = pairs["NodeName"]
        if "Gres" in pairs:
            result["gres"] = pairs["Gres"]
        return result
    raise HwParseError("slurmd -C: no line with CPUs=...; run `slurmd -C` and pass its output")


def parse_slurm_version(text):
    """``slurm 22.05.8`` (``slurmd -V``) -> {'version': '22.05.8', 'major': '22.05'}."""
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", text or "")
    if not match:
        raise HwParseError("slurmd -V: no version number in {!r}".format((text or "").strip()[:80]))
    return {"version": match.group(0), "major": f"{match.group(1)}.{match.group(2).zfill(2)}"}


_GPU_L_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*\Z")
_MIG_L_LINE = re.compile(r"^\s+MIG ")


def gres_type(model):
    """A stable GRES type name from a GPU model.

    Lower-case, the leading ``NVIDIA`` dropped, every run of other characters turned into one
    ``_``: ``NVIDIA RTX A6000`` -> ``rtx_a6000``, ``NVIDIA H100 80GB HBM3`` -> ``h100_80gb_hbm3``,
    ``NVIDIA A100-SXM4-80GB`` -> ``a100_sxm4_80gb``, ``Quadro RTX 4000`` -> ``quadro_rtx_4000``.
    """
    name = re.sub(r"^nvidia\s+", "", model.strip().lower())
    return re.sub(r"[^a-z0-9]+", "_", name).strip("_")


def _gpu(index, model, uuid=None, memory_mb=None):
    kind = gres_type(model)
    if not kind:
        raise HwParseError(f"GPU {index}: model {model!r} gives no GRES type (no letters or digits)")
    return {"index": index, "model": model, "type": kind, "uuid": uuid, "memory_mb": memory_mb}


def _unique_indexes(gpus, what):
    seen = [g["index"] for g in gpus]
    twice = sorted({i for i in seen if seen.count(i) > 1})
    if twice:
        raise HwParseError(f"{what}: GPU {twice[0]} is listed twice")
    return gpus


def parse_nvidia_smi_list(text):
    """GPUs from ``nvidia-smi -L``. MIG slices (indented lines) are counted, not listed as GPUs."""
    gpus = []
    for line in text.splitlines():
        match = _GPU_L_LINE.match(line.rstrip())
        if match:
            gpus.append(_gpu(int(match.group(1)), match.group(2).strip(), match.group(3).strip()))
            gpus[-1]["mig_devices"] = 0
        elif _MIG_L_LINE.match(line) and gpus:
            gpus[-1]["mig_devices"] += 1
    return _unique_indexes(gpus, "nvidia-smi -L")


def _strip_unit(value):
    value = value.strip()
    if value in ("[N/A]", "N/A", "[Not Supported]"):
        return None
    return re.sub(r"\s*(MiB|W|MHz|%)$", "", value)


def parse_nvidia_smi_query(text, fields=GPU_QUERY_FIELDS):
    """GPUs from ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.

    A header line, when present, names the columns (units in brackets are dropped); without one
    the columns are ``fields``. Rows without an index are numbered in order.
    """
    rows = [line for line in text.splitlines() if line.strip()]
    if not rows:
        return []
    first = [cell.strip() for cell in rows[0].split(",")]
    if "name" in first or "index" in first or any(c.startswith("memory.total") for c in first):
        fields = tuple(re.sub(r"\s*\[.*\]$", "", c) for c in first)
        rows = rows[1:]
    gpus = []
    for position, row in enumerate(rows):
        cells = [c.strip() for c in row.split(",")]
        if len(cells) != len(fields):
            raise HwParseError(f"nvidia-smi CSV: row {row!r} has {len(cells)} columns, expected {len(fields)}")
        record = dict(zip(fields, cells, strict=False))
        if "name" not in record:
            raise HwParseError("nvidia-smi CSV: no 'name' column; query at least index,name")
        memory = _strip_unit(record.get("memory.total", "")) if "memory.total" in record else None
        index = _int(record["index"], "nvidia-smi index", 0, LIMITS["gpu_index"]) if "index" in record else position
        memory_mb = _int(memory, "nvidia-smi memory.total", 0, LIMITS["memory_mb"]) if memory else None
        gpus.append(_gpu(index, record["name"], record.get("uuid"), memory_mb))
    return _unique_indexes(gpus, "nvidia-smi CSV")


def parse_nvidia_smi(text):
    """Either form of nvidia-smi output -> {'status': ..., 'gpus': [...], 'error': ...}.

    status is ``ok``, ``none`` (no GPU listed) or ``failed`` (the driver could not be reached:
    a clear fact, not a crash).
    """
    text = text or ""
    if NVIDIA_SMI_FAILED in text or "couldn't communicate with the NVIDIA driver" in text:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        # Printed and recorded: only the characters the fact schema takes, at most 300 of them.
        first = "".join(c if FREE_TEXT_RE.match(c) else "?" for c in first)[:300]
        return {"status": "failed", "gpus": [], "error": first}
    if any(_GPU_L_LINE.match(line.rstrip()) for line in text.splitlines()):
        gpus = parse_nvidia_smi_list(text)
    else:
        gpus = parse_nvidia_smi_query(text)
    return {"status": "ok" if gpus else "none", "gpus": gpus, "error": None}


_LS_DEV = re.compile(r"^c\S*\s+\d+\s+\S+\s+\S+\s+(\d+),\s*(\d+)\s.*?(/dev/nvidia\S*)\s*\Z")


def parse_dev_listing(text):
    """``/dev/nvidiaN`` paths from ``ls -l /dev/nvidia*`` (any locale or time style), numeric order.

    Only character devices of major 195 whose name is ``nvidia`` plus digits count: nvidiactl,
    nvidia-modeset, nvidia-uvm and nvidia-caps entries are not GPUs.
    """
    files = []
    for line in text.splitlines():
        match = _LS_DEV.match(line.strip())
        if match and match.group(1) == "195" and re.fullmatch(r"/dev/nvidia\d+", match.group(3)):
            files.append(match.group(3))
    return sorted(set(files), key=lambda f: int(f[len("/dev/nvidia") :]))


def match_device_files(gpus, device_files):
    """Give each GPU its ``/dev/nvidiaN`` file.

    ``device_files`` lists the ``/dev/nvidia<digits>`` paths present. Inside containers the
    indices nvidia-smi prints restart at 0 while the files keep host numbers (a pod may see only
    ``/dev/nvidia7``), so: same-numbered file when every GPU has one, else files in numeric order
    when the counts match, else ``None`` (the caller reports it).
    """
    numbered = sorted(
        (f for f in device_files if re.fullmatch(r"/dev/nvidia\d+", f)), key=lambda f: int(f[len("/dev/nvidia") :])
    )
    wanted = [f"/dev/nvidia{g['index']}" for g in gpus]
    if all(w in numbered for w in wanted):
        files = wanted
    elif len(numbered) == len(gpus):
        files = numbered
    else:
        files = [None] * len(gpus)
    return [dict(g, file=f) for g, f in zip(gpus, files, strict=False)]


def real_memory(memory_total_mb, reserve_mb=None, reserve_percent=5, reserve_min_mb=1024):
    """RealMemory for slurm.conf: total memory less a reserve for the OS and daemons.

    The reserve is ``reserve_mb`` when given, else the larger of ``reserve_percent`` % of the
    total and ``reserve_min_mb``; never more than half the machine.
    """
    if reserve_mb is None:
        reserve_mb = max(memory_total_mb * reserve_percent // 100, reserve_min_mb)
    reserve_mb = min(reserve_mb, memory_total_mb // 2)
    return memory_total_mb - reserve_mb


def node_facts(lscpu=None, free=None, slurmd_c=None, nvidia_smi=None, device_files=None, reserve_mb=None):
    """Combine parsed outputs into one fact set; Slurm's own view (slurmd -C) wins for topology."""
    if lscpu is None and slurmd_c is None:
        raise HwParseError("need lscpu or slurmd -C output for the CPU topology")
    topo = parse_lscpu(lscpu) if lscpu is not None else {}
    source = "lscpu"
    memory_total = parse_free(free)["memory_total_mb"] if free is not None else None
    if slurmd_c is not None:
        slurm_view = parse_slurmd_c(slurmd_c)
        topo = dict(topo, **{k: slurm_view[k] for k in ("cpus", "sockets", "cores_per_socket", "threads_per_core")})
        topo["topology_adjusted"] = False
        source = "slurmd -C"
        if memory_total is None:
            memory_total = slurm_view.get("memory_total_mb")
    if memory_total is None:
        raise HwParseError("need free -m output (or slurmd -C with RealMemory) for the memory")
    smi = parse_nvidia_smi(nvidia_smi) if nvidia_smi is not None else {"status": "absent", "gpus": [], "error": None}
    gpus = smi["gpus"]
    if gpus:
        files = device_files if device_files is not None else [f"/dev/nvidia{g['index']}" for g in gpus]
        gpus = match_device_files(gpus, files)
    return {
        "cpus": topo["cpus"],
        "sockets": topo["sockets"],
        "cores_per_socket": topo["cores_per_socket"],
        "threads_per_core": topo["threads_per_core"],
        "topology_source": source,
        "topology_adjusted": topo.get("topology_adjusted", False),
        "memory_total_mb": memory_total,
        "real_memory_mb": real_memory(memory_total, reserve_mb),
        "gpus": gpus,
        "gpu_status": smi["status"],
        "gpu_error": smi["error"],
    }
