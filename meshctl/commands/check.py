"""meshctl check: the mesh folder and its settings checked, nothing run, no node contacted."""

from __future__ import annotations

import click

from meshctl import display, settings
from meshctl.errors import InventoryError
from meshctl.mesh import Mesh
from meshctl.options import mesh_option, quiet_verbose_option


@click.command("check")
@quiet_verbose_option
@mesh_option
def command(mesh_dir) -> None:
    """Check mesh.yml and every setting in group_vars/, host_vars/ and mesh.yml (names, types, idle
    times) as every command does first, and list every problem with its file and line. Exit 3 when
    there is one."""
    mesh = Mesh.find(mesh_dir)
    try:
        text = mesh.inventory.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"cannot read {mesh.inventory}: {exc}") from None
    problems = settings.check(mesh.path, text)
    for problem in problems:
        display.echo(f"{problem}: {problem.hint}")
    if problems:
        raise InventoryError(f"{len(problems)} problem(s) in the mesh's settings (listed above)",
                             hint="fix each, then run `meshctl check` again")  # fmt: skip
    nodes, _mesh_vars = mesh.load()  # the inventory's own checks (names, addresses, heads, idle times)
    display.echo(f"mesh.yml and the settings are sound ({len(nodes)} nodes)")
