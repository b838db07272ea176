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
