"""The README's no-Docker path, run as written: init, check, apply --check."""

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from meshctl import runner
from meshctl.cli import cli
from tests.unit.meshctl.test_cli import FakeRunner

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_block(heading: str) -> list[str]:
    """The meshctl command lines of the first sh block under HEADING, comments dropped."""
    text = README.read_text()
    section = text[text.index(heading) :]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.startswith("meshctl ")]


def test_the_no_docker_path_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MESHCTL_MESH", raising=False)
    fake = FakeRunner()
    monkeypatch.setattr(runner, "run_playbook", fake.run_playbook)
    lines = readme_block("## Try it without Docker")
    assert [shlex.split(line)[1] for line in lines] == ["init", "check", "apply"]
    for line in lines:
        done = CliRunner().invoke(cli, shlex.split(line)[1:])
        assert done.exit_code == 0, (line, done.output)
    assert (tmp_path / "trial" / "mesh.yml").is_file()
    assert len(fake) == 1 and fake[0]["check"] is True  # one run, a dry one
    desk = fake[0]["inventory"]["all"]["hosts"]["desk"]
    assert desk["ansible_connection"] == "local"  # this machine is the head, reached without SSH
