"""meshctl usage: GPU-hours, CPU-hours and cost per user for a period (Slurm accounting)."""

from __future__ import annotations

import dataclasses
import json

import click

from meshctl import display
from meshctl.ops import usage as usage_lib
from meshctl.ops import work
from meshctl.options import json_option, mesh_option, verbose_option


@click.command("usage")
@click.option("--since", help="Start of the period (YYYY-MM-DD; default: the first of this month).")
@click.option("--until", help="End of the period (YYYY-MM-DD; default: now).")
@json_option
@mesh_option
@verbose_option
def command(since, until, as_json, mesh_dir, verbosity) -> None:
    """Per user: jobs, GPU-hours, CPU-hours and cost at today's prices, from Slurm's accounting."""
    w = work.reading(mesh_dir)
    rows, start, end, problems, volumes, machines = usage_lib.usage(w, since, until, verbosity)
    total = round(sum(r.cost for r in rows), 2)
    if as_json:
        out = {"since": start, "until": end, "cost": total, "problems": problems,
               "volumes": [dataclasses.asdict(v) for v in volumes],
               "machines": [dataclasses.asdict(m) for m in machines],
               "users": [{"user": r.user, "jobs": r.jobs, "gpu_hours": round(r.gpu_hours, 3),
                          "cpu_hours": round(r.cpu_hours, 3), "cost": round(r.cost, 2), "nodes": sorted(r.nodes)}
                         for r in rows]}  # fmt: skip
        display.echo(json.dumps(out, indent=2))
        return
    display.table(
        f"Usage {start} .. {end}",
        ["user", "jobs", "GPU-hours", "CPU-hours", "cost $", "nodes"],
        [
            [
                r.user,
                str(r.jobs),
                f"{r.gpu_hours:.2f}",
                f"{r.cpu_hours:.2f}",
                f"{r.cost:.2f}",
                ",".join(sorted(r.nodes)),
            ]
            for r in rows
        ],
    )
    display.echo(f"total: ${total:.2f} at today's prices of the rented nodes (a node without a price costs nothing)")
    if volumes:  # storage bills by the month apart from the nodes' hours, used or not
        month = sum(v.price_per_month or 0.0 for v in volumes)
        display.echo(f"and network volumes: ${month:.2f}/month now, apart from the jobs' hours: "
                     + ", ".join(f"{v.provider}:{v.id} ({', '.join(v.used_by) or 'used by nothing'})"
                                 for v in volumes))  # fmt: skip
        for volume in volumes:
            if not volume.used_by:
                display.echo(volume.left_words())
    if machines:  # what the pools' machines billed, each one: a lost machine and its replacement alike
        display.table("Machines the burst pools rented", ["node", "machine", "$/h", "from", "to", "cost $", "end"],
                      [[m.node, m.instance, f"{m.price_per_hour:.2f}", clock(m.since), ended(m),
                        f"{m.cost:.2f}", ("lost: " if m.lost else "") + m.why] for m in machines])  # fmt: skip
        display.echo(f"the pools' machines: ${sum(m.cost for m in machines):.2f} in the period (their hours are "
                     "in the users' cost above too, at the pool's price)")  # fmt: skip
    for provider, said in problems.items():
        display.echo(f"{provider}: no prices ({said})")


def ended(machine: usage_lib.PoolMachine) -> str:
    """When a pool machine ended: "now" while it runs, "by ..." when only the next rent says."""
    if machine.until is None:
        return "now"
    return ("" if machine.until_known else "by ") + clock(machine.until)


def clock(seconds: int) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
