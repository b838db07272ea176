"""meshctl status: one row per node plus MLflow's health; exit 0 only when all are healthy."""

from __future__ import annotations

import dataclasses
import json

import click

from meshctl import display, runner
from meshctl.errors import MeshctlError, unreachable
from meshctl.ops import status as status_op
from meshctl.ops import work
from meshctl.options import json_option, mesh_option, verbose_option


def price(row) -> str:
    """A node's $/h cell: `?` for a rented node whose provider did not answer in time, `-` for none."""
    return display.dollars(row.price_per_hour, "?" if row.price_unknown else "-")


def ssh(row) -> str:
    """``ok``, ``DOWN``, or ``-`` for a pool's machine not in mesh.yml yet (not read over SSH)."""
    return ("ok" if row.ssh else "DOWN") if row.listed else "-"


def note(row) -> str:
    """A node's note: what is wrong and what to do, and what still bills while its instance is stopped."""
    bills = f"stopped; still billed: {row.stopped_bills}" if row.stopped_bills else ""
    return "; ".join(part for part in (row.error, bills) if part)


class Unhealthy(MeshctlError):
    exit_code = 1


@click.command("status")
@click.option(
    "--timeout",
    type=click.FloatRange(0, 120, min_open=True),
    default=status_op.STATUS_CONNECT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for a node to take the connection before calling it unreachable (raise it "
    "for slow links); SSH's wait for the rest of its handshake is this in whole seconds (2.5 waits 3).",
)
@json_option
@mesh_option
@verbose_option
def command(timeout, as_json, mesh_dir, verbosity) -> None:
    """SSH, tailnet, munge, Slurm daemons and state, NFS, GPUs of every node; MLflow's health."""
    w = work.reading(mesh_dir)
    rows, mlflow, healthy, left = status_op.status(w, timeout=timeout, verbosity=verbosity)
    pools = status_op.pools(w.mesh_vars, rows)
    priced = any(r.price_per_hour is not None or r.price_unknown for r in rows)
    total = round(sum(r.price_per_hour or 0.0 for r in rows), 4)
    if as_json:
        out = {"healthy": healthy, "mlflow": mlflow, "cost_per_hour": total if priced else None,
               "nodes": [dataclasses.asdict(r) for r in rows], "pools": pools,
               "unused_volumes": [dataclasses.asdict(v) for v in left]}  # fmt: skip
        display.echo(json.dumps(out, indent=2))
    else:
        columns = ["node", "role", "ssh", "tailnet", "munge", "slurm daemons", "slurm", "nfs", "gpus", "autostop"]
        display.table(
            "Mesh status",
            [*columns, *(["$/h"] if priced else []), "note"],
            [
                [r.name, r.role, ssh(r), r.tailnet, r.munge, r.daemon, r.slurm, r.nfs, r.gpus,
                 r.autostop, *([price(r)] if priced else []), note(r)]
                for r in rows
            ],
        )  # fmt: skip
        display.echo(f"MLflow on the head: {mlflow}")
        for pool in pools:
            resting = ", ".join(pool["resting"]) or "none"
            display.echo(
                f"burst pool {pool['name']} ({pool['gres']}, at most ${pool['max_price']:.2f}/h each): "
                f"powered down with no machine: {resting}; a job asking --gres={pool['gres']} rents one"
            )
        if priced:
            unknown = " and what the `?` nodes bill (their provider did not answer)" if any(
                r.price_unknown for r in rows) else ""  # fmt: skip
            display.echo(f"cost: ${total:.2f}/h for the rented nodes{unknown} "
                         "(`meshctl machines` lists every instance)")  # fmt: skip
        for volume in left:  # storage that bills by the month with nothing using it
            display.echo(volume.left_words())
    if not healthy:
        lost = {r.name: r.error or "did not answer" for r in rows if r.listed and not r.ssh and not r.healthy}
        unreachable_only = all(not r.ssh for r in rows if not r.healthy)
        if lost and unreachable_only:  # one outcome for nodes that did not answer, in every command (exit 7)
            raise unreachable("the others' status is shown above", lost, runner.again("meshctl status"), head=w.head)
        raise Unhealthy(
            "some nodes are not healthy (see the table)",
            hint="each row's note says what to do"
            + ("" if unreachable_only else "; `meshctl apply` converges the reachable ones again"),
        )
