"""The built wheel carries its playbooks and roles and runs from a fresh virtualenv."""

import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_installs_and_finds_its_playbooks(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("meshctl-*.whl")
    env_dir = tmp_path / "venv"
    # Reuse the test environment's packages; only meshctl itself comes from the wheel.
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    target_site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(target_site, "_test_deps.pth").write_text(site + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)

    help_out = subprocess.run(
        [str(env_dir / "bin" / "meshctl"), "--help"], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout
    assert "Slurm" in help_out

    where = subprocess.run(
        [str(py), "-c", "from meshctl import resources; print(resources.playbook('site.yml'))"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert where.startswith(target_site), where  # from the wheel, not the checkout
    assert "_data" in where

    # The wheel's data folder is the collection meshctl.mesh: the playbooks find its roles by FQCN.
    collections = subprocess.run(
        [str(py), "-c", f"from meshctl import resources; print(resources.collections_path({str(tmp_path / 'c')!r}))"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert (Path(collections) / "ansible_collections/meshctl/mesh/plugins/modules/mesh_hw_facts.py").is_file()
    ansible_playbook = Path(sys.executable).parent / "ansible-playbook"
    subprocess.run(
        [str(ansible_playbook), "--syntax-check", "-i", "localhost,", where],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        env={
            "PATH": f"{ansible_playbook.parent}:/usr/bin:/bin",
            "ANSIBLE_COLLECTIONS_PATH": collections,
        },
    )
