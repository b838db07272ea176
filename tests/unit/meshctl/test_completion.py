"""Shell completion through the real entry point, the way bash, zsh and fish ask for it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from meshctl.mesh import Mesh
from meshctl.model import Node

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def two_nodes(tmp_path):
    mesh = Mesh(tmp_path / "mesh")
    mesh.path.mkdir()
    mesh.save(
        [
            Node("head", "100.64.0.1", roles=["head", "compute"], state="active", mesh_address="100.64.0.1"),
            Node("gpu1", "100.64.0.2", state="active", mesh_address="100.64.0.2"),
        ],
        {},
    )
    return mesh


def complete(words: str, shell: str = "bash", mesh: Mesh | None = None, cwd=None) -> list[str]:
    """What `meshctl` answers when SHELL asks to complete the last word of WORDS."""
    env = {k: v for k, v in os.environ.items() if k != "MESHCTL_MESH"}
    env["_MESHCTL_COMPLETE"] = f"{shell}_complete"
    env["PYTHONPATH"] = str(REPO)  # this checkout's meshctl, whatever the working directory
    if mesh is not None:
        env["MESHCTL_MESH"] = str(mesh.path)
    env["COMP_WORDS"] = words
    # bash and zsh: the index of the word being completed; fish: that word itself.
    env["COMP_CWORD"] = words.split(" ")[-1] if shell == "fish" else str(len(words.split(" ")) - 1)
    done = subprocess.run([sys.executable, "-m", "meshctl"], env=env, cwd=cwd, capture_output=True, text=True,
                          check=True)  # fmt: skip
    return [line for line in done.stdout.splitlines() if line]


def values(lines: list[str], shell: str) -> list[str]:
    if shell == "bash":  # "type,value"
        return [line.split(",", 1)[1] for line in lines]
    if shell == "zsh":  # type, value, help, one line each
        return [lines[i + 1] for i in range(0, len(lines), 3)]
    return [line.split("\t", 1)[0].split(",", 1)[-1] for line in lines]  # fish: "type,value\thelp"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_remove_node_completes_the_mesh_nodes(two_nodes, shell):
    assert sorted(values(complete("meshctl remove-node ", shell, two_nodes), shell)) == ["gpu1", "head"]


def test_node_names_come_from_the_mesh_found_from_the_current_directory(two_nodes):
    assert values(complete("meshctl remove-node g", cwd=two_nodes.path), "bash") == ["gpu1"]


def test_mesh_option_on_the_line_picks_the_mesh(two_nodes, tmp_path):
    words = f"meshctl remove-node --mesh {two_nodes.path} "
    assert sorted(values(complete(words, cwd=tmp_path), "bash")) == ["gpu1", "head"]


def test_limit_completes_the_last_name_of_a_list(two_nodes):
    assert values(complete("meshctl apply --limit gpu1,", mesh=two_nodes), "bash") == ["gpu1,head"]


def test_commands_and_options_complete(two_nodes):
    assert {"add-node", "remove-node", "rotate-authkey"} <= set(values(complete("meshctl "), "bash"))
    assert "--force" in values(complete("meshctl remove-node --f"), "bash")


def test_no_mesh_completes_no_names(tmp_path):
    assert complete("meshctl remove-node ", cwd=tmp_path) == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_gets_its_script(shell):
    env = {**os.environ, "_MESHCTL_COMPLETE": f"{shell}_source", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "meshctl"], env=env, capture_output=True, text=True, check=True)
    assert "_MESHCTL_COMPLETE" in done.stdout
