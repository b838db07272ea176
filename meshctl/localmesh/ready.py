"""Ready node images: what the roles would install, installed once per input instead of once per bed.

``meshctl-ready:<suite>`` is ``meshctl-node:<suite>`` plus every Debian package the roles install
on a head or a compute node and the three virtualenvs (MLflow's server, the job environment,
meshctl's own on a head that stops nodes), each made the way its role makes it. A bed whose nodes
start from it converges as on a re-run of an installed machine: the package tasks find their
packages, pip finds its requirements satisfied (the roles' stamps are written by the roles
themselves, at the bed's first converge). What it holds is read from the roles (their vars and
defaults) and the wheel cache's requirement sets (:mod:`meshctl.localmesh.wheels`): one place
knows each, and the image's label is a hash of it all, so a changed list rebuilds it.

Test beds only, and never all of them: the demo and Molecule's ``debian13`` (with ``default``'s
Debian 13 node) install from the bare image, the path a user takes (docs/testing.md, "Which bed
tests which path"). The image carries no secret and no daemon that starts by itself: the units the
packages enabled are disabled again (the roles enable what a node needs), and the munge key the
package made is removed (the munge role must install the mesh's, or munged does not start).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import time

import yaml

from meshctl import headcopy, resources
from meshctl.errors import EnvironmentProblem
from meshctl.localmesh import images, wheels

READY_VERSION = "1"
# The suites whose beds start from a ready image (Debian 13's install stays the bare one's).
SUITES = ("bookworm",)


def ready_tag(suite: str) -> str:
    return f"meshctl-ready:{suite}"


def _role_vars(role: str, name: str = "main") -> dict:
    path = resources.roles_dir() / role / "vars" / f"{name}.yml"
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


# Every package list of the roles: (role, file under the role, variable, with recommends), where
# the file is "defaults" or vars/NAME.yml. tests/unit/testbed/test_localmesh_ready.py checks that each
# `*_packages` variable of every role is here or in LEFT_OUT, so a new list is not forgotten.
FROM_ROLES = (
    ("mesh_base", "defaults", "mesh_base_packages", True),
    ("mesh_base", "main", "mesh_base_converged_packages", False),
    ("munge", "defaults", "munge_packages", True),
    ("slurm", "Debian", "slurm_controller_packages", False),
    ("slurm", "Debian", "slurm_node_packages", False),
    ("slurm_accounting", "Debian", "slurm_accounting_packages", False),
    ("nfs_client", "main", "nfs_client_packages", False),
    ("nfs_server", "main", "nfs_server_packages", False),
    ("job_env", "Debian", "job_env_system_packages", False),
    ("job_env", "Debian", "job_env_mpi_packages", False),
    ("mlflow", "main", "mlflow_system_packages", False),
)
LEFT_OUT = {
    "job_env_packages": "pip's, not apt's: the job environment's virtualenv (virtualenvs())",
    "pod_packages": "a pod's: test_pod.py's pods start from their own image, as a provider's do",
    "slurm_build_packages": "a switch, not a list",
}


def _role_list(role: str, where: str, variable: str) -> list[str]:
    values = resources.role_defaults(role) if where == "defaults" else _role_vars(role, where)
    value = values[variable]
    if isinstance(value, dict):  # per backend (nfs_server: kernel, ganesha): a container's is Ganesha
        value = value["ganesha"]
    return [str(v) for v in value]


def packages() -> dict[str, list[str]]:
    """The Debian packages, as the roles install them: ``recommends`` (installed with their
    recommended packages, as mesh_base and munge do) and ``plain`` (--no-install-recommends)."""
    recommends: set[str] = set()
    plain: set[str] = set()
    for role, where, variable, with_recommends in FROM_ROLES:
        (recommends if with_recommends else plain).update(_role_list(role, where, variable))
    return {"recommends": sorted(recommends), "plain": sorted(plain - recommends)}


def virtualenvs() -> list[dict]:
    """Each virtualenv a role makes: its path, how the role makes it, and what pip installs."""
    relaunch = resources.role_defaults("relaunch")["relaunch_prefix"]
    job_env_path = resources.role_defaults("mesh")["mesh_job_env_path"]
    return [
        {"path": resources.role_defaults("mlflow")["mlflow_venv"], "venv_args": [],
         "requirements": [wheels.mlflow_package()]},
        {"path": job_env_path, "venv_args": ["--system-site-packages"],
         "requirements": [str(p) for p in resources.role_defaults("job_env")["job_env_packages"]]},
        # The role writes this file and runs pip only when it changed or the virtualenv is missing.
        {"path": f"{relaunch}/venv", "venv_args": [], "requirements": headcopy.requirements(),
         "requirements_file": f"{relaunch}/requirements.txt"},
    ]  # fmt: skip


def script(wanted: dict[str, list[str]], venvs: list[dict]) -> str:
    """The shell run in a container of the node image, the wheel cache mounted at /wheels."""
    lines = [
        "set -eu",
        "export DEBIAN_FRONTEND=noninteractive",
        # No package script starts a daemon here (no systemd runs in the build's container; a
        # sysv script would start one by hand).
        "printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d",
        "links() { find /etc/systemd/system /etc/rc2.d /etc/rc3.d /etc/rc4.d /etc/rc5.d -type l 2>/dev/null | sort; }",
        "links > /tmp/links.before",
        "apt-get update -qq",
        f"apt-get install -y -qq {' '.join(map(shlex.quote, wanted['recommends']))} >/dev/null",
        f"apt-get install -y -qq --no-install-recommends {' '.join(map(shlex.quote, wanted['plain']))} >/dev/null",
        # What the packages enabled is disabled again: the roles enable what each node needs.
        "links > /tmp/links.after",
        # (systemctl and update-rc.d, never the links by hand: update-rc.d keeps a script's K links,
        # without which a role's later `enable` fails: "no runlevel symlinks to modify")
        "comm -13 /tmp/links.before /tmp/links.after | grep '[.]wants/' | xargs -r -n1 basename | sort -u"
        " | xargs -r systemctl disable --quiet",
        "links > /tmp/links.after",
        "comm -13 /tmp/links.before /tmp/links.after | grep -E '/rc[2-5][.]d/S' | sed 's|.*/S[0-9]*||' | sort -u"
        " | xargs -r -n1 -I@ update-rc.d @ disable",
        "links > /tmp/links.after",
        "if comm -13 /tmp/links.before /tmp/links.after | grep -E '[.]wants/|/rc[2-5][.]d/S'; then"
        " echo 'still enabled (above)' >&2; exit 1; fi",
        "rm -f /usr/sbin/policy-rc.d /tmp/links.before /tmp/links.after",
        # The key Debian's munge package made: the same in every container, so a munge role that
        # failed to install the mesh's would go unseen.
        "rm -f /etc/munge/munge.key",
    ]
    for venv in venvs:
        path = shlex.quote(venv["path"])
        reqs = " ".join(shlex.quote(r) for r in venv["requirements"])
        lines += [
            f"mkdir -p $(dirname {path})",
            f"/usr/bin/python3 -m venv {' '.join(venv['venv_args'])} {path}",
            # No bytecode, as a bed's own pip installs (wheels.NO_COMPILE): MLflow's server keeps its
            # own cache (verify_storage.yml), a job environment's role compiles what jobs import.
            f"{path}/bin/pip install -q --no-cache-dir --no-compile --no-index --find-links /wheels {reqs}",
        ]
        if "requirements_file" in venv:
            text = "\n".join(venv["requirements"]) + "\n"
            lines.append(f"printf %s {shlex.quote(text)} > {shlex.quote(venv['requirements_file'])}")
    lines += ["apt-get clean", "rm -rf /var/lib/apt/lists/*"]
    return "\n".join(lines)


def ready_key(spec: images.ImageSpec) -> str:
    """Hash of the ready layer's inputs; changes with the node image's and the wheel cache's."""
    wanted, venvs = packages(), virtualenvs()
    text = json.dumps(
        {"version": READY_VERSION, "node": images.node_key(spec), "packages": wanted, "venvs": venvs,
         "script": script(wanted, venvs), "wheels": wheels.digest(wheels.requirement_sets())},
        sort_keys=True,
    )  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()


def is_current(suite: str) -> bool:
    return images.image_label(ready_tag(suite)) == ready_key(images.spec_for(suite))


def bed_image(suite: str) -> str:
    """The image a test bed's node starts from when it may skip the installs: the ready one when it
    is built for today's roles, else the bare node image (the bed then installs, as a user's does)."""
    return ready_tag(suite) if suite in SUITES and is_current(suite) else images.spec_for(suite).node_tag


def build(suite: str, say=print) -> str:
    """Build (or reuse) the ready image of SUITE from its node image and the wheel cache."""
    spec = images.spec_for(suite)
    key = ready_key(spec)
    tag = ready_tag(suite)
    started = time.monotonic()
    if not images.needs_build(images.image_label(tag), key):
        say(f"image {tag}: cached in {time.monotonic() - started:.1f}s")
        return "cached"
    if not wheels.is_filled(wheels.digest(wheels.requirement_sets())):
        raise EnvironmentProblem(f"image {tag} needs the wheel cache", hint="run `python -m meshctl.localmesh wheels`")
    say(f"image {tag}: building (inputs {key[:12]})")
    name = f"meshctl-build-ready-{suite}-{os.getpid()}"
    mount = f"{wheels.DIR}:/wheels:ro"
    images._run(["docker", "run", "-d", "--name", name, "-v", mount, spec.node_tag, "sleep", "3600"])
    try:
        images._run(["docker", "exec", "-e", f"PIP_CERT={wheels.CA_BUNDLE}", name, "sh", "-c",
                     script(packages(), virtualenvs())])  # fmt: skip
        images._run(["docker", "commit", "-c", 'CMD ["/lib/systemd/systemd"]',
                     "-c", f"LABEL {images.LABEL}={key}", name, tag])  # fmt: skip
    finally:
        subprocess.run(
            ["docker", "rm", "-f", name], capture_output=True, check=False
        )  # failure ignored: removing the build container is a cleanup
    say(f"image {tag}: built in {time.monotonic() - started:.1f}s")
    return "built"
