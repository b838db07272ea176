"""No step's failure is ignored: every subprocess meshctl starts has its exit status read.

The class, not one instance: the walk below finds each call of ``subprocess.run``/``call``/``Popen``
(or a ``run`` handed in for it) in meshctl's sources whose result is dropped without ``check=True``,
or kept in a name the function never asks for its ``returncode``. A call whose failure may be
ignored says why on its line (``# failure ignored: WHY``) and the reason is shown here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "meshctl"
CALLS = {"run", "call", "Popen", "check_output", "check_call"}
MARK = "# failure ignored:"


def _is_process_call(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "subprocess":
        return func.attr in CALLS
    return isinstance(func, ast.Name) and func.id == "run" and bool(node.args) and isinstance(node.args[0], ast.List)


def _checked(node: ast.Call) -> bool:
    return any(k.arg == "check" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in node.keywords) or (isinstance(node.func, ast.Attribute) and
                                           node.func.attr in ("check_output", "check_call"))  # fmt: skip


def unread(source: str, name: str = "<source>") -> list[str]:
    """Each process call of SOURCE whose exit status nothing reads: 'NAME:LINE what'."""
    tree = ast.parse(source)
    lines = source.splitlines()
    found = []

    def marked(node: ast.AST) -> bool:
        return any(MARK in lines[i - 1] for i in range(node.lineno, (node.end_lineno or node.lineno) + 1))

    for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]:
        text = ast.get_source_segment(source, function) or ""
        handed = {
            a.id for c in ast.walk(function) if isinstance(c, ast.Call) for a in c.args if isinstance(a, ast.Name)
        }
        for statement in ast.walk(function):
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                call = statement.value
                if _is_process_call(call) and not _checked(call) and not marked(call):
                    found.append(f"{name}:{call.lineno} result dropped")
            elif isinstance(statement, ast.Assign | ast.withitem):
                value = statement.value if isinstance(statement, ast.Assign) else statement.context_expr
                target = statement.targets[0] if isinstance(statement, ast.Assign) else statement.optional_vars
                if not (isinstance(value, ast.Call) and _is_process_call(value)) or _checked(value) or marked(value):
                    continue
                read = (f"{target.id}.returncode", f"{target.id}.wait()", f"{target.id}.poll()")
                if isinstance(target, ast.Name) and target.id not in handed and not any(r in text for r in read):
                    found.append(f"{name}:{value.lineno} {target.id}'s exit status never read")
    return found


def test_the_walk_finds_a_dropped_failure_and_an_unread_status_and_passes_the_read_ones():
    source = (
        "import subprocess\n"
        "def a():\n    subprocess.run(['ssh-keygen', '-R', 'x'], check=False)\n"
        "def b():\n    done = subprocess.run(['x'])\n    return done.stdout\n"
        "def c():\n    done = subprocess.run(['x'])\n    if done.returncode: raise SystemExit(1)\n"
        "def d():\n    subprocess.run(['x'], check=True)\n"
        "def e(run):\n    run(['scontrol', 'update'], check=False)\n"
        "def f():\n    subprocess.run(['x'])  # failure ignored: a nicety\n"
        "def g():\n    done = subprocess.run(['x'])\n    judge(done)\n"
    )
    assert unread(source, "m.py") == ["m.py:3 result dropped", "m.py:5 done's exit status never read",
                                      "m.py:13 result dropped"]  # fmt: skip


def test_no_subprocess_of_meshctl_has_its_failure_ignored_unsaid():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += unread(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert found == [], "read the exit status (or check=True), or say on the line `# failure ignored: WHY`"


def test_every_ignored_failure_says_why():
    reasons = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line in path.read_text().splitlines():
            if MARK in line:
                reasons.append(line.split(MARK, 1)[1].strip())
    assert all(len(r) > 10 for r in reasons), reasons
