"""meshctl offers: what the configured providers rent now, one table, cheapest $/h per GPU first."""

from __future__ import annotations

import dataclasses
import json

import click

from meshctl import display
from meshctl.ops import accounts, work
from meshctl.ops import machines as machines_op
from meshctl.options import json_option, mesh_option, quiet_verbose_option


@click.command("offers")
@quiet_verbose_option
@click.option("--gpu", help="Only this GPU, with a count when it matters: H100, H100:8, A10, 'RTX 4090'.")
@click.option("--provider", type=click.Choice(accounts.PROVIDERS), help="Only this provider's offers.")
@click.option("--all", "show_all", is_flag=True, help="Also what is not available now.")
@json_option
@mesh_option
def command(gpu, provider, show_all, as_json, mesh_dir) -> None:
    """Machines the mesh's provider accounts can rent now: GPU, count, $/h, $/h per GPU, regions.

    Lambda's instance types with the regions that have capacity; Runpod's GPU catalog with its
    availability, Secure and Community Cloud apart (a pod of N GPUs costs N times one). `meshctl launch
    --gpu TYPE:N` rents the cheapest available one.
    """
    found = machines_op.offers(work.reading(mesh_dir), gpu, provider)
    rows, problems, silent = found.rows, found.problems, found.silent
    shown = rows if show_all else [r for r in rows if r.available]
    if as_json:
        display.echo(json.dumps({"offers": [dataclasses.asdict(r) for r in shown], "problems": problems,
                                 "no_offers_from": silent}, indent=2))  # fmt: skip
    else:
        display.table(
            "Offers" + (f" for {gpu}" if gpu else ""),
            ["provider", "type", "gpu", "gpus", "$/h", "$/h per GPU", "cloud", "regions", "available"],
            [
                [r.provider, r.type, r.gpu, str(r.gpus), display.dollars(r.price_per_hour),
                 display.dollars(r.price_per_gpu), r.cloud or "-", ", ".join(r.regions[:4]) or "-",
                 "yes" if r.available else "no"]
                for r in shown
            ],
        )  # fmt: skip
        if not found.configured:
            display.echo(f"no provider accounts: {accounts.ADD_ACCOUNT}")
        elif not shown:
            display.echo("nothing available matches" + (" (`--all` shows what is not available now)" if rows else ""))
        for name in silent:
            display.echo(f"{name}: its API lists no machine types or prices: set `{name}_prices: {{TYPE: $/h}}` in "
                         f"group_vars/all.yml to have those types offered, or `meshctl launch {name} --type T` rents "
                         "one by name")  # fmt: skip
    found.raise_for_problems()
