"""docs/extending.md's three paths (a provider, a role on the compute nodes, a command) are lists of
files to touch: each list is walked with the example it names, so that a file the path needs and the
list leaves out, or a list entry no example has, is found. A file named with `<name>` is the
example's own and is there; a file shared with the others (no `<name>` in it) names the example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "extending.md"
WALKS_RE = re.compile(r"walks them with `([a-z_]+)`")
ROW_RE = re.compile(r"^\| `([^`]+)` \|")


def lists(text: str) -> dict[str, list[str]]:
    """Each example the document walks, and the files of its table (as written, `<name>` kept)."""
    found: dict[str, list[str]] = {}
    example = None
    for line in text.splitlines():
        named = WALKS_RE.search(line)
        if named:
            example = named.group(1)
            found[example] = []
            continue
        row = ROW_RE.match(line)
        if example and row:
            found[example].append(row.group(1))
        elif example and found[example] and not line.startswith("|"):
            example = None  # the table ended
    return found


def problems(example: str, files: list[str], root: Path = REPO) -> list[str]:
    wrong = []
    for written in files:
        path = root / written.replace("<name>", example)
        if not path.exists():
            wrong.append(f"{written}: {path.relative_to(root)} is not there")
        elif "<name>" not in written:
            texts = [p.read_text(errors="replace") for p in ([path] if path.is_file() else path.rglob("*"))
                     if p.is_file()]  # fmt: skip
            if not any(re.search(rf"\b{re.escape(example)}\b", text) for text in texts):
                wrong.append(f"{written} does not name {example}")
    return wrong


def test_the_document_walks_a_provider_a_role_and_a_command():
    walked = lists(DOC.read_text())
    assert set(walked) == {"runpod", "nfs_client", "usage"}, walked
    assert all(len(files) >= 6 for files in walked.values()), walked


@pytest.mark.parametrize("example", ["runpod", "nfs_client", "usage"])
def test_each_file_of_the_path_is_there_for_its_example(example):
    files = lists(DOC.read_text())[example]
    assert problems(example, files) == []


def test_the_walk_finds_a_missing_file_and_a_shared_file_that_does_not_name_the_example(tmp_path):
    (tmp_path / "roles" / "x" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "x" / "tasks" / "main.yml").write_text("---\n")
    (tmp_path / "site.yml").write_text("- role: meshctl.mesh.other\n")
    (tmp_path / "molecule").mkdir()
    (tmp_path / "molecule" / "verify.yml").write_text("# checks role x (not x_port alone)\n")
    found = problems("x", ["roles/<name>/tasks/main.yml", "roles/<name>/README.md", "site.yml", "molecule/"], tmp_path)
    assert found == ["roles/<name>/README.md: roles/x/README.md is not there", "site.yml does not name x"]
    text = "walks them with `x`:\n\n| file | what |\n| --- | --- |\n| `a/<name>.py` | it |\n| `b.py` | too |\n\nmore"
    assert lists(text) == {"x": ["a/<name>.py", "b.py"]}
