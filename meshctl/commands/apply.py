"""meshctl apply: converge the whole mesh."""

from __future__ import annotations

import click

from meshctl import completion, display, runner
from meshctl.ops import apply, work
from meshctl.options import mesh_option, verbose_option, wait_option


@click.command("apply")
@click.option("--limit", shell_complete=completion.node_name_list,
              help="Only these nodes (comma-separated names, e.g. 'gpu1,cpu1'), and on the head what they change "
                   "there; name the head to repair it too.")  # fmt: skip
@click.option("--check", is_flag=True, help="Ansible check mode: report what would change.")
@click.option("--diff", is_flag=True, help="Show file differences.")
@mesh_option
@wait_option
@verbose_option
def command(limit, check, diff, mesh_dir, wait, verbosity) -> None:
    """Converge every node to what the inventory and facts say (the drift repair).

    Nodes that cannot be reached are listed and the others converged (exit 7, partial).
    """
    with work.changing(mesh_dir, "apply", wait) as w:
        result = apply.apply(w, runner.Progress(), limit, check, diff, verbosity)
    for note in result.notes:
        display.echo(note)
    if not check:
        display.echo("mesh converged")
        return
    would = {host: len(tasks) for host, tasks in (getattr(result, "changed", None) or {}).items() if tasks}
    display.echo("check done: nothing was changed; " + (
        f"{sum(would.values())} tasks would change it ({', '.join(f'{h}: {n}' for h, n in sorted(would.items()))}): "
        "`meshctl apply` makes them" if would else "nothing would change"))  # fmt: skip
