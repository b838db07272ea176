# Copyright: meshctl contributors; Apache-2.0
"""Slurm version decisions (pure functions, unit-tested; role slurm's filters adapt them)."""

from __future__ import annotations

import os
import re

# Major releases in order. Unknown (newer) majors sort in by number.
KNOWN_MAJORS = (
    "17.02", "17.11", "18.08", "19.05", "20.02", "20.11", "21.08", "22.05",
    "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05",
)  # fmt: skip


def slurm_major(version):
    """'22.05.8-4+deb12u3' -> '22.05'; None when no version."""
    match = re.match(r"^\s*(\d+)\.(\d+)", str(version or ""))
    return f"{int(match.group(1))}.{int(match.group(2)):02d}" if match else None


def _window(controller_major):
    """How many older majors a slurmctld accepts: three from 24.11 on, two before."""
    return 3 if tuple(map(int, controller_major.split("."))) >= (24, 11) else 2


def slurm_version_problems(versions, controller):
    """Problems with mixing these versions, one message each; [] when the mesh is fine.

    ``versions`` maps host -> Slurm version (installed, or the one apt would install);
    ``controller`` names the slurmctld host.
    """
    majors = {host: slurm_major(v) for host, v in versions.items()}
    missing = sorted(h for h, m in majors.items() if m is None)
    if missing:
        return [f"no Slurm package is available on {', '.join(missing)}: enable the distribution's repository"]
    ctl = majors.get(controller)
    if ctl is None:
        return [f"controller {controller} reported no Slurm version"]
    order = sorted(set(KNOWN_MAJORS) | set(majors.values()), key=lambda m: tuple(map(int, m.split("."))))
    problems = []
    for host in sorted(majors):
        major = majors[host]
        distance = order.index(ctl) - order.index(major)
        if distance < 0:
            problems.append(
                f"{host} has slurmd {versions[host]}, newer than slurmctld {versions[controller]} on {controller}: "
                f"upgrade the controller first or pin {host} to {ctl}"
            )
        elif distance > _window(ctl):
            problems.append(
                f"{host} has slurmd {versions[host]}, {distance} major releases older than slurmctld "
                f"{versions[controller]} on {controller} (at most {_window(ctl)} supported): upgrade {host}"
            )
    return problems


def slurm_membership(version, wanted="auto"):
    """How nodes join: 'dynamic' (slurmd -Z registers itself) or 'static' (NodeName lines).

    Dynamic nodes exist from Slurm 22.05 on; ``wanted`` 'auto' picks them wherever the controller's
    version has them, 'dynamic' insists (and fails clearly on an older version), 'static' keeps
    node lines in slurm.conf.
    """
    major = slurm_major(version)
    if major is None:
        raise ValueError(f"cannot tell Slurm's version from {version!r}")
    supported = tuple(map(int, major.split("."))) >= (22, 5)
    if wanted == "static":
        return "static"
    if wanted == "dynamic" and not supported:
        raise ValueError(f"Slurm {version} has no dynamic nodes (they start with 22.05): set slurm_membership: static")
    if wanted not in ("auto", "dynamic"):
        raise ValueError(f"slurm_membership is {wanted!r}: use auto, dynamic or static")
    return "dynamic" if supported else "static"


def apt_policy_version(text):
    """Installed version from `apt-cache policy PKG`, else the candidate; None when neither."""
    installed = re.search(r"Installed:\s*(\S+)", text or "")
    if installed and installed.group(1) != "(none)":
        return installed.group(1)
    candidate = re.search(r"Candidate:\s*(\S+)", text or "")
    if candidate and candidate.group(1) != "(none)":
        return candidate.group(1)
    return None


def slurm_plugins(version, cgroup_versions, any_container):
    """Process tracking, task plugins and cgroup plugin for a mesh, from what its nodes run.

    ``version`` is the controller's Slurm version, ``cgroup_versions`` each compute node's cgroup
    version (1, 2, or None when unknown) and ``any_container`` whether a compute node is a
    container. These plugins are cluster-wide (slurm.conf), so the least capable node decides:

    - a container has no cgroup control of its own: proctrack/linuxproc, task/none;
    - Slurm before 22.05 knows cgroup v1 only (its cgroup plugins fail on a v2-only machine,
      Ubuntu 22.04's default): proctrack/cgroup only when every node is on v1, else
      proctrack/linuxproc and task/affinity (no containment, jobs run);
    - from 22.05 on, Slurm runs either: proctrack/cgroup with cgroup/v1 or cgroup/v2 when every
      node agrees, ``autodetect`` (each slurmd picks) when they differ or one is unknown.

    Returns {"proctrack", "task", "cgroup_plugin"}; cgroup_plugin is None where cgroup.conf must
    not name one (no cgroup plugins in use, or a Slurm that has no CgroupPlugin setting).
    """
    major = slurm_major(version)
    if major is None:
        raise ValueError(f"cannot tell Slurm's version from {version!r}")
    if any_container:
        return {"proctrack": "proctrack/linuxproc", "task": "task/none", "cgroup_plugin": None}
    found = {v for v in cgroup_versions or [] if v is not None}
    unknown = any(v is None for v in cgroup_versions or []) or not found
    if tuple(map(int, major.split("."))) < (22, 5):
        if found == {1} and not unknown:
            return {"proctrack": "proctrack/cgroup", "task": "task/cgroup,task/affinity", "cgroup_plugin": None}
        return {"proctrack": "proctrack/linuxproc", "task": "task/affinity", "cgroup_plugin": None}
    plugin = f"cgroup/v{found.pop()}" if len(found) == 1 and not unknown else "autodetect"
    return {"proctrack": "proctrack/cgroup", "task": "task/cgroup,task/affinity", "cgroup_plugin": plugin}


def slurm_builds(versions, mesh_major):
    """Hosts whose packaged Slurm is not the mesh's major: they get the mesh's version built for
    their distribution (role slurm_build). ``versions`` maps host -> version (installed,
    else the candidate); a host with no Slurm package at all is left to the version check."""
    wanted = slurm_major(mesh_major)
    if wanted is None:
        raise ValueError(f"cannot tell the mesh's Slurm version from {mesh_major!r}")
    return sorted(h for h, v in versions.items() if slurm_major(v) not in (None, wanted))


def slurm_effective_versions(versions, mesh_major, build=True):
    """The version each host will run: its own, or the mesh's major where it gets a build."""
    builds = set(slurm_builds(versions, mesh_major)) if build else set()
    return {h: (mesh_major if h in builds else v) for h, v in versions.items()}


# A folder name part and a file name a build may use on the control machine: what the building node
# reports (its release, its architecture, the files it built) is data, never a path of its own.
BUILD_PART_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\Z")
BUILD_FILE_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9.+~_-]{0,200}\.deb|Packages|VERSION|BUILD-INFO)\Z")


class BuildPathError(ValueError):
    """A node named a build folder or file outside the package cache."""


def slurm_build_folder(cache_dir, major, suite, release, architecture):
    """``CACHE/MAJOR-SUITE/RELEASE-ARCH``, each part a plain word: a node reporting its release as
    ``x/../../root/.ssh`` gets an error, never a folder outside the cache."""
    parts = {"major": major, "suite": suite, "release": release, "architecture": architecture}
    for what, part in parts.items():
        if not isinstance(part, str) or not BUILD_PART_RE.fullmatch(part) or ".." in part:
            raise BuildPathError(f"the build folder's {what} {str(part)[:60]!r} is not a word of [a-z0-9._-]")
    root = str(cache_dir).rstrip("/")
    if not root.startswith("/"):
        raise BuildPathError(f"the package cache {root!r} is not an absolute path")
    folder = f"{root}/{major}-{suite}/{release}-{architecture}"
    if not os.path.normpath(folder).startswith(os.path.normpath(root) + "/"):
        raise BuildPathError(f"{folder!r} is outside {root}")
    return folder


def slurm_build_files(paths):
    """The file names of a build's output listing (``find`` results or paths); an error names any
    that is not a package or an index file (``..``, a hidden file, a path)."""
    names = [str(p.get("path", "") if isinstance(p, dict) else p).rsplit("/", 1)[-1] for p in paths or []]
    bad = [n for n in names if not BUILD_FILE_RE.fullmatch(n)]
    if bad:
        raise BuildPathError(f"build files meshctl refuses: {', '.join(repr(n[:60]) for n in bad[:5])}")
    return sorted(names)
