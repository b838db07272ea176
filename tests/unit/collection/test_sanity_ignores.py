"""The collection's `ansible-test sanity` ignore file: only what is deliberate, each
entry with its reason, every path still there, and make lint runs the gate (scripts/sanity)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
IGNORES = sorted((REPO / "tests" / "sanity").glob("ignore-*.txt"))
LINE_RE = re.compile(r"^(?P<path>\S+) (?P<test>[a-z0-9-]+)(?::(?P<code>[a-z0-9-]+))? # (?P<why>\S.{15,})$")


def test_there_is_one_ignore_file_for_the_ansible_core_the_project_pins():
    pinned = re.search(r'"ansible>=(\d+),', (REPO / "pyproject.toml").read_text()).group(1)
    core = {"12": "2.19"}[pinned]  # the ansible package's major release -> the ansible-core it bundles
    assert [p.name for p in IGNORES] == [f"ignore-{core}.txt"]


def test_every_entry_names_a_file_that_is_there_and_says_why():
    for path in IGNORES:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found = LINE_RE.match(line)
            assert found, f"{path.name}:{number}: not 'PATH TEST[:CODE] # why': {line!r}"
            assert (REPO / found["path"]).is_file(), f"{path.name}:{number}: {found['path']} is not there"


def test_no_module_is_excused_from_its_documentation_or_its_argument_spec():
    excused = {m["code"] for p in IGNORES for m in map(LINE_RE.match, p.read_text().splitlines()) if m}
    never = {
        "invalid-documentation",
        "missing-documentation",
        "doc-missing-type",
        "parameter-type-not-in-doc",
        "invalid-argument-spec",
        "nonexistent-parameter-documented",
        "undocumented-parameter",
    }
    assert not excused & never


def test_make_lint_runs_the_sanity_gate():
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^lint: .*\bsanity\b", makefile, re.M)
    assert re.search(r"^sanity: .*\n\t@\$\(T\) sanity scripts/sanity$", makefile, re.M)
