"""Docs that stay true: every file or folder of the project a document names in
backticks (`meshctl/quickread.py`, `roles/slurm_build/tasks/main.yml:12`) exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
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
    text = "`meshctl/mesh.py` and `roles/slurm_build/tasks/main.yml:12`, not meshctl/x.py or `roles/<role>/README.md`"
    assert named_paths(text) == {"meshctl/mesh.py", "roles/slurm_build/tasks/main.yml"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_a_document_names_exists(doc):
    missing = sorted(p for p in named_paths(doc.read_text()) if not (REPO / p).exists())
    assert missing == [], f"{doc.relative_to(REPO)} names what is not there: {missing}"


# "`path` (`name`", "`path`, `name`" and "`name` in `path`": a document says the file PATH holds NAME.
HELD_RE = re.compile(r"`([^`\s]+)`(?: \(|, )`([A-Za-z_][A-Za-z0-9_.]*)`|`([A-Za-z_][A-Za-z0-9_.]*)` in `([^`\s]+)`")


def held_names(text: str) -> set[tuple[str, str]]:
    """(path, name) for each project file TEXT says holds a name (a function, a variable, a class)."""
    found = set()
    for path_a, name_a, name_b, path_b in HELD_RE.findall(text):
        path, name = (path_a, name_a) if path_a else (path_b, name_b)
        if PATH_RE.match(path) and not path.endswith("/") and not re.search(r"\.(py|ya?ml|md|j2|json)$", name):
            found.add((path, name.split(".")[-1]))
    return found


def test_held_names_are_read_from_both_phrasings():
    text = (
        "`meshctl/health.py` (`record_problem`), `mlflow_port` in `roles/mlflow/defaults/main.yml`; `x` (y), "
        "`meshctl/slurm.py`, `resting_state`"
    )
    assert held_names(text) == {("meshctl/health.py", "record_problem"), ("roles/mlflow/defaults/main.yml",
                                                                          "mlflow_port"),
                                ("meshctl/slurm.py", "resting_state")}  # fmt: skip


def test_every_one_place_docs_architecture_names_holds_what_it_says():
    """docs/architecture.md's "one place" for each fact is a file that holds that name."""
    held = held_names((REPO / "docs" / "architecture.md").read_text())
    assert len(held) >= 8
    wrong = sorted(f"{path}: {name}" for path, name in held
                   if (REPO / path).is_file() and name not in (REPO / path).read_text())  # fmt: skip
    assert wrong == [], f"docs/architecture.md says these files hold names they do not: {wrong}"


def test_the_playbooks_that_start_with_validate_yml_are_the_ones_docs_architecture_names():
    """docs/architecture.md says which playbooks check the inventory first: the ones that change
    nodes. The playbooks say it too."""
    starting = sorted(path.name for path in (REPO / "playbooks").glob("*.yml")
                      if "import_playbook: validate.yml" in path.read_text())  # fmt: skip
    assert starting == ["remove_node.yml", "rotate_authkey.yml", "rotate_munge_key.yml", "site.yml"]
    text = " ".join((REPO / "docs" / "architecture.md").read_text().split())
    assert "start with `validate.yml` (the inventory checked first): " + ", ".join(
        starting[-1:] + starting[:-1]) + "." in text  # fmt: skip


# History lives in CHANGELOG.md (and git): code, comments and tests say what holds now, never
# which issue, session or test run it came from.
HISTORY_RE = re.compile(r"\b(?:[Ii]ssue|[Ss]ession) \d+\b|(?<![-\w])(?:CI )?runs? \d+(?![.\d])(?:,? (?:and|-) \d+)?")
CODE = ("*.py", "*.yml", "*.yaml", "*.j2", "*.cfg", "*.toml", "*.sh", "Makefile", "*.service", "*.path", "*.timer")


def test_history_words_are_found():
    found = [bool(HISTORY_RE.search(t)) for t in ("(issue 58)", "CI run 39", "runs 31 and 32", "session 40",
                                                 "runs 22.05", "--runs 2", "a run of 3 nodes", "issues")]  # fmt: skip
    assert found == [True, True, True, True, False, False, False, False]


def test_no_code_or_comment_names_an_issue_session_or_run():
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "--", *CODE], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()  # fmt: skip
    if not tracked:
        pytest.skip("not a git checkout")
    me = Path(__file__).resolve().relative_to(REPO).as_posix()
    found = [f"{path}:{n}: {line.strip()[:100]}" for path in tracked if path != me and (REPO / path).is_file()
             for n, line in enumerate((REPO / path).read_text(errors="replace").splitlines(), 1)
             if HISTORY_RE.search(line)]  # fmt: skip
    assert found == [], "history belongs in CHANGELOG.md:\n" + "\n".join(found)


# `module.name` (a module of meshctl, or a class of meshctl.mesh) in the docs that say where code lives.
DOTTED_RE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)`")
CLASSES = {"Mesh": "meshctl.mesh", "Node": "meshctl.model"}


def stated_names(text: str) -> set[tuple[str, str]]:
    """(module or class, name) for each ``module.name`` TEXT names, where the module is meshctl's
    (``meshctl/<module>.py`` or a package there) or the class one of ``CLASSES``."""
    found = set()
    for owner, name in DOTTED_RE.findall(text):
        if name in ("py", "yml", "yaml", "md", "j2", "json", "conf", "cfg"):
            continue
        if owner in CLASSES or (REPO / "meshctl" / f"{owner}.py").is_file() or (REPO / "meshctl" / owner).is_dir():
            found.add((owner, name))
    return found


def test_stated_names_are_read_as_meshctl_modules_and_classes():
    text = "`session.run`, `Mesh.lock`, `mesh.yml`, `cloud.py`, `foo.bar`, `ops.burst`"
    assert stated_names(text) == {("session", "run"), ("Mesh", "lock"), ("ops", "burst")}


@pytest.mark.parametrize("doc", ["docs/architecture.md", "docs/extending.md"])
def test_every_module_and_function_the_code_docs_name_is_there(doc):
    import importlib
    import importlib.util

    stated = stated_names((REPO / doc).read_text())
    assert stated or doc.endswith("extending.md")
    missing = []
    for owner, name in sorted(stated):
        if owner in CLASSES:
            holder = getattr(importlib.import_module(CLASSES[owner]), owner)
        else:
            holder = importlib.import_module(f"meshctl.{owner}")
        package = hasattr(holder, "__path__")
        if not hasattr(holder, name) and not (package and importlib.util.find_spec(f"meshctl.{owner}.{name}")):
            missing.append(f"{owner}.{name}")
    assert missing == [], f"{doc} names what meshctl does not have: {missing}"
