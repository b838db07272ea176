"""One lifecycle for every command: parse, an operation on the unit of work, one outcome.

Read from the sources, so that a new command or operation that goes around it is found: an
operation a command calls takes the unit of work (``ops.work.Work``), never a folder name it would
find and load itself; a playbook runs only through ``Work.run``; the live display is not the runner's.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "meshctl"
# Operations that may take something else, and why: check reads the files before the load that
# refuses them; the head's relaunch service re-reads its mesh on every round of its loop.
OWN_START = {
    ("check", "check"): "reads the folder before loading it",
    ("relaunch_node", "reap"): "the head's service loop",
    ("relaunch_node", "serve"): "the head's service loop",
}


def functions(path: Path):
    tree = ast.parse(path.read_text())
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]


def test_no_operation_takes_a_folder_name_to_find_the_mesh_itself():
    found = []
    for path in sorted((PACKAGE / "ops").glob("*.py")):
        if path.stem == "work":
            continue
        for fn in functions(path):
            names = [a.arg for a in fn.args.args]
            if "mesh_dir" in names and (path.stem, fn.name) not in OWN_START:
                found.append(f"ops/{path.name}: {fn.name}({', '.join(names)})")
    assert found == [], "take the unit of work (w: Work); the command opens work.reading or work.changing"


def test_every_operation_a_command_calls_with_the_mesh_gets_the_unit_of_work():
    """A command hands an operation ``w`` (or nothing of the mesh): never ``mesh_dir`` or a Mesh it found."""
    found = []
    for path in sorted((PACKAGE / "commands").glob("*.py")):
        for call in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)):
            func = call.func
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
                continue
            if func.value.id == "work" or any(func.attr == op for _m, op in OWN_START if op != "check"):
                continue
            first = call.args[0] if call.args else None
            if isinstance(first, ast.Name) and first.id == "mesh_dir":
                found.append(f"commands/{path.name}:{call.lineno} {func.value.id}.{func.attr}(mesh_dir, ...)")
            if isinstance(first, ast.Call) and getattr(first.func, "attr", "") == "find" and func.attr != "check":
                found.append(f"commands/{path.name}:{call.lineno} {func.value.id}.{func.attr}(work.find(...), ...)")
    assert found == []


def test_a_playbook_runs_only_through_the_unit_of_work():
    callers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for call in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)):
            func = call.func
            name = f"{getattr(func.value, 'id', '')}.{func.attr}" if isinstance(func, ast.Attribute) else ""
            if name in ("session.run", "runner.run_playbook"):
                callers.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert callers == ["ops/work.py: session.run", "session.py: runner.run_playbook"]


def test_the_live_display_is_not_the_runners():
    source = (PACKAGE / "runner.py").read_text()
    assert "class Progress" not in source and "rich" not in source
