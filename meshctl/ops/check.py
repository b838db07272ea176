"""`meshctl check`: the mesh folder and its settings checked as every command checks them first,
every problem listed with its file and line; nothing run, no node contacted."""

from __future__ import annotations

from meshctl import settings
from meshctl.errors import InventoryError
from meshctl.mesh import Mesh
from meshctl.ops import work


def check(mesh: Mesh) -> tuple[list, int]:
    """(every problem of the settings, each with its ``hint``; the number of nodes when there is none:
    mesh.yml's own checks, names, addresses, heads and idle times, passed too).

    The one operation that takes the mesh's folder rather than its unit of work: it reads the files
    as they are, before (and instead of) the load that refuses them."""
    try:
        text = mesh.inventory.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"cannot read {mesh.inventory}: {exc}") from None
    # What every command checks first, and what a run that sends the secrets refuses (session.run).
    problems = settings.check(mesh.path, text) + settings.secrets_problems(mesh.path)
    if problems:
        return problems, 0
    return [], len(work.reading(mesh).nodes)
