"""meshctl machines: every instance of every provider account, its price and the node it is."""

from __future__ import annotations

import dataclasses
import json

import click

from meshctl import display
from meshctl.ops import accounts, work
from meshctl.ops import machines as machines_op
from meshctl.options import json_option, mesh_option, quiet_verbose_option


@click.command("machines")
@quiet_verbose_option
@click.option("--provider", type=click.Choice(accounts.PROVIDERS), help="Only this provider's instances.")
@json_option
@mesh_option
def command(provider, as_json, mesh_dir) -> None:
    """Instances at the providers: status, SSH address, GPUs, $/h, and the mesh node each is."""
    found = machines_op.machines(work.reading(mesh_dir), provider)
    rows, problems, total, forgotten = found.rows, found.problems, found.total, found.forgotten
    if as_json:
        machines = [{**dataclasses.asdict(r), "stopped_bills": found.stopped_bills(r)} for r in rows]
        out = {"machines": machines, "cost_per_hour": total,
               "not_in_mesh": [f"{r.provider}:{r.id}" for r in forgotten], "problems": problems,
               "volumes": [dataclasses.asdict(v) for v in found.volumes]}  # fmt: skip
        display.echo(json.dumps(out, indent=2))
    elif not found.configured:  # nothing to list or price: only what to do
        display.echo(f"no provider accounts: {accounts.ADD_ACCOUNT}")
    else:
        display.table(
            "Machines",
            ["provider", "id", "name", "status", "ssh_host", "gpus", "gpu_type", "$/h", "cloud", "node"],
            [
                [
                    r.provider,
                    r.id,
                    r.name,
                    r.status,
                    r.ssh_host or "-",
                    str(r.gpus),
                    r.gpu_type,
                    display.dollars(r.price_per_hour, "?"),
                    r.cloud or "-",
                    r.node or ("NOT IN MESH" if r in forgotten else "-"),
                ]
                for r in rows
            ],
        )
        unknown = f" (and what {', '.join(sorted(problems))} bill: not known, no answer)" if problems else ""
        display.echo(f"running: ${total:.2f}/h{unknown}" + (f"; {len(forgotten)} cost money outside the mesh "
                     "(`meshctl add-node PROVIDER:NAME`, or delete them)" if forgotten else ""))  # fmt: skip
        for r in rows:  # stopped is not free: what bills on, as each provider's document says
            if found.stopped_bills(r):
                display.echo(f"{r.provider}:{r.id} ({r.node or r.name}) is stopped; still billed: "
                             f"{found.stopped_bills(r)}")  # fmt: skip
        if found.volumes:  # storage of the accounts: it bills by the month, used or not
            display.table(
                "Network volumes",
                ["provider", "id", "name", "size", "region", "$/month", "used by"],
                [
                    [v.provider, v.id, v.name, f"{v.size_gb} GB" if v.size_gb is not None else "?", v.region or "?",
                     display.dollars(v.price_per_month, "?"), ", ".join(v.used_by) or "NOTHING"]
                    for v in found.volumes
                ],
            )  # fmt: skip
            month = sum(v.price_per_month or 0.0 for v in found.volumes)
            display.echo(f"network volumes: ${month:.2f}/month, whether or not anything uses them")
            for v in found.volumes:
                if not v.used_by:
                    display.echo(v.left_words())
        if any(r.cloud == "COMMUNITY" for r in rows):
            display.echo(accounts.THIRD_PARTY_HOST)
    found.raise_for_problems()
