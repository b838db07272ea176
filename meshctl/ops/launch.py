"""`meshctl launch`: rent a machine through its provider's API and add it to the mesh.

Two steps, so the command line can ask in between: ``plan`` chooses what to rent (a named type,
or the available offers of a GPU, cheapest first, one candidate per region where a launch names
one), checks what each provider's launch needs and says what it left out; ``launch`` tries the
candidates in order (``cloud.launch_first``: a create refused for that offer only moves on, never
two machines for one request), waits for the machine's SSH and adds it as ``add-node`` does. A
machine that runs but could not be added is said with how to retry: it bills.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from meshctl import cloud, runner
from meshctl.errors import MeshctlError, ProviderError, UsageError
from meshctl.model import check_name
from meshctl.ops import add, work
from meshctl.ops.work import Work

FLAGS = cloud.launch_flags()  # each launch key's --flag: the common ones and every provider's own


@dataclass
class Request:
    """What the user asked: a PROVIDER and a type (KIND), or a GPU (``H100:8``) from ONLY (a provider
    or "any") at most MAX_PRICE $/h; the node's NAME, the provider OPTIONS (region, ssh_key_names,
    template_id, image, cloud) and the SSH key to reach it with."""

    name: str
    provider: str | None = None
    kind: str | None = None
    gpu: str | None = None
    only: str = "any"
    max_price: float | None = None
    options: dict = field(default_factory=dict)
    ssh_key: str | None = None


@dataclass
class Plan:
    """The candidates in the order they are tried, ``(offer or None, provider, type, options)``, and
    the first one's provider, type and $/h (None: not listed)."""

    candidates: list
    provider: str
    kind: str
    price: float | None
    third_party: bool  # a candidate is on a host run by a third party (Runpod's Community Cloud)

    @property
    def title(self) -> str:
        """The first candidate's provider as its name is written (Lambda, Runpod, Paperspace)."""
        return cloud.capabilities(self.provider).title


PROVIDERS, CLOUDS, THIRD_PARTY_HOST = cloud.PROVIDERS, cloud.CLOUDS, cloud.THIRD_PARTY_HOST
PROVIDER_OPTIONS = cloud.launch_options()  # (provider, option): what each provider's launch takes of its own


def provider_options(given: dict, provider: str | None) -> dict:
    """The provider options GIVEN (``{key: value}``, None or () when not given) as launch options:
    a list where an option is given more than once, a choice as its provider writes it. With
    PROVIDER named, an option of another provider is refused, naming PROVIDER's."""
    chosen = {}
    for owner, option in PROVIDER_OPTIONS:
        value = given.get(option["key"])
        if value in (None, (), []):
            continue
        if provider and owner != provider and not any(o == provider and s["key"] == option["key"]
                                                      for o, s in PROVIDER_OPTIONS):  # fmt: skip
            own = [s["flag"] for o, s in PROVIDER_OPTIONS if o == provider]
            raise UsageError(f"{option['flag']} is {cloud.capabilities(owner).title}'s, not {provider}'s",
                             hint=f"{provider} takes {', '.join(own) or 'none of its own'} "
                             f"(`meshctl launch {provider} --help`)")  # fmt: skip
        if option["multiple"]:
            value = list(value)
        elif option["choices"]:
            value = next(c for c in option["choices"] if c.lower() == str(value).lower())
        chosen[option["key"]] = value
    return chosen


def new_request(
    name: str,
    provider: str | None,
    kind: str | None,
    gpu: str | None,
    only: str = "any",
    max_price: float | None = None,
    options: dict | None = None,
    ssh_key: str | None = None,
) -> Request:
    """The user's request, refused before anything is asked when it names no machine or two ways to
    choose one, or a node name that is not one."""
    check_name(name)
    if gpu and (provider or kind):
        raise UsageError("--gpu picks the provider and the type itself", hint="pass either --gpu or PROVIDER --type")
    if not gpu and not (provider and kind):
        raise UsageError("say what to rent", hint="`meshctl launch PROVIDER --type T --name N`, or "
                         "`meshctl launch --gpu H100:8 --name N` for the cheapest offer")  # fmt: skip
    return Request(name, provider, kind, gpu, only, max_price, options or {}, ssh_key)


def plan(w: Work, request: Request,
         say: Callable[[str], None], warn: Callable[[str], None]) -> Plan:  # fmt: skip
    """What to rent for REQUEST, every check done before anything is rented (SAY: what is chosen;
    WARN: a provider that could not be asked, a candidate left out and why)."""
    mesh, nodes, mesh_vars = w.mesh, w.nodes, w.mesh_vars
    name, provider, kind, gpu, options = request.name, request.provider, request.kind, request.gpu, request.options
    if any(n.name == name for n in nodes):
        raise UsageError(f"a node named {name} is already in the mesh", hint="pick another --name")
    accounts = cloud.configured(mesh)
    only = request.only
    if not accounts or (provider and provider not in accounts) or (gpu and only != "any" and only not in accounts):
        which = provider or (only if only != "any" else "|".join(cloud.PROVIDERS))
        raise UsageError(f"the mesh has no {which if which in cloud.PROVIDERS else 'provider'} account to rent from",
                         hint=f"`meshctl provider add {which} --key-file FILE` first, then run this again")  # fmt: skip
    price, candidates, first = None, [], None
    if gpu:
        wanted, count = cloud.parse_gpu(gpu)
        rows, problems = cloud.offers(mesh, mesh_vars, wanted, count or 1, None if only == "any" else only)
        for where, said in problems.items():
            warn(f"{where} could not be asked: {said}")
        # Every available offer at most --max-price, cheapest first: a create the provider refuses
        # for that offer only (no capacity, a pool the account cannot use) moves on to the next.
        most = request.max_price
        chosen = [o for o in rows if o.available and (most is None or o.price_per_hour <= most)]
        for offer in chosen:  # smaller than --cpus/--memory where it says its size: Slurm would drain it
            if too_small(offer, options):
                warn(f"left out {offer.provider} ({offer.type}): it has {too_small(offer, options)}")
        chosen = [o for o in chosen if not too_small(o, options)]
        if options.get("cloud"):  # --cloud (a pool's too): the offers of that cloud only
            chosen = [o for o in chosen if not o.cloud or o.cloud == options["cloud"]]
        if not chosen and problems:  # what could not be asked may have had it: never "no offer"
            raise ProviderError(f"no available offer of {gpu} from the providers that answered; "
                                + "; ".join(f"{p}: {m}" for p, m in problems.items()),
                                hint="check this machine's network and each account (`meshctl provider list`), "
                                "then run the command again")  # fmt: skip
        if not chosen:
            cheaper = cloud.cheapest(rows)
            raise UsageError(f"no available offer of {gpu}" + (f" at most ${most:.2f}/h" if most is not None
                             else "") + sized(options) + (f"; the cheapest is ${cheaper.price_per_hour:.2f}/h"
                             if cheaper and not sized(options) else ""),
                             hint="`meshctl offers --gpu " + gpu + " --all` lists what there is")  # fmt: skip
        region = options.get("region")
        for offer in chosen:  # one candidate per region with capacity, where a launch names one
            regions = (
                offer.regions if not region and "region" in cloud.capabilities(offer.provider).launch_needs else []
            )
            for where in regions or [None]:
                candidates.append((offer, offer.provider, offer.type, offer_options(offer, options, region or where)))
        first = chosen[0]
        provider, kind, price = first.provider, first.type, first.price_per_hour
        where = ", ".join(part for part in (kind, first.cloud, candidates[0][3].get("region")) if part)
        say(f"cheapest available {gpu}: {first.gpus} x {first.gpu} at {provider} ({where}), ${price:.2f}/h"
            + (f"; {len(chosen) - 1} more offer(s) up to ${chosen[-1].price_per_hour:.2f}/h if it cannot be "
               "rented" if len(chosen) > 1 else ""))  # fmt: skip
    else:
        candidates.append((None, provider, kind, dict(options)))
    ready, unready = [], []
    for candidate in candidates:  # an offer whose launch needs what was not given is left out, said why
        try:
            check_launch_options(candidate[1], candidate[3], request.ssh_key)
            ready.append(candidate)
        except UsageError as exc:
            unready.append(exc)
            warn(f"left out {candidate[1]} ({candidate[2]}): {exc.message} ({exc.hint})")
    if not ready:
        raise unready[0]
    if ready[0][0] is not None and ready[0][0] is not first:
        first = ready[0][0]
        provider, kind, price = first.provider, first.type, first.price_per_hour
    if not gpu:  # what the named type costs, from the provider's own offers (and its size, where they say)
        price = typed_price(mesh, mesh_vars, provider, kind, options.get("cloud"), options)
    return Plan(ready, provider, kind, price, any(c[3].get("cloud") == "COMMUNITY" for c in ready))


def launch(w: Work, chosen: Plan, request: Request, say: Callable[[str], None],
           wait: float = 0.0, verbosity: int = 0, preflight_table: Callable | None = None) -> str:  # fmt: skip
    """Rent the first candidate of CHOSEN that can be had, wait for its SSH and add it as node
    ``request.name`` (PREFLIGHT_TABLE shows the machine's preflight); returns the node's name."""
    name = request.name
    say(f"launching {chosen.kind} at {chosen.provider} as {name} ...")
    offer, inst = cloud.launch_first(w.mesh, w.mesh_vars, chosen.candidates, name, say=say)
    provider = chosen.provider
    if offer is not None and offer is not chosen.candidates[0][0]:
        provider = offer.provider
        say(f"rented {offer.gpus} x {offer.gpu} at {provider} ({offer.cloud or offer.type}), "
            f"${offer.price_per_hour:.2f}/h")  # fmt: skip
    say(f"{provider} instance {inst['id']} runs at {inst['ssh_host']}:{inst['ssh_port']}; waiting for SSH")
    cloud.wait_for_ssh(inst["ssh_host"], inst["ssh_port"], cloud.LAUNCH_TIMEOUT)
    target = f"{provider}:{inst['id']}"
    try:
        with work.changing(w.mesh, f"launch {name}", wait) as now:  # the mesh as it is now, locked
            added = add.plan_add(now, target, name, None, request.ssh_key, None)
            if preflight_table is not None:
                preflight_table(added.report)
            add.add_node(now, added, runner.Progress(), verbosity=verbosity)
    except MeshctlError as exc:
        exc.hint = (exc.hint + "; " if exc.hint else "") + (
            f"the instance {target} runs and bills: `meshctl add-node {target} --name {name}` retries, "
            f"`meshctl machines` shows it"
        )
        raise
    return name


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


def too_small(offer, options: dict) -> str:
    """What OFFER lacks of the ``cpus`` and ``memory_gb`` OPTIONS ask (``--cpus``, ``--memory``, a
    pool's size): '' when it has them or does not say its size (Runpod's placement filters take
    those: the client sends them)."""
    lacks = []
    if options.get("cpus") and offer.vcpus and offer.vcpus < options["cpus"]:
        lacks.append(f"{offer.vcpus:g} vCPUs ({options['cpus']} asked)")
    if options.get("memory_gb") and offer.memory_gb and offer.memory_gb < options["memory_gb"]:
        lacks.append(f"{offer.memory_gb:g} GB of memory ({options['memory_gb']:g} asked)")
    return " and ".join(lacks)


def sized(options: dict) -> str:
    """`` with at least 32 vCPUs and 200 GB of memory``, as OPTIONS ask, or ''."""
    parts = [f"{options['cpus']} vCPUs" if options.get("cpus") else "",
             f"{options['memory_gb']:g} GB of memory" if options.get("memory_gb") else ""]  # fmt: skip
    return f" with at least {' and '.join(p for p in parts if p)}" if any(parts) else ""


def typed_price(mesh, mesh_vars, provider, kind, cloud_type=None, options=None):
    """What PROVIDER's offers say a KIND costs an hour (in CLOUD_TYPE, Runpod's Secure Cloud unless
    told: a launch's default), or None (not listed, or no answer). A KIND whose offer says it has
    less than OPTIONS ask (``--cpus``, ``--memory``) is refused here, before anything is rented."""
    rows, problems = cloud.offers(mesh, mesh_vars, None, None, provider)
    if problems.get(provider):  # not asked is not "not listed": no price to confirm
        raise ProviderError(f"{provider}'s offers could not be read for the price of {kind}: {problems[provider]}")
    small = next((too_small(r, options or {}) for r in rows if r.type == kind and too_small(r, options or {})), "")
    if small:
        raise UsageError(f"{provider}'s {kind} has {small}",
                         hint="name a larger --type, or `meshctl launch --gpu GPU --cpus N --memory GB` for the "
                         "cheapest offer that has them")  # fmt: skip
    wanted = cloud_type or "SECURE"
    prices = [r.price_per_hour for r in rows
              if r.type == kind and r.price_per_hour is not None and r.cloud in ("", wanted)]  # fmt: skip
    return min(prices) if prices else None
