"""meshctl machines: every instance of every provider account, its price and the node it is."""

from __future__ import annotations

import dataclasses
import json

import click

from meshctl import burst, cloud, display
from meshctl.mesh import Mesh
from meshctl.options import json_option, mesh_option, quiet_verbose_option


@click.command("machines")
@quiet_verbose_option
@click.option("--provider", type=click.Choice(cloud.PROVIDERS), help="Only this provider's instances.")
@json_option
@mesh_option
def command(provider, as_json, mesh_dir) -> None:
    """Instances at the providers: status, SSH address, GPUs, $/h, and the mesh node each is."""
    mesh = Mesh.find(mesh_dir)
    nodes, mesh_vars = mesh.load()
    rows, problems = cloud.machines(mesh, nodes, mesh_vars, provider)
    rows = burst.pool_machines(rows, mesh_vars)  # a burst pool's machine is its node's, though not in mesh.yml
    total, forgotten = cloud.costing(rows)
    if as_json:
        machines = [{**dataclasses.asdict(r), "stopped_bills": cloud.capabilities(r.provider).stopped_bills
                     if r.status == "stopped" else ""} for r in rows]  # fmt: skip
        out = {"machines": machines, "cost_per_hour": total,
               "not_in_mesh": [f"{r.provider}:{r.id}" for r in forgotten], "problems": problems}  # fmt: skip
        display.echo(json.dumps(out, indent=2))
    elif not cloud.configured(mesh):  # nothing to list or price: only what to do
        display.echo(f"no provider accounts: {cloud.ADD_ACCOUNT}")
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
            if r.status == "stopped" and cloud.capabilities(r.provider).stopped_bills:
                display.echo(f"{r.provider}:{r.id} ({r.node or r.name}) is stopped; still billed: "
                             f"{cloud.capabilities(r.provider).stopped_bills}")  # fmt: skip
        if any(r.cloud == "COMMUNITY" for r in rows):
            display.echo(cloud.THIRD_PARTY_HOST)
    asked = [provider] if provider else cloud.configured(mesh)
    cloud.raise_for_problems(problems, len(asked) - len(problems), "machines")
