"""scripts/import_graph.py: meshctl's import graph read from its sources, its circles, its layers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "import_graph.py"
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
    """Layers import downward only; a circle is the first sign of an upward import."""
    assert import_graph.cycles(import_graph.graph()) == []


def test_an_import_from_a_higher_layer_is_found_and_a_lower_or_equal_one_is_not():
    layers = (("top", ("p.cli", "p.commands.*")), ("middle", ("p.ops.*",)), ("bottom", ("p.mesh", "p.errors")))
    edges = {"p.cli": {"p.ops.add"}, "p.commands.apply": {"p.mesh"}, "p.ops.add": {"p.ops.init", "p.mesh"},
             "p.ops.init": {"p.commands.apply"}, "p.mesh": {"p.errors", "p.cli"}, "p.errors": set()}  # fmt: skip
    assert import_graph.upward(edges, layers) == [("p.mesh", "p.cli"), ("p.ops.init", "p.commands.apply")]
    assert import_graph.layer_of("p.commands.apply", layers) == 0 and import_graph.layer_of("p.x", layers) is None


def test_meshctl_imports_downward_only_and_every_module_has_a_layer():
    """Command line -> operations -> Ansible session -> store, providers -> model -> foundation."""
    edges = import_graph.graph()
    assert import_graph.upward(edges) == []
    assert [name for name in edges if import_graph.layer_of(name) is None] == []


def test_the_shared_core_is_reached_through_meshctl_core_only(tmp_path):
    """The collection's Python (plugins/) is imported by meshctl.core alone, plainly; an import of
    it, or a resources.plugin call, anywhere else in meshctl is found with its line."""
    assert import_graph.around_the_core() == []
    package = tmp_path / "meshctl"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "core.py").write_text("from ansible_collections.meshctl.mesh.plugins.filter import power_save\n")
    (package / "model.py").write_text("from meshctl import resources\n\nWORDS = resources.plugin('filter.x')\n")
    (package / "slurm.py").write_text("def f():\n    import ansible_collections.meshctl.mesh.plugins.module_utils.y\n")
    (package / "health.py").write_text("from meshctl.core import node_status\n")
    assert import_graph.around_the_core(package) == [
        ("meshctl.model", "resources.plugin(...) at line 3"),
        ("meshctl.slurm", "import of ansible_collections.meshctl.mesh.plugins.module_utils.y at line 2"),
    ]
    assert import_graph.layer_of("meshctl.core") == len(import_graph.LAYERS) - 2  # above errors and resources only


def test_a_command_imports_only_its_operations_options_and_display(tmp_path):
    """No command file reaches the store, the providers or the model: it parses, calls its operation
    (meshctl.ops; meshctl.ops.work is the one way to the store) and prints."""
    assert import_graph.beside_the_operations(import_graph.graph()) == []
    edges = {
        "meshctl.commands.apply": {"meshctl.ops.apply", "meshctl.display", "meshctl.mesh"},
        "meshctl.commands.check": {"meshctl.settings", "meshctl.errors"},
        "meshctl.ops.apply": {"meshctl.mesh"},
    }
    assert import_graph.beside_the_operations(edges) == [("meshctl.commands.apply", "meshctl.mesh"),
                                                         ("meshctl.commands.check", "meshctl.settings")]  # fmt: skip


def test_the_mesh_is_locked_in_one_place():
    """Every lock of a mesh, a command's or an operation's, is taken through meshctl.ops.work."""
    import re

    package = import_graph.PACKAGE
    takers = sorted(import_graph.module_name(path) for path in package.rglob("*.py")
                    if re.search(r"\.lock\(", path.read_text()))  # fmt: skip
    assert takers == ["meshctl.ops.work"]
