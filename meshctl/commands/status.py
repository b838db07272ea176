"""meshctl status: one row per node; exit 0 only when all are healthy."""

from __future__ import annotations

import dataclasses
import json

import click

from meshctl import display, membership
from meshctl.errors import MeshctlError
from meshctl.mesh import Mesh
from meshctl.options import json_option, mesh_option


class Unhealthy(MeshctlError):
    exit_code = 1


@click.command("status")
@json_option
@mesh_option
def command(as_json, mesh_dir) -> None:
    """SSH, munge, Slurm daemon and state, and GPUs of every node."""
    mesh = Mesh.find(mesh_dir)
    nodes, _vars = mesh.load()
    rows, healthy = membership.status(mesh, nodes)
    if as_json:
        click.echo(json.dumps({"healthy": healthy, "nodes": [dataclasses.asdict(r) for r in rows]}, indent=2))
    else:
        display.table(
            "Mesh status",
            ["node", "ssh", "munge", "daemon", "slurm", "gpus", "note"],
            [[r.name, "ok" if r.ssh else "DOWN", r.munge, r.daemon, r.slurm, r.gpus, r.error] for r in rows],
        )
    if not healthy:
        raise Unhealthy("some nodes are not healthy (see the table)", hint="`meshctl apply` converges them again")
