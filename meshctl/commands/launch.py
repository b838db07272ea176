"""meshctl launch: rent a machine through its provider's API and add it to the mesh."""

from __future__ import annotations

import click

from meshctl import display
from meshctl.ops import launch as launch_op
from meshctl.ops import work
from meshctl.options import (
    confirm,
    mesh_option,
    own_launch_option,
    ssh_key_option,
    verbose_option,
    wait_option,
    yes_option,
)


class LaunchCommand(click.Command):
    """``meshctl launch``: its help lists the common options and, when PROVIDER is named
    (``meshctl launch runpod --help``), only that provider's own; else every provider's."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["meshctl.launch.words"] = list(args)  # read by the help, which runs before PROVIDER is parsed
        return super().parse_args(ctx, args)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        words = ctx.meta.get("meshctl.launch.words") or []
        named = next((w for w in words if w in launch_op.PROVIDERS), None)
        helping = ctx.resilient_parsing or bool({"--help", "-h"} & set(words))  # help, or the shell's completion
        if named is None or not helping:
            return params
        return [p for p in params if getattr(p, "provider", named) == named]


@click.command("launch", cls=LaunchCommand)
@click.argument("provider", required=False, type=click.Choice(launch_op.PROVIDERS))
@click.option("--type", "kind",
              help="Instance type (Lambda: gpu_1x_a10), GPU type id (Runpod: NVIDIA RTX A5000) or machine type "
              "(Paperspace: A4000).")  # fmt: skip
@click.option("--gpu", help="Rent the cheapest available offer of this GPU instead of naming a type: H100:8, A10.")
@click.option("--provider", "only", type=click.Choice([*launch_op.PROVIDERS, "any"]), default="any", show_default=True,
              help="With --gpu: the provider to rent from.")  # fmt: skip
@click.option("--max-price", type=click.FloatRange(min=0), help="With --gpu: the most $/h the machine may cost.")
@click.option("--name", required=True, help="The instance's name at the provider, and the node's name.")
@click.option(
    "--region",
    help="Region (Lambda: us-east-1; Paperspace: ny2) or data centre (Runpod: EU-RO-1). With "
    "--gpu: Lambda's first with capacity unless named.",
)
@click.option("--cpus", type=click.IntRange(min=1),
              help="The machine has at least this many vCPUs: offers that say less are left out (Runpod: a "
              "placement filter).")  # fmt: skip
@click.option("--memory", "memory_gb", type=click.FloatRange(min=0, min_open=True),
              help="The machine has at least this many GB of memory, as --cpus.")  # fmt: skip
@yes_option
@ssh_key_option
@mesh_option
@wait_option
@verbose_option
def command(provider, kind, gpu, only, max_price, name, region, cpus, memory_gb, yes, ssh_key, mesh_dir, wait,
            verbosity, **own) -> None:  # fmt: skip
    """Create an instance at PROVIDER (or the cheapest offer of --gpu), wait for its SSH, and add it as
    node NAME (as add-node does). Asks before renting unless -y."""
    options = {"region": region, "cpus": cpus, "memory_gb": memory_gb, **launch_op.provider_options(own, provider)}
    request = launch_op.new_request(name, provider, kind, gpu, only, max_price, options, ssh_key)
    w = work.reading(mesh_dir)
    chosen = launch_op.plan(w, request, say=display.echo, warn=lambda line: display.echo(line, err=True))
    if chosen.third_party:
        display.echo(launch_op.THIRD_PARTY_HOST)
    cost = f" at ${chosen.price:.2f}/h" if chosen.price is not None else " (its price: not listed by the provider)"
    count = len(chosen.candidates)
    more = f" (or the next of {count} offers if it cannot be rented)" if count > 1 else ""
    confirm(f"rent a {chosen.kind} at {chosen.title}{cost}{more} as {name}? It bills "
            "until it is stopped or deleted", yes)  # fmt: skip
    launch_op.launch(w, chosen, request, say=display.echo, wait=wait, verbosity=verbosity,
                     preflight_table=display.preflight_table)  # fmt: skip
    display.echo(f"{name} is active; `meshctl status` shows the mesh")


# Each provider's own options (its module's LAUNCH_OPTIONS), after the common ones.
command.params.extend(own_launch_option(owner, option) for owner, option in launch_op.PROVIDER_OPTIONS)
