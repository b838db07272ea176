"""meshctl add-node: a bare SSH-reachable machine to an idle Slurm node in one command."""

from __future__ import annotations

import click

from meshctl import display, runner
from meshctl.ops import add, work
from meshctl.options import (
    mesh_address_option,
    mesh_option,
    provider_option,
    ssh_key_option,
    verbose_option,
    wait_option,
)


@click.command("add-node")
@click.argument("targets", nargs=-1, required=True, metavar="[USER@]HOST[:PORT] | PROVIDER:NAME ...")
@click.option("--name", help="Node name (default: the machine's hostname); with one machine only.")
@provider_option
@ssh_key_option
@mesh_address_option
@click.option("--dry-run", is_flag=True, help="Preflight and Ansible check mode with diff; change nothing.")
@click.option("--timeout", type=click.IntRange(1, 300), default=add.CONNECT_TIMEOUT, show_default=True,
              help="Seconds SSH waits for each machine to answer (raise it for slow links).")  # fmt: skip
@mesh_option
@wait_option
@verbose_option
def command(targets, name, provider, ssh_key, address, dry_run, timeout, mesh_dir, wait, verbosity) -> None:
    """Check machines over SSH, configure them and the head in one run, and mark them active.

    Each TARGET is an SSH address, or PROVIDER:NAME for an instance of a provider the mesh has an
    account with (`meshctl provider add`): its address, user and provider come from the API.
    Several machines are checked first, all of them, and then set up together: one failed check
    adds none of them.
    """
    with work.changing(mesh_dir, f"add-node {' '.join(targets)}", wait) as w:
        plans = add.plan_adds(w, targets, name, provider, ssh_key, address,
                              on_plan=lambda plan: display.preflight_table(plan.report), timeout=timeout)  # fmt: skip
        for plan in plans:
            what = "checking (dry run)" if dry_run else ("resuming" if plan.resumed else "adding")
            kind = f", {plan.cloud.title()} Cloud" if plan.cloud else ""
            display.echo(f"{what} {plan.node.name} ({plan.node.host}{kind}) ...")
            if plan.cloud == "COMMUNITY":
                display.echo(add.THIRD_PARTY_HOST)
        result = add.add_node(w, plans, runner.Progress(), dry_run=dry_run, verbosity=verbosity)
    for note in result.notes:
        display.echo(note)
    names = ", ".join(plan.node.name for plan in plans)
    if dry_run:
        display.echo(f"dry run done: nothing was changed on {names} or in {w.mesh.inventory.name}")
    else:
        display.echo(f"{names} {'is' if len(plans) == 1 else 'are'} active; `meshctl status` shows the mesh")
