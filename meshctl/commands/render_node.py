"""meshctl render-node: preview the slurm.conf and gres.conf lines for a machine's saved outputs."""

from __future__ import annotations

import json

import click

from meshctl import display
from meshctl.errors import UsageError
from meshctl.ops import render_node
from meshctl.options import quiet_verbose_option

MAX_OUTPUT = 1024 * 1024  # no command output meshctl reads is this long (/dev/zero is endless)


def _read(stream) -> str | None:
    """The file's text, less leading ``# `` note lines (real outputs never start with them)."""
    if stream is None:
        return None
    try:
        text = stream.read(MAX_OUTPUT + 1)
    except UnicodeDecodeError:
        raise UsageError(f"{stream.name} is not text", hint="pass the command's output as saved by the shell") from None
    if len(text) > MAX_OUTPUT:
        raise UsageError(f"{stream.name} is over 1 MiB: not a command's output", hint="pass the saved output")
    lines = text.splitlines()
    while lines and lines[0].startswith("# "):
        lines.pop(0)
    return "\n".join(lines) + "\n"


@click.command("render-node")
@quiet_verbose_option
@click.option("--lscpu", type=click.File("r"), required=True, help="Output of `LC_ALL=C lscpu` ('-' for stdin).")
@click.option("--free", type=click.File("r"), required=True, help="Output of `free -m` ('-' for stdin).")
@click.option("--nvidia-smi", "nvidia_smi", type=click.File("r"), help="Output of `nvidia-smi -L` or --query-gpu CSV.")
@click.option("--slurmd-c", "slurmd_c", type=click.File("r"), help="Output of `slurmd -C`; wins over lscpu.")
@click.option("--dev-nvidia", "dev_nvidia", type=click.File("r"), help="Output of `ls -l /dev/nvidia*`.")
@click.option("--name", help="Node name (default: from slurmd -C, else 'node').")
@click.option("--addr", help="The node's mesh (tailnet) IPv4, written as NodeAddr.")
@click.option("--provider", default="generic", show_default=True, type=click.Choice(render_node.NODE_PROVIDERS),
              help="Provider, written as a Feature tag.")  # fmt: skip
@click.option("--reserve-mb", type=click.IntRange(min=0), help="Memory kept back for the OS (default: 5%, >= 1024).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(lscpu, free, nvidia_smi, slurmd_c, dev_nvidia, name, addr, provider, reserve_mb, as_json) -> None:
    """Print the NodeName= line and gres.conf lines meshctl would write for a machine."""
    inputs = {"--lscpu": lscpu, "--free": free, "--nvidia-smi": nvidia_smi, "--slurmd-c": slurmd_c,
              "--dev-nvidia": dev_nvidia}  # fmt: skip
    from_stdin = [option for option, handle in inputs.items() if handle is not None and handle.name == "<stdin>"]
    if len(from_stdin) > 1:
        raise UsageError(f"{' and '.join(from_stdin)} cannot both read stdin ('-')", hint="give files for all but one")
    texts = {"lscpu": _read(lscpu), "free": _read(free), "nvidia_smi": _read(nvidia_smi), "slurmd_c": _read(slurmd_c)}
    name, hw, lines = render_node.render(texts, _read(dev_nvidia), name, addr, provider, reserve_mb)
    if as_json:
        out = {
            "name": name,
            **{k: hw[k] for k in ("sockets", "cores_per_socket", "threads_per_core", "cpus", "real_memory_mb")},
            "memory_total_mb": hw["memory_total_mb"],
            "topology_source": hw["topology_source"],
            "gpu_status": hw["gpu_status"],
            "gpus": [
                {k: g.get(k) for k in ("index", "model", "type", "file", "uuid", "memory_mb")} for g in hw["gpus"]
            ],
            **lines,
        }
        display.echo(json.dumps(out, indent=2))
        return
    display.echo("# slurm.conf")
    display.echo(lines["node_line"])
    display.echo("# gres.conf")
    for line in lines["gres_lines"]:
        display.echo(line)
    if hw["gpu_status"] == "failed":
        display.echo(f"# note: nvidia-smi failed ({hw['gpu_error']}); no GPUs written", err=True)
    for gpu in hw["gpus"]:
        if gpu["file"] is None:
            display.echo(f"# note: GPU {gpu['index']} has no /dev/nvidiaN file; left out of gres.conf", err=True)
    if hw["topology_adjusted"]:
        display.echo("# note: lscpu's counts did not multiply out to CPU(s) (hybrid cores?); pass --slurmd-c", err=True)
