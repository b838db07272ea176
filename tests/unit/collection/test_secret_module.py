"""Module mesh_secret, run for real by ansible-playbook on this machine: a secret made once
(0600 in a 0700 folder), never read back or changed, its mode said; one others can read said as
not private; check mode makes nothing. What munge's and mlflow's secret tasks rest on."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import yaml

from meshctl import resources


def run(tmp_path: Path, args: dict, *flags: str) -> dict:
    book = [{"hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "secret", "meshctl.mesh.mesh_secret": args, "register": "made"}]}]  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(book))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(resources.collections_path(tmp_path / "collections")),
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               ANSIBLE_STDOUT_CALLBACK="json")  # fmt: skip
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    done = subprocess.run([playbook, "-i", "localhost,", "-c", "local", "play.yml", *flags], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    return json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_a_secret_is_made_once_private_and_never_shown(tmp_path):
    path = tmp_path / "secrets" / "munge.key"
    first = run(tmp_path, {"path": str(path), "size": 1024})
    assert first["changed"] and first["private"] and first["mode"] == "0600", first
    key = path.read_bytes()
    assert len(key) == 1024 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert key.hex() not in json.dumps(first) and "size" not in first.get("mode", "")
    again = run(tmp_path, {"path": str(path), "size": 1024})
    assert not again["changed"] and path.read_bytes() == key


def test_a_password_is_hex_and_a_readable_secret_is_said_not_private(tmp_path):
    path = tmp_path / "secrets" / "mlflow-password"
    run(tmp_path, {"path": str(path), "form": "hex", "size": 24})
    assert len(path.read_text()) == 48 and int(path.read_text(), 16) >= 0
    path.chmod(0o644)
    said = run(tmp_path, {"path": str(path), "form": "hex", "size": 24})
    assert not said["private"] and said["mode"] == "0644" and not said["changed"]
    checked = run(tmp_path, {"path": str(path), "form": "hex", "size": 24}, "--check")  # `apply --check` says it too
    assert not checked["private"] and checked["mode"] == "0644"
    path.parent.chmod(0o755)
    assert run(tmp_path, {"path": str(path), "form": "hex", "size": 24})["changed"]  # the folder made 0700 again
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_check_mode_makes_nothing_and_a_short_secret_is_refused(tmp_path):
    path = tmp_path / "secrets" / "key"
    would = run(tmp_path, {"path": str(path)}, "--check")
    assert would["changed"] and not path.exists() and not path.parent.exists()
    refused = run(tmp_path, {"path": str(path), "size": 8})
    assert refused.get("failed") and "16 random bytes" in refused["msg"] and not path.exists()
