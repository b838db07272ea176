"""meshctl launch: rent a machine through its provider's API and add it to the mesh."""

from __future__ import annotations

from pathlib import Path

import click

from meshctl import cloud, display, runner
from meshctl.errors import MeshctlError, UsageError
from meshctl.mesh import Mesh
from meshctl.model import check_name
from meshctl.ops import add
from meshctl.options import confirm, mesh_option, ssh_key_option, verbose_option, wait_option, yes_option

FLAGS = {"region": "--region", "ssh_key_names": "--ssh-key-name", "template_id": "--template-id", "image": "--image",
         "cloud": "--cloud"}  # fmt: skip


@click.command("launch")
@click.argument("provider", required=False, type=click.Choice(cloud.PROVIDERS))
@click.option("--type", "kind",
              help="Instance type (Lambda: gpu_1x_a10), GPU type id (Runpod: NVIDIA RTX A5000) or machine type "
              "(Paperspace: A4000).")  # fmt: skip
@click.option("--gpu", help="Rent the cheapest available offer of this GPU instead of naming a type: H100:8, A10.")
@click.option("--provider", "only", type=click.Choice([*cloud.PROVIDERS, "any"]), default="any", show_default=True,
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
@click.option("--cloud", "cloud_type", type=click.Choice(cloud.CLOUDS, case_sensitive=False),
              help="Runpod: Secure Cloud (Runpod's data centres, the default) or Community Cloud (hosts run by "
              "third parties).")  # fmt: skip
@yes_option
@ssh_key_option
@mesh_option
@wait_option
@verbose_option
def command(provider, kind, gpu, only, max_price, name, region, ssh_key_names, template_id, image, cloud_type, yes,
            ssh_key, mesh_dir, wait, verbosity) -> None:  # fmt: skip
    """Create an instance at PROVIDER (or the cheapest offer of --gpu), wait for its SSH, and add it as
    node NAME (as add-node does). Asks before renting unless -y."""
    check_name(name)
    if gpu and (provider or kind):
        raise UsageError("--gpu picks the provider and the type itself", hint="pass either --gpu or PROVIDER --type")
    if not gpu and not (provider and kind):
        raise UsageError("say what to rent", hint="`meshctl launch PROVIDER --type T --name N`, or "
                         "`meshctl launch --gpu H100:8 --name N` for the cheapest offer")  # fmt: skip
    mesh = Mesh.find(mesh_dir)
    nodes, mesh_vars = mesh.load()
    if any(n.name == name for n in nodes):
        raise UsageError(f"a node named {name} is already in the mesh", hint="pick another --name")
    options = {"region": region, "ssh_key_names": list(ssh_key_names), "template_id": template_id, "image": image,
               "cloud": cloud_type.upper() if cloud_type else None}  # fmt: skip
    accounts = cloud.configured(mesh)
    if not accounts or (provider and provider not in accounts) or (gpu and only != "any" and only not in accounts):
        which = provider or (only if only != "any" else "|".join(cloud.PROVIDERS))
        raise UsageError(f"the mesh has no {which if which in cloud.PROVIDERS else 'provider'} account to rent from",
                         hint=f"`meshctl provider add {which} --key-file FILE` first, then run this again")  # fmt: skip
    price, candidates, first = None, [], None
    if gpu:
        wanted, count = cloud.parse_gpu(gpu)
        rows, problems = cloud.offers(mesh, mesh_vars, wanted, count or 1, None if only == "any" else only)
        for where, said in problems.items():
            display.echo(f"{where} could not be asked: {said}", err=True)
        # Every available offer at most --max-price, cheapest first: a create the provider refuses
        # for that offer only (no capacity, a pool the account cannot use) moves on to the next.
        chosen = [o for o in rows if o.available and (max_price is None or o.price_per_hour <= max_price)]
        if not chosen:
            cheaper = cloud.cheapest(rows)
            raise UsageError(f"no available offer of {gpu}" + (f" at most ${max_price:.2f}/h" if max_price is not None
                             else "") + (f"; the cheapest is ${cheaper.price_per_hour:.2f}/h" if cheaper else ""),
                             hint="`meshctl offers --gpu " + gpu + " --all` lists what there is")  # fmt: skip
        for offer in chosen:  # one candidate per region with capacity, where a launch names one
            regions = (
                offer.regions if not region and "region" in cloud.capabilities(offer.provider).launch_needs else []
            )
            for where in regions or [None]:
                candidates.append((offer, offer.provider, offer.type, offer_options(offer, options, region or where)))
        first = chosen[0]
        provider, kind, price = first.provider, first.type, first.price_per_hour
        where = ", ".join(part for part in (kind, first.cloud, candidates[0][3].get("region")) if part)
        display.echo(f"cheapest available {gpu}: {first.gpus} x {first.gpu} at {provider} ({where}), ${price:.2f}/h"
                     + (f"; {len(chosen) - 1} more offer(s) up to ${chosen[-1].price_per_hour:.2f}/h if it cannot be "
                        "rented" if len(chosen) > 1 else ""))  # fmt: skip
    else:
        candidates.append((None, provider, kind, dict(options)))
    ready, unready = [], []
    for candidate in candidates:  # an offer whose launch needs what was not given is left out, said why
        try:
            check_launch_options(candidate[1], candidate[3], ssh_key)
            ready.append(candidate)
        except UsageError as exc:
            unready.append(exc)
            display.echo(f"left out {candidate[1]} ({candidate[2]}): {exc.message} ({exc.hint})", err=True)
    if not ready:
        raise unready[0]
    candidates = ready
    if candidates[0][0] is not None and candidates[0][0] is not first:
        first = candidates[0][0]
        provider, kind, price = first.provider, first.type, first.price_per_hour
    if any(c[3].get("cloud") == "COMMUNITY" for c in candidates):
        display.echo(cloud.THIRD_PARTY_HOST)
    if not gpu:  # what the named type costs, from the provider's own offers, in the question
        price = typed_price(mesh, mesh_vars, provider, kind, options.get("cloud"))
    cost = f" at ${price:.2f}/h" if price is not None else " (its price: not listed by the provider)"
    more = f" (or the next of {len(candidates)} offers if it cannot be rented)" if len(candidates) > 1 else ""
    confirm(f"rent a {kind} at {cloud.capabilities(provider).title}{cost}{more} as {name}? It bills until it is "
            "stopped or deleted", yes)  # fmt: skip
    display.echo(f"launching {kind} at {provider} as {name} ...")
    offer, inst = cloud.launch_first(mesh, mesh_vars, candidates, name, say=display.echo)
    if offer is not None and offer is not candidates[0][0]:
        provider, kind = offer.provider, offer.type
        display.echo(f"rented {offer.gpus} x {offer.gpu} at {provider} ({offer.cloud or kind}), "
                     f"${offer.price_per_hour:.2f}/h")  # fmt: skip
    display.echo(f"{provider} instance {inst['id']} runs at {inst['ssh_host']}:{inst['ssh_port']}; waiting for SSH")
    cloud.wait_for_ssh(inst["ssh_host"], inst["ssh_port"], cloud.LAUNCH_TIMEOUT)
    target = f"{provider}:{inst['id']}"
    try:
        with mesh.lock(f"launch {name}", wait=wait):
            nodes, mesh_vars = mesh.load()
            plan = add.plan_add(mesh, nodes, target, name, None, ssh_key, None, mesh_vars)
            display.preflight_table(plan.report)
            add.add_node(mesh, nodes, mesh_vars, plan, runner.Progress(), verbosity=verbosity)
    except MeshctlError as exc:
        exc.hint = (exc.hint + "; " if exc.hint else "") + (
            f"the instance {target} runs and bills: `meshctl add-node {target} --name {name}` retries, "
            f"`meshctl machines` shows it"
        )
        raise
    display.echo(f"{name} is active; `meshctl status` shows the mesh")


def offer_options(offer, options: dict, region: str | None) -> dict:
    """The launch options for OFFER: the user's, with its GPU count, cloud and REGION (else, where the
    provider needs one, its first region with capacity)."""
    chosen = dict(options, gpus=offer.gpus)
    if offer.cloud:
        chosen["cloud"] = offer.cloud
    if region:
        chosen["region"] = region
    elif offer.regions and "region" in cloud.capabilities(offer.provider).launch_needs:
        chosen["region"] = offer.regions[0]
    return chosen


def check_launch_options(provider: str, options: dict, ssh_key) -> None:
    """What PROVIDER's launch needs, there before anything is rented (OPTIONS is completed in place)."""
    can = cloud.capabilities(provider)
    if can.pod and ssh_key:  # the pod's image authorizes the key given as PUBLIC_KEY
        public = Path(ssh_key + ".pub")
        if not public.is_file():
            raise UsageError(f"{public} is missing", hint=f"{can.title} needs the public half of --ssh-key beside it")
        options["public_key"] = public.read_text().strip()
    missing = [need for need in can.launch_needs if not options.get(need)]
    if missing:
        flags = ", ".join(FLAGS.get(need, need) for need in missing)
        raise UsageError(f"a {can.title} launch needs {flags}", hint="`meshctl launch --help` says what each is")


def typed_price(mesh, mesh_vars, provider, kind, cloud_type=None):
    """What PROVIDER's offers say a KIND costs an hour (in CLOUD_TYPE, Runpod's Secure Cloud unless
    told: a launch's default), or None (not listed, or no answer)."""
    rows, _problems = cloud.offers(mesh, mesh_vars, None, None, provider)
    wanted = cloud_type or "SECURE"
    prices = [r.price_per_hour for r in rows
              if r.type == kind and r.price_per_hour is not None and r.cloud in ("", wanted)]  # fmt: skip
    return min(prices) if prices else None
