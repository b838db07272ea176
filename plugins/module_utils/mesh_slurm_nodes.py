# Copyright: meshctl contributors; Apache-2.0
"""Plain functions about Slurm's node records (unit-tested).

How the mesh describes one node to Slurm, from the facts it reported (``mesh_hw``): the hardware
part of its record (``slurm_node_params``: what follows the name in a NodeName= line, and what a
dynamic node's slurmd registers with, ``--conf``), its static NodeName= line
(``slurm_node_line``) and its gres.conf lines (``slurm_gres_lines``). The one place: role
slurm_controller's nodes.conf and gres.conf, role slurm_node's slurmd command line and
``meshctl render-node`` (meshctl/hardware.py) all call these. A node record is
``{name, addr, provider, hw, features}``; only ``name`` and ``hw`` are needed. Whether the head
also runs jobs (``head_runs_jobs``) is decided here too: roles slurm and doctor ask it.
"""

from __future__ import annotations

from ansible_collections.meshctl.mesh.plugins.module_utils.mesh_cloud import PROVIDERS as RENTED

HEAD_JOBS_SAY = "auto, true or false"


def _gpus(node):
    return [gpu for gpu in (node.get("hw") or {}).get("gpus") or [] if gpu.get("file")]


def slurm_node_params(node):
    """CPUs=.. Sockets=.. CoresPerSocket=.. ThreadsPerCore=.. RealMemory=.. [Gres=..] [Feature=..].

    Gres counts each GPU type (types in sorted order); Feature lists the record's own features,
    then each GPU type once (in the order the GPUs come), then the provider."""
    hw = node["hw"]
    gpus = _gpus(node)
    types = list(dict.fromkeys(gpu["type"] for gpu in gpus))
    provider = node.get("provider")
    features = list(node.get("features") or []) + types + ([provider] if provider else [])
    line = (
        f"CPUs={hw['cpus']} Sockets={hw['sockets']} CoresPerSocket={hw['cores_per_socket']} "
        f"ThreadsPerCore={hw['threads_per_core']} RealMemory={hw['real_memory_mb']}"
    )
    if gpus:
        counts = {kind: sum(1 for gpu in gpus if gpu["type"] == kind) for kind in sorted(types)}
        line += " Gres=" + ",".join(f"gpu:{kind}:{count}" for kind, count in counts.items())
    if features:
        line += " Feature=" + ",".join(str(feature) for feature in features)
    return line


def slurm_node_line(node):
    """One static NodeName= line (nodes.conf, membership static)."""
    addr = f" NodeAddr={node['addr']}" if node.get("addr") else ""
    return f"NodeName={node['name']}{addr} {slurm_node_params(node)} State=UNKNOWN"


def slurm_gres_lines(node):
    """gres.conf lines: one per GPU with a device file."""
    return [f"NodeName={node['name']} Name=gpu Type={gpu['type']} File={gpu['file']}" for gpu in _gpus(node)]


def features_to_update(held_lines, wanted):
    """The nodes whose features slurmctld holds differ from those they register with now.

    ``held_lines``: ``sinfo --noheader --Node --format=%N|%f`` lines (a node in two partitions is
    listed twice); ``wanted``: ``{node: "f1,f2"}``. Returns ``{node: "f1,f2"}`` to set: a dynamic
    node keeps the features it first registered with when slurmd registers again with others.
    Features compare as sets; a node slurmctld does not list is left out (it registers anew).
    """
    held = {}
    for line in held_lines or []:
        name, _, features = str(line).strip().partition("|")
        if name:
            held[name] = {f for f in features.split(",") if f and f != "(null)"}
    return {
        name: features
        for name, features in sorted((wanted or {}).items())
        if features and name in held and held[name] != {f for f in str(features).split(",") if f}
    }


def head_runs_jobs(setting, providers):
    """Whether the head, which always runs slurmctld, also takes jobs (slurm_head_runs_jobs).

    ``setting``: ``auto`` (the default), or a boolean (YAML's, or its words ``true``/``yes``/...);
    ``providers``: every node's provider (``mesh_provider``), and every burst pool's (``any``: the
    pool rents from whichever provider has an offer). ``auto`` keeps jobs on the head while
    no node of the mesh is rented (a provider meshctl rents from, ``mesh_cloud.PROVIDERS``): a
    rented machine's root holds the munge key and can run jobs as any job user, and the head holds
    the secrets, MLflow and the provider keys, so such a mesh runs no job there.
    """
    if isinstance(setting, bool):
        return setting
    word = str(setting).strip().lower()
    if word == "auto":
        return not any(str(provider) in (*RENTED, "any") for provider in providers or [])
    if word in ("true", "yes", "on", "1"):
        return True
    if word in ("false", "no", "off", "0"):
        return False
    raise ValueError(
        f"slurm_head_runs_jobs is {setting!r}: use {HEAD_JOBS_SAY} (group_vars/all.yml; "
        "auto runs jobs on the head only while no node is rented)"
    )
