"""meshctl doctor: the links between every two nodes, and an all-reduce across them."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import asdict

import click

from meshctl import display, runner
from meshctl.errors import PlaybookError, unreachable
from meshctl.ops import doctor as doctor_lib
from meshctl.ops import work
from meshctl.options import json_option, mesh_option, verbose_option


def _cell(value, unit="") -> str:
    return "-" if value is None else f"{value:g}{unit}"


@click.command("doctor")
@json_option
@mesh_option
@verbose_option
def command(as_json, mesh_dir, verbosity) -> None:
    """Measure every link between two nodes (iperf3 over the mesh: throughput, round trip, direct
    or relayed) and an all-reduce across the nodes in the job environment, through Slurm.

    Takes a few seconds per pair of nodes; changes nothing on the nodes. Exit 7 when a node could
    not be reached, 5 when one answered but could not be measured.
    """
    w = work.reading(mesh_dir)
    # Its tasks are its own business: shown with -v (or live on a terminal), never as plain lines.
    quiet = as_json or (not verbosity and not sys.stdout.isatty())
    progress = runner.Progress(out=io.StringIO(), live=False) if quiet else runner.Progress()
    links, allreduce, problems = doctor_lib.doctor(w, progress, verbosity)
    if as_json:
        display.echo(json.dumps({"links": [asdict(link) for link in links], "allreduce": asdict(allreduce),
                                 "problems": problems}, indent=2))  # fmt: skip
    else:
        display.table(
            "Links (iperf3 over the mesh addresses)",
            ["from", "to", "path", "round trip ms", "Mbit/s", "error"],
            [[k.source, k.target, k.path, _cell(k.rtt_ms), _cell(k.mbps), k.error] for k in links],
        )
        if allreduce.error:
            display.echo(f"all-reduce: {allreduce.error}")
        else:
            display.table(
                f"All-reduce across {allreduce.world_size} nodes (Gloo, the job environment)",
                ["MB", "ms per all-reduce", "algbw Gbit/s", "busbw Gbit/s"],
                [
                    [
                        f"{r['megabytes']:g}",
                        f"{r['seconds'] * 1000:.1f}",
                        f"{r['algbw_gbps']:g}",
                        f"{r['busbw_gbps']:g}",
                    ]
                    for r in allreduce.results
                ],
            )
        for name, said in problems.items():
            display.echo(f"{name}: {said}")
    lost = {name: said for name, said in problems.items() if said.startswith(doctor_lib.NOT_REACHED)}
    if lost:  # one outcome for nodes that did not answer, in every command (exit 7)
        raise unreachable(f"{len(links)} link(s) measured", lost, runner.again("meshctl doctor"), head=w.head)
    if problems:
        raise PlaybookError(f"{len(problems)} node(s) could not be measured: {', '.join(problems)}",
                            hint="`meshctl apply --limit NODE` (iperf3 or the job environment missing), then "
                            "run `meshctl doctor` again")  # fmt: skip
