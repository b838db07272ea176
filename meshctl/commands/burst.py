"""meshctl burst add|list|remove: pools of Slurm cloud nodes a queued job turns into rented machines."""

from __future__ import annotations

import click

from meshctl import display
from meshctl.ops import burst as burst_op
from meshctl.ops import work
from meshctl.options import (
    group_mesh_option,
    mesh_option,
    own_launch_option,
    quiet_verbose_option,
    verbose_option,
    wait_option,
)


@click.group("burst")
@group_mesh_option
@quiet_verbose_option
def command() -> None:
    """Burst pools: a job that fits no node rents the cheapest machine that fits, given back when idle."""


@command.command("add")
@click.argument("name")
@click.option("--gpu", required=True, help="The GPU and how many per machine: TYPE:N (H100:1, A10, RTX 4090:2).")
@click.option("--max-nodes", type=click.IntRange(1, burst_op.MAX_NODES), required=True,
              help="At most this many machines rented at once (nodes NAME-1..K).")  # fmt: skip
@click.option("--max-price", type=float, required=True, help="At most this many dollars an hour per machine.")
@click.option("--provider", "providers", multiple=True, type=click.Choice(["any", *burst_op.PROVIDERS]),
              help="Rent from these only (repeat it); any (the default): every account the mesh has.")  # fmt: skip
@click.option("--idle", default="10m", show_default=True, help="A machine idle this long is terminated.")
@click.option("--cpus", type=click.IntRange(1, 4096), help="CPUs every machine of the pool has at least (default 1).")
@click.option("--memory", "memory_gb", type=click.FloatRange(0.25, 65536), help="GiB of memory every machine has at "
              "least (default 1).")  # fmt: skip
@mesh_option
@wait_option
@verbose_option
def add(name, gpu, max_nodes, max_price, providers, idle, cpus, memory_gb, mesh_dir, wait, verbosity, **own) -> None:
    """Declare pool NAME: MAX_NODES Slurm nodes NAME-1..K with GPU, in the default partition after every
    other node and in a partition NAME. A job for them rents the cheapest offer within --max-price
    (and burst_max_spend); idle for --idle, the machine is terminated. Converges the head only."""
    seconds = burst_op.idle_seconds(idle)
    with work.changing(mesh_dir, "burst add", wait) as w:
        record = burst_op.pool_record(w.mesh, w.mesh_vars, name, gpu, max_nodes, max_price, list(providers), seconds,
                                      cpus, memory_gb, display.echo, own)  # fmt: skip
        burst_op.add_pool(w, record, verbosity=verbosity)
    display.echo(f"pool {name}: Slurm nodes {burst_op.hostlist(record)} (partition {name}), each {record['gpus']} x "
                 f"{record['gpu']} (--gres={burst_op.gres(record)}) at most "
                 f"${record['max_price']:.2f}/h, terminated after {idle} idle")  # fmt: skip


@command.command("list")
@quiet_verbose_option
@mesh_option
def list_(mesh_dir) -> None:
    """The pools, their nodes and limits."""
    every, limit = burst_op.listing(work.reading(mesh_dir))
    if not every:
        display.echo("no burst pool: `meshctl burst add NAME --gpu H100:1 --max-nodes 2 --max-price 3`")
        return
    rows = [[p["name"], burst_op.hostlist(p), f"{p['gpus']} x {p['gpu']}", burst_op.gres(p),
             f"${float(p['max_price']):.2f}/h",
             ",".join(p["providers"]), f"{burst_op.pool_idle(p)} s", f"{p['cpus']} / {p['memory_mb']} MiB"]
            for p in every]  # fmt: skip
    display.table("Burst pools", ["pool", "nodes", "GPUs", "gres", "max $/h", "providers", "idle", "CPUs / memory"],
                  rows)  # fmt: skip
    display.echo(f"burst_max_spend: ${limit:.2f}/h for every pool machine up together" if limit is not None else
                 "burst_max_spend: not set (each pool at most max-nodes x max-price)")  # fmt: skip


@command.command("remove")
@click.argument("name")
@mesh_option
@wait_option
@verbose_option
def remove(name, mesh_dir, wait, verbosity) -> None:
    """Take pool NAME out: the machines it holds are terminated (their jobs end), its nodes leave Slurm."""
    with work.changing(mesh_dir, f"burst remove {name}", wait) as w:
        done = burst_op.remove_pool(w, name, display.echo, verbosity=verbosity)
    display.echo(f"pool {name}: removed" + (f"; terminated {', '.join(done)}" if done else "; it held no machine"))


# The providers' own launch options (their modules' LAUNCH_OPTIONS), but what a pool's rent decides
# itself (the head registers its own SSH key): every rent of the pool adds them to its create.
add.params.extend(
    own_launch_option(owner, option, " Added to every rent of the pool.")
    for owner, option in burst_op.PROVIDER_OPTIONS
    if option["key"] not in burst_op.POOL_DECIDES
)
