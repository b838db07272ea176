"""meshctl check: the mesh folder and its settings checked, nothing run, no node contacted."""

from __future__ import annotations

import click

from meshctl import display
from meshctl.errors import InventoryError
from meshctl.ops import check as check_op
from meshctl.ops import work
from meshctl.options import mesh_option, quiet_verbose_option


@click.command("check")
@quiet_verbose_option
@mesh_option
def command(mesh_dir) -> None:
    """Check mesh.yml and every setting in group_vars/, host_vars/ and mesh.yml (names, types, idle
    times) as every command does first, and list every problem with its file and line. Exit 3 when
    there is one."""
    problems, nodes = check_op.check(work.find(mesh_dir))
    for problem in problems:
        display.echo(f"{problem}: {problem.hint}")
    if problems:
        raise InventoryError(f"{len(problems)} problem(s) in the mesh's settings (listed above)",
                             hint="fix each, then run `meshctl check` again")  # fmt: skip
    display.echo(f"mesh.yml and the settings are sound ({nodes} node{'' if nodes == 1 else 's'})")
