"""The roles as the collection meshctl.mesh, the way a user with their own playbooks takes them.

Builds the tarball with `ansible-galaxy collection build`, installs it into a fresh collections
path (nothing of this checkout on any Ansible path), and converges a plain playbook that names
three roles and the module by FQCN against a Docker node running systemd: munged must then
answer with the key the role generated on the control machine.
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from meshctl.localmesh import nodes

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SPEC = nodes.LocalMesh("meshctl-e2e-col", "100.100.41.0/24", ("e2e-collection",))

PLAYBOOK = textwrap.dedent(
    """\
    - name: A user's own play, with meshctl's roles by name
      hosts: cluster
      gather_facts: true
      gather_subset: [min]
      roles:
        - role: meshctl.mesh.mesh_base
        - role: meshctl.mesh.mesh_facts
        - role: meshctl.mesh.munge
      post_tasks:
        - name: Read the hardware facts again with the module itself
          meshctl.mesh.mesh_hw_facts:
          register: user_hw
        - name: Keep what the module reported
          ansible.builtin.copy:
            content: "{{ user_hw.ansible_facts.mesh_hw | to_nice_yaml }}"
            dest: "{{ playbook_dir }}/hw.yml"
            mode: "0600"
          delegate_to: localhost
    """
)


@pytest.fixture(scope="module")
def node():
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.skip("no Docker engine (run `make engine images`)")
    nodes.down(say=lambda _m: None, spec=SPEC)
    (started,) = nodes.up("bookworm", say=lambda _m: None, spec=SPEC)
    yield started
    nodes.down(say=lambda _m: None, spec=SPEC)


def run(argv, **kw):
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)
    assert done.returncode == 0, f"{argv[:3]}: {done.stdout[-4000:]}{done.stderr[-3000:]}"
    return done


def test_built_collection_installs_and_converges_a_users_playbook(node, tmp_path):
    # From an empty folder: this checkout's ansible.cfg (collections_path .collections) must not count.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    galaxy = {"cwd": tmp_path, "env": env}
    run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path / "dist"), str(REPO)],
        **galaxy)  # fmt: skip
    (tarball,) = (tmp_path / "dist").glob("meshctl-mesh-*.tar.gz")
    collections = tmp_path / "collections"
    collections.mkdir()
    # --no-deps: ansible.posix and ansible.utils come with the `ansible` package (no Galaxy here).
    # --force, and only the target on the collections path: molecule installs this project's collection
    # into ~/.ansible/collections, which must not make this install a no-op.
    galaxy["env"] = {**env, "ANSIBLE_COLLECTIONS_PATH": str(collections)}
    run([str(BIN / "ansible-galaxy"), "collection", "install", "--force", "--no-deps", "-p", str(collections),
         str(tarball)], **galaxy)  # fmt: skip
    installed = collections / "ansible_collections" / "meshctl" / "mesh"
    assert (installed / "plugins" / "modules" / "mesh_hw_facts.py").is_file()
    assert (installed / "roles" / "slurm" / "tasks" / "main.yml").is_file()

    project = tmp_path / "project"
    project.mkdir()
    (project / "site.yml").write_text(PLAYBOOK)
    inventory = {"cluster": {"hosts": {node.name: {"ansible_connection": "community.docker.docker"}},
                             "vars": {"mesh_secrets_dir": str(project / "secrets")}}}  # fmt: skip
    (project / "hosts.yml").write_text(yaml.safe_dump(inventory))
    env = dict(env)
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_ROLES_PATH=str(project / "roles"),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_PYTHON_INTERPRETER="auto_silent")  # fmt: skip
    playbook = [str(BIN / "ansible-playbook"), "-i", "hosts.yml", "site.yml"]
    first = run(playbook, cwd=project, env=env)  # from a folder with no ansible.cfg of meshctl's
    assert "meshctl.mesh" in first.stdout or "munge" in first.stdout

    hw = yaml.safe_load((project / "hw.yml").read_text())
    assert hw["cpus"] >= 1 and hw["real_memory_mb"] > 0
    key = project / "secrets" / "munge.key"
    assert key.stat().st_size == 1024 and (key.stat().st_mode & 0o077) == 0
    node_key = subprocess.run(["docker", "exec", node.name, "sha256sum", "/etc/munge/munge.key"],
                              capture_output=True, text=True, check=True).stdout.split()[0]  # fmt: skip
    assert node_key == subprocess.run(["sha256sum", str(key)], capture_output=True, text=True).stdout.split()[0]
    cred = subprocess.run(["docker", "exec", node.name, "sh", "-c", "munge -n | unmunge"],
                          capture_output=True, text=True)  # fmt: skip
    assert cred.returncode == 0 and re.search(r"^STATUS:\s+Success", cred.stdout, re.M), cred.stdout

    again = run(playbook, cwd=project, env=env)
    assert "changed=0" in again.stdout.split("PLAY RECAP")[-1].split(node.name)[1].split("\n")[0]
