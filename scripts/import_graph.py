#!/usr/bin/env python3
"""meshctl's import graph: which of its modules imports which, every import circle, every upward import.

Usage: scripts/import_graph.py [--cycles]

Reads the package's sources (no import is executed), counts `import meshctl.x`, `from meshctl import x`
and `from meshctl.x import y` at any depth of a module (a function-level import is an import too), and
prints one line per module: its layer and the meshctl modules it imports. Then each import circle
(strongly connected component of more than one module), or "no import circle", each import of a
module from a higher layer (LAYERS, docs/architecture.md), or "no upward import", each import of a
command past what a command may use (COMMAND_IMPORTS: its operations, options, display), and each reach of
the collection's Python (an ``ansible_collections`` import, a ``resources.plugin`` call) outside
meshctl.core, the shared core's one door. Exit 1 when there is a circle, an upward import, a module
in no layer, or a reach around the shared core.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "meshctl"

# meshctl's layers, top first: a module imports from its own layer or those below it, never above.
# A name ending in ".*" is every module of that package. Every module must be in one layer.
LAYERS = (
    ("command line", ("meshctl.cli", "meshctl.__main__", "meshctl.commands", "meshctl.commands.*",
                      "meshctl.options", "meshctl.completion", "meshctl.localmesh", "meshctl.localmesh.*")),
    ("operations", ("meshctl.ops", "meshctl.ops.*")),
    ("Ansible session", ("meshctl.session", "meshctl.runner", "meshctl.quickread")),
    ("store, providers", ("meshctl.mesh", "meshctl.vault", "meshctl.headcopy", "meshctl.cloud", "meshctl.burst",
                          "meshctl.tailnet",
                          "meshctl.preflight", "meshctl.hostkeys", "meshctl.ssh")),
    ("model", ("meshctl.model", "meshctl.settings", "meshctl.slurm", "meshctl.hardware", "meshctl.health")),
    ("foundation", ("meshctl", "meshctl.display", "meshctl.progress", "meshctl.timing")),
    ("shared core", ("meshctl.core",)),
    ("base", ("meshctl.errors", "meshctl.interrupt", "meshctl.resources")),
)  # fmt: skip
# What a command (meshctl.commands.*) may import: it parses, calls its operation, prints. The
# store, the providers, the model and the Ansible session are the operations' (meshctl.ops.work is
# their one way to the store); Progress (meshctl.progress, also runner.Progress) is the reporter a
# command supplies.
COMMAND_IMPORTS = ("meshctl", "meshctl.display", "meshctl.progress", "meshctl.errors", "meshctl.options",
                   "meshctl.completion", "meshctl.runner", "meshctl.ops", "meshctl.ops.*")  # fmt: skip
COMMANDS = "meshctl.commands.*"
# The one module that imports the collection's Python (the shared core, plugins/); nothing else in
# meshctl imports it or loads it by name (resources.plugin): they import meshctl.core.
CORE = "meshctl.core"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str], package: Path = PACKAGE) -> set[str]:
    """The meshctl modules PATH imports (a name imported from a package counts as its module when it is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "meshctl")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "meshctl":
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in known else node.module)
    own = module_name(path, package)
    return {name for name in found if name in known and name != own}


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    paths = sorted(package.rglob("*.py"))
    known = {module_name(p, package) for p in paths}
    return {module_name(p, package): imports_of(p, known, package) for p in paths}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for other in sorted(edges.get(name, ())):
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in on_stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == name:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return sorted(found)


def reaches_the_collection(path: Path) -> list[str]:
    """What PATH does to reach the collection's Python other than through meshctl.core: each import
    of ``ansible_collections`` and each call of ``resources.plugin`` (``what`` at line N)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        if any(name.split(".")[0] == "ansible_collections" for name in names):
            found.append(f"import of {', '.join(names)} at line {node.lineno}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "plugin" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "resources":  # fmt: skip
            found.append(f"resources.plugin(...) at line {node.lineno}")
    return found


def around_the_core(package: Path = PACKAGE) -> list[tuple[str, str]]:
    """(module, what) for every reach of the collection's Python outside meshctl.core."""
    found = []
    for path in sorted(package.rglob("*.py")):
        name = module_name(path, package)
        if name != CORE:
            found += [(name, what) for what in reaches_the_collection(path)]
    return found


def layer_of(name: str, layers=LAYERS) -> int | None:
    """The index of NAME's layer in LAYERS (0 is the top), None when it is in none."""
    for index, (_title, members) in enumerate(layers):
        for member in members:
            if name == member or (member.endswith(".*") and name.startswith(member[:-1])):
                return index
    return None


def upward(edges: dict[str, set[str]], layers=LAYERS) -> list[tuple[str, str]]:
    """(module, what it imports) for every import of a module from a higher layer."""
    found = []
    for name in sorted(edges):
        mine = layer_of(name, layers)
        for other in sorted(edges[name]):
            theirs = layer_of(other, layers)
            if mine is not None and theirs is not None and theirs < mine:
                found.append((name, other))
    return found


def beside_the_operations(edges: dict[str, set[str]], allowed=COMMAND_IMPORTS) -> list[tuple[str, str]]:
    """(command, what it imports) for every import of a command outside ALLOWED."""
    return [(name, other) for name in sorted(edges) if layer_of(name, (("", (COMMANDS,)),)) == 0
            for other in sorted(edges[name]) if layer_of(other, (("", allowed),)) is None]  # fmt: skip


def main(argv: list[str]) -> int:
    edges = graph()
    unplaced = sorted(name for name in edges if layer_of(name) is None)
    if "--cycles" not in argv:
        width = max(len(name) for name in edges)
        for name in sorted(edges):
            layer = layer_of(name)
            title = LAYERS[layer][0] if layer is not None else "NO LAYER"
            print(f"{name:<{width}}  [{title}] -> {', '.join(sorted(edges[name])) or '-'}")
    circles = cycles(edges)
    for circle in circles:
        print("import circle: " + " <-> ".join(circle))
    if not circles:
        print("no import circle")
    ups = upward(edges)
    for name, other in ups:
        print(f"upward import: {name} ({LAYERS[layer_of(name)][0]}) imports {other} ({LAYERS[layer_of(other)][0]})")
    if not ups:
        print("no upward import")
    for name in unplaced:
        print(f"in no layer: {name} (add it to LAYERS in scripts/import_graph.py)")
    beside = beside_the_operations(edges)
    for name, other in beside:
        print(f"a command reaches past its operation: {name} imports {other} (ask meshctl.ops for it)")
    if not beside:
        print("every command imports only operations, options and display")
    around = around_the_core()
    for name, what in around:
        print(f"around the shared core: {name}: {what} (import it from {CORE})")
    if not around:
        print(f"the collection's Python reached through {CORE} only")
    return 1 if circles or ups or unplaced or around or beside else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
