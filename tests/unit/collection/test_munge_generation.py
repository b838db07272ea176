"""Role munge's refusal of an older copy of the mesh's secrets, evaluated by Ansible itself on this
machine (the head's record a file here): older, or the same generation with another key, stops;
newer or the same passes; no record yet passes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from meshctl import resources


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    (root / "secrets").mkdir(mode=0o700)
    inventory = {"all": {"hosts": {"h1": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
                         "children": {"head": {"hosts": {"h1": {}}}}}}  # fmt: skip
    (root / "inventory.yml").write_text(yaml.safe_dump(inventory))
    play = [{"hosts": "head", "gather_facts": False, "tasks": [{"ansible.builtin.import_role": {
        "name": "meshctl.mesh.munge", "tasks_from": "secret", "rolespec_validate": False}}]}]  # fmt: skip
    (root / "play.yml").write_text(yaml.safe_dump(play))
    collections = resources.collections_path(Path(tempfile.mkdtemp()) / "c")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")},
           "ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_NOCOLOR": "1"}  # fmt: skip

    def playbook(ours: str, head: str | None) -> subprocess.CompletedProcess:
        record = root / "head-record"
        record.unlink(missing_ok=True)
        if head is not None:
            record.write_text(head + "\n")
        extra = [f"mesh_secrets_dir={root / 'secrets'}", f"mesh_secrets_generation={ours}",
                 f"munge_generation_file={record}"]  # fmt: skip
        argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory.yml", "play.yml"]
        for item in extra:
            argv += ["-e", item]
        return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)

    return playbook


@pytest.mark.parametrize(("head", "refused"), [(None, False), ("3:aaaa", False), ("4:aaaa", False),
                                               ("4:bbbb", True), ("5:aaaa", True)])  # fmt: skip
def test_a_run_whose_secrets_are_older_than_the_heads_stops_naming_both(run, head, refused):
    done = run("4:aaaa", head)
    said = done.stdout + done.stderr
    assert (done.returncode != 0) == refused, said[-2000:]
    if refused:
        assert "this mesh folder's secrets are generation 4 (munge key aaaa)" in said
        assert f"the head holds generation {head.split(':')[0]}" in said and "rotate-munge-key" in said
