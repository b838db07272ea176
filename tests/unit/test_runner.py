"""Which ansible-playbook meshctl runs: the one beside its interpreter, else PATH, else a clear error."""

import sys

import pytest

from meshctl import runner
from meshctl.errors import EnvironmentProblem


def executable(path):
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_one_beside_meshctls_interpreter_wins(tmp_path, monkeypatch):
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    beside = executable(venv / "ansible-playbook")
    other = tmp_path / "elsewhere"
    other.mkdir()
    executable(other / "ansible-playbook")
    monkeypatch.setattr(sys, "executable", str(venv / "python3"))
    monkeypatch.setenv("PATH", str(other))
    assert runner.ansible_playbook() == str(beside)


def test_path_is_used_when_the_venv_has_none(tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    found = executable(other / "ansible-playbook")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    monkeypatch.setenv("PATH", str(other))
    assert runner.ansible_playbook() == str(found)


def test_missing_ansible_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match="ansible-playbook is not installed") as error:
        runner.ansible_playbook()
    assert error.value.exit_code == 6


def test_runs_check_host_keys_against_the_meshs_known_hosts(tmp_path, runner_call):
    # ansible-runner sets ANSIBLE_HOST_KEY_CHECKING=False unless told; meshctl tells it True, so no
    # ssh command Ansible builds carries StrictHostKeyChecking=no.
    seen = runner_call(known_hosts=tmp_path / "known hosts")
    env = seen["envvars"]
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert "StrictHostKeyChecking=accept-new" in env["ANSIBLE_SSH_ARGS"]
    assert f'UserKnownHostsFile="{tmp_path / "known hosts"}"' in env["ANSIBLE_SSH_ARGS"]
    assert "StrictHostKeyChecking=no" not in repr(seen)
