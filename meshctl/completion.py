"""Shell completion of node names, read from the mesh the command would use.

click completes commands and options itself (``_MESHCTL_COMPLETE=bash_source meshctl``, see the
README); these callbacks add the mesh's node names. Completion must never fail loudly: a missing
or broken mesh completes nothing.
"""

from __future__ import annotations

import click
from click.shell_completion import CompletionItem

from meshctl.errors import MeshctlError
from meshctl.mesh import Mesh


def _node_names(ctx: click.Context) -> list[tuple[str, str]]:
    try:
        mesh = Mesh.find(ctx.params.get("mesh_dir"))
        nodes, _ = mesh.load()
    except (MeshctlError, OSError):
        return []
    return [(node.name, f"{node.state}, {node.host}") for node in nodes]


def node_names(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Complete one node name."""
    return [CompletionItem(name, help=help_) for name, help_ in _node_names(ctx) if name.startswith(incomplete)]


def node_name_list(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Complete the last name of a comma-separated list (``--limit gpu1,c``)."""
    done, _, last = incomplete.rpartition(",")
    prefix = f"{done}," if done else ""
    taken = set(done.split(",")) if done else set()
    return [
        CompletionItem(prefix + name, help=help_)
        for name, help_ in _node_names(ctx)
        if name.startswith(last) and name not in taken
    ]
