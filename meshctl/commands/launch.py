"""meshctl launch: rent a machine through its provider's API and add it to the mesh."""

from __future__ import annotations

import click

from meshctl import display
from meshctl.ops import launch as launch_op
from meshctl.ops import work
from meshctl.options import confirm, mesh_option, ssh_key_option, verbose_option, wait_option, yes_option


@click.command("launch")
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
@click.option("--ssh-key-name", "ssh_key_names", multiple=True, help="Lambda: a key registered at Lambda.")
@click.option("--template-id", help="Paperspace: the OS template's id.")
@click.option("--image", help="Runpod: the container image (default: an official PyTorch image that starts sshd).")
@click.option("--cloud", "cloud_type", type=click.Choice(launch_op.CLOUDS, case_sensitive=False),
              help="Runpod: Secure Cloud (Runpod's data centres, the default) or Community Cloud (hosts run by "
              "third parties).")  # fmt: skip
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
def command(provider, kind, gpu, only, max_price, name, region, ssh_key_names, template_id, image, cloud_type, cpus,
            memory_gb, yes, ssh_key, mesh_dir, wait, verbosity) -> None:  # fmt: skip
    """Create an instance at PROVIDER (or the cheapest offer of --gpu), wait for its SSH, and add it as
    node NAME (as add-node does). Asks before renting unless -y."""
    options = {"region": region, "ssh_key_names": list(ssh_key_names), "template_id": template_id, "image": image,
               "cloud": cloud_type.upper() if cloud_type else None, "cpus": cpus, "memory_gb": memory_gb}  # fmt: skip
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
