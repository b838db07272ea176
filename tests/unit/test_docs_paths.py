"""Docs that stay true (issue 40): every file or folder of the project a document names in
backticks (`meshctl/quickread.py`, `roles/slurm/tasks/build.yml:12`) exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOP = ("meshctl", "roles", "playbooks", "plugins", "molecule", "tests", "scripts", "docs", "examples", "bench")
PATH_RE = re.compile(rf"^(?:{'|'.join(TOP)})/[^<>*{{}}$]*$")
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "roles").glob("*/README.md")])


def named_paths(text: str) -> set[str]:
    """The project paths TEXT names in backticks (a `:line` or trailing punctuation left off)."""
    found = set()
    for token in re.findall(r"`([^`\s]+)`", text):
        path = token.split(":")[0].rstrip(",.;")
        if PATH_RE.match(path):
            found.add(path)
    return found


def test_paths_are_read_from_backticks_only():
    text = "`meshctl/mesh.py` and `roles/slurm/tasks/build.yml:12`, not meshctl/x.py or `roles/<role>/README.md`"
    assert named_paths(text) == {"meshctl/mesh.py", "roles/slurm/tasks/build.yml"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_a_document_names_exists(doc):
    missing = sorted(p for p in named_paths(doc.read_text()) if not (REPO / p).exists())
    assert missing == [], f"{doc.relative_to(REPO)} names what is not there: {missing}"
