"""A new user's first run: `init`, then `apply --check` before anything was ever set up.

A Debian 12 head and a Debian 13 node, fresh from their images, no meshctl run on them yet. The
dry runs must pass and change nothing (no package installed, no file written on the nodes); a
Debian 13 node with the default settings (its Slurm 24.11, newer than the head's 22.05) is refused
by add-node before any role ran, naming the fix, and recorded as pending only; with the fix the
dry run passes. Needs the Docker engine and the meshctl-node:bookworm and :trixie images.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from meshctl.localmesh import nodes
from meshctl.mesh import Mesh
from tests.e2e import TESTBED_ENV

pytestmark = pytest.mark.e2e

SPEC = nodes.LocalMesh("meshctl-first", "100.100.50.0/24", ("first-head",))
HEAD = "100.100.50.10"
NEW13 = nodes.Node("first-n13", "100.100.50.20")


def meshctl(root: Path, *args: str) -> subprocess.CompletedProcess:
    cwd = root / "lab" if (root / "lab").exists() else root
    return subprocess.run([sys.executable, "-m", "meshctl", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, check=False, env={**os.environ, **TESTBED_ENV, "COLUMNS": "200"})  # fmt: skip


def untouched(container: str) -> str:
    """What a dry run must not have made on a node: packages, Slurm's and munge's files."""
    probe = "dpkg -s munge slurmd 2>&1 | grep -c 'is not installed'; ls /etc/munge/munge.key /etc/slurm 2>&1 | wc -l"
    return subprocess.run(["docker", "exec", container, "sh", "-c", probe], capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.skip("no Docker engine (run `make engine images`)")
    for image in ("meshctl-node:bookworm", "meshctl-node:trixie"):
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
            pytest.skip(f"no {image} image (make images)")
    root = tmp_path_factory.mktemp("first")
    key = root / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    nodes.down(say=lambda _m: None, spec=SPEC)
    subprocess.run(["docker", "rm", "-f", "-v", NEW13.name], capture_output=True, check=False)
    nodes.up("bookworm", say=lambda _m: None, spec=SPEC)
    subprocess.run(nodes.run_args(NEW13, "meshctl-node:trixie", SPEC.network), capture_output=True, check=True)
    assert nodes.wait_running(NEW13.name) in ("running", "degraded")
    for name in (*SPEC.names, NEW13.name):
        nodes.authorize(name, key.with_suffix(".pub").read_text())
    yield root, key
    subprocess.run(["docker", "rm", "-f", "-v", NEW13.name], capture_output=True, check=False)
    nodes.down(say=lambda _m: None, spec=SPEC)


def test_a_fresh_mesh_passes_apply_check_and_nothing_changes(bed):
    root, key = bed
    made = meshctl(root, "init", "lab", "--head", f"root@{HEAD}", "--name", "head", "--ssh-key", str(key),
                   "--provider", "local")  # fmt: skip
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr
    before = untouched("first-head")
    check = meshctl(root, "apply", "--check")
    assert check.returncode == 0, check.stdout[-4000:] + check.stderr
    assert "check done: nothing was changed" in check.stdout
    assert untouched("first-head") == before == "2\n2\n"  # munge and slurmd not installed, no files
    assert "pending" in (root / "lab" / "mesh.yml").read_text()  # a dry run activates nobody
    logs = sorted((root / "lab" / "logs").glob("*-site.log"))
    assert logs and "PLAY RECAP" in logs[-1].read_text()  # the run's output is kept


def test_a_debian_13_node_is_refused_with_the_fix_then_its_dry_run_passes(bed):
    root, key = bed
    # add-node itself, not a dry run: refused before any role ran, on the node and on the head.
    head_before = untouched("first-head")
    refused = meshctl(root, "add-node", f"root@{NEW13.address}", "--name", "n13", "--ssh-key", str(key),
                      "--provider", "local")  # fmt: skip
    assert refused.returncode == 5, refused.stdout[-3000:] + refused.stderr
    assert "Slurm version skew" in refused.stderr
    assert "n13 has slurmd 24.11" in refused.stderr and "newer than slurmctld 22.05" in refused.stderr
    assert "set slurm_build_packages: true" in refused.stderr  # the refusal names the fix: 22.05 built for it
    assert untouched(NEW13.name) == "2\n2\n" and untouched("first-head") == head_before
    states = {n.name: n.state for n in Mesh(root / "lab").load()[0]}
    assert states["n13"] == "pending"  # recorded, never active
    settings = root / "lab" / "group_vars" / "all.yml"
    data = yaml.safe_load(settings.read_text()) or {}  # init writes comments only
    settings.write_text(settings.read_text() + "slurm_build_packages: true\n")
    assert data.get("slurm_build_packages") is None
    passed = meshctl(root, "add-node", f"root@{NEW13.address}", "--name", "n13", "--ssh-key", str(key),
                     "--provider", "local", "--dry-run")  # fmt: skip
    assert passed.returncode == 0, passed.stdout[-4000:] + passed.stderr
    assert "dry run done: nothing was changed" in passed.stdout
    assert untouched(NEW13.name) == "2\n2\n"
