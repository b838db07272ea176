"""scripts/import_graph.py: meshctl's import graph read from its sources, and its circles."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "import_graph.py"
spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)


def test_circles_are_the_strongly_connected_parts_only():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}, "g": set()}
    assert import_graph.cycles(edges) == [["a", "b", "c"], ["e", "f"]]
    assert import_graph.cycles({"a": {"b"}, "b": set()}) == []


def test_every_kind_of_import_is_an_edge_and_other_packages_are_not(tmp_path):
    package = tmp_path / "meshctl"
    (package / "commands").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "errors.py").write_text("import json\n")
    (package / "mesh.py").write_text("from meshctl.errors import Problem\n")
    (package / "runner.py").write_text("import meshctl.mesh\n\ndef f():\n    from meshctl import errors\n")
    (package / "commands" / "__init__.py").write_text("")
    (package / "commands" / "apply.py").write_text("from meshctl import mesh, runner\nimport click\n")
    edges = import_graph.graph(package)
    assert edges["meshctl.errors"] == set()
    assert edges["meshctl.mesh"] == {"meshctl.errors"}
    assert edges["meshctl.runner"] == {"meshctl.mesh", "meshctl.errors"}  # a function's import counts
    assert edges["meshctl.commands.apply"] == {"meshctl.mesh", "meshctl.runner"}


def test_the_real_package_is_read():
    edges = import_graph.graph()
    assert "meshctl.errors" in edges["meshctl.mesh"]
    assert "meshctl.cli" in edges


def test_meshctl_has_no_import_circle():
    """Issue 40: layers import downward only; a circle is the first sign of an upward import."""
    assert import_graph.cycles(import_graph.graph()) == []
