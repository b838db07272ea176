"""Role slurm_preflight when the head is out of the run (it did not answer), evaluated by Ansible itself:
each other node stops saying the head dropped out and that nothing on it can be checked against the
head's Slurm, never as a version skew whose fix (build Slurm for the node) would be the wrong one.

The head is a host on a closed port of this machine (SSH refused at once); the node is this machine
(the local connection), whose version is read from a package every apt system has installed, so
that no package list is refreshed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from meshctl import resources


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # bound, never listening: refused once it is closed


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="the role reads versions with apt-cache")
def test_a_node_whose_head_did_not_answer_stops_naming_the_head_not_a_version_skew(tmp_path):
    hosts = {
        "ctl": {"ansible_host": "127.0.0.1", "ansible_port": closed_port(), "ansible_user": "nobody",
                "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"},
        "n1": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
    }  # fmt: skip
    groups = {"head": {"hosts": {"ctl": {}}}, "compute": {"hosts": {"n1": {}}}}
    inventory = {"all": {"hosts": hosts, "children": groups}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    play = [{"hosts": "head:compute", "gather_facts": False, "tasks": [{"ansible.builtin.import_role": {
        "name": "meshctl.mesh.slurm_preflight", "rolespec_validate": False}}]}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    collections = resources.collections_path(Path(tempfile.mkdtemp()) / "c")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")},
           "ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_TIMEOUT": "5"}  # fmt: skip
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory.yml", "play.yml",
            "-e", "slurm_version_package=apt"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    assert "UNREACHABLE" in said and "ctl" in said, said[-3000:]
    assert "The head ctl dropped out of this run (it did not answer, or failed above)" in said, said[-3000:]
    assert "nothing on n1 can be checked against it" in said, said[-3000:]
    assert "Slurm version skew" not in said and "slurm_build_packages" not in said, said[-3000:]
    recap = said[said.index("PLAY RECAP") :]
    assert "n1" in recap and "failed=1" in recap and "unreachable=1" in recap, recap
