"""The control machine follows no link out of the mesh folder (docs/trust.md).

The class, not one instance: a realistic mesh folder is made (every kind of file meshctl or Ansible
reads there: mesh.yml, group_vars/ and host_vars/ files and folders, the secrets, the recorded facts
and status requests, known_hosts, the logs' task counts), then every entry of it, found by walking
the folder (a new kind of file is covered without a new test), is replaced in turn by a link to a
copy outside the folder: each is refused when the mesh is loaded, naming the entry, before anything
reads it. A link inside the folder to a file of the folder is followed (its target checked as itself).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from meshctl import vault
from meshctl.errors import InventoryError
from meshctl.mesh import Mesh
from meshctl.model import Node
from tests.hwfacts import NO_GPU
from tests.unit.meshctl.test_quickread import REQUEST


def realistic(path: Path) -> Mesh:
    mesh = Mesh(path)
    path.mkdir(mode=0o700)
    nodes = [Node("head", "100.64.0.1", roles=["head", "compute"], state="active", mesh_address="100.64.0.1"),
             Node("gpu1", "100.64.0.2", state="active", mesh_address="100.64.0.2")]  # fmt: skip
    mesh.save(nodes, {})
    (path / "group_vars").mkdir()
    (path / "group_vars" / "all.yml").write_text("slurm_accounting: false\n")
    (path / "group_vars" / "compute").mkdir()
    (path / "group_vars" / "compute" / "main.yaml").write_text("mesh_share_path: /mnt/shared-slurm\n")
    (path / "host_vars").mkdir()
    (path / "host_vars" / "gpu1.yml").write_text("mlflow_port: 5000\n")
    vault.ensure_generated_secrets(mesh.secrets, None)
    for node in nodes:
        mesh.record_facts(node.name, dict(NO_GPU))
        mesh.record_status_request(node.name, REQUEST)
    (path / "known_hosts").write_text("100.64.0.2 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE\n")
    (path / "logs").mkdir(mode=0o700)
    (path / "logs" / "task-counts.json").write_text("{}\n")
    mesh.load()  # sound as made
    return mesh


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_the_realistic_mesh_holds_every_kind_of_file_meshctl_reads(tmp_path):
    root = realistic(tmp_path / "mesh").path
    names = {str(p.relative_to(root)) for p in entries(root)}
    for expected in ("mesh.yml", "group_vars/all.yml", "group_vars/compute/main.yaml", "host_vars/gpu1.yml",
                     "secrets/munge.key", "secrets/generation.json", "facts/head.json", "known_hosts",
                     "logs/task-counts.json"):  # fmt: skip
        assert expected in names, sorted(names)
    assert any(n.startswith("facts/status/") for n in names), sorted(names)


def test_a_link_out_of_the_folder_at_any_path_is_refused_naming_it(tmp_path):
    root = realistic(tmp_path / "mesh").path
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    planted = entries(root)
    assert len(planted) >= 12
    for path in planted:
        copy = outside / path.relative_to(root).as_posix().replace("/", "__")
        shutil.copy2(path, copy)
        saved = path.read_bytes()
        path.unlink()
        path.symlink_to(copy)
        try:
            with pytest.raises(InventoryError, match="outside the mesh folder") as caught:
                Mesh(root).load()
            assert str(path) in caught.value.message, caught.value.message
        finally:
            path.unlink()
            path.write_bytes(saved)
            os.chmod(path, copy.stat().st_mode)
    Mesh(root).load()  # each put back: sound again


@pytest.mark.parametrize("folder", ["group_vars", "host_vars", "secrets", "facts"])
def test_a_folder_replaced_by_a_link_out_is_refused(tmp_path, folder):
    root = realistic(tmp_path / "mesh").path
    moved = tmp_path / f"moved-{folder}"
    shutil.move(root / folder, moved)
    (root / folder).symlink_to(moved)
    with pytest.raises(InventoryError, match=f"{folder} is a link to .*outside the mesh folder"):
        Mesh(root).load()


def test_a_link_inside_the_folder_is_followed_and_its_target_checked(tmp_path):
    root = realistic(tmp_path / "mesh").path
    (root / "host_vars" / "head.yml").symlink_to(root / "group_vars" / "all.yml")
    Mesh(root).load()
    if os.geteuid() == 0:  # the target given away: refused as itself
        os.chown(root / "group_vars" / "all.yml", 65534, 65534)
        with pytest.raises(InventoryError, match=r"all\.yml belongs to uid 65534"):
            Mesh(root).load()


def test_a_file_of_another_user_anywhere_in_the_folder_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file away")
    root = realistic(tmp_path / "mesh").path
    for path in entries(root):
        os.chown(path, 65534, 65534)
        try:
            with pytest.raises(InventoryError, match="belongs to uid 65534"):
                Mesh(root).load()
        finally:
            os.chown(path, 0, 0)


def test_a_folder_above_the_mesh_others_can_write_is_refused_unless_sticky(tmp_path):
    above = tmp_path / "shared"
    above.mkdir()
    realistic(above / "mesh")
    above.chmod(0o777)
    with pytest.raises(InventoryError, match="a folder above the mesh, can be changed by other users"):
        Mesh(above / "mesh").load()
    above.chmod(0o1777)  # sticky, as /tmp: no one else can rename the mesh folder
    Mesh(above / "mesh").load()
