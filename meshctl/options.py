"""Options shared by several commands, defined once."""

from __future__ import annotations

import click

from meshctl.model import NODE_PROVIDERS

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
mesh_option = click.option(
    "--mesh",
    "mesh_dir",
    envvar="MESHCTL_MESH",
    type=click.Path(file_okay=False),
    help="Mesh directory (default: $MESHCTL_MESH, else the current directory or a parent).",
)
wait_option = click.option(
    "--wait", "wait", type=click.FloatRange(min=0), default=0, show_default=True,
    help="Seconds to wait when another meshctl run holds the mesh.",
)  # fmt: skip


def _verbosity(ctx: click.Context, _param: click.Parameter, value: int) -> int:
    """The command's -v count plus the group's (`meshctl -v status` as `meshctl status -v`)."""
    root = ctx.find_root()
    return int(value or 0) + int(((root.obj or {}) if root is not None else {}).get("verbosity", 0))


verbose_option = click.option("-v", "--verbose", "verbosity", count=True, callback=_verbosity,
                              help="Pass -v to Ansible (repeatable).")  # fmt: skip
# The same flag on a command that runs no Ansible: taken as everywhere else, so that `-v` is never refused.
quiet_verbose_option = click.option("-v", "--verbose", count=True, expose_value=False,
                                    help="Accepted as by every command (this one runs no Ansible).")  # fmt: skip


def _group_mesh(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:  # what the subcommand's --mesh falls back to (its MESHCTL_MESH), as the top level does
        import os

        os.environ["MESHCTL_MESH"] = value


# --mesh on a group of commands (`meshctl provider --mesh DIR list`), as before or after the subcommand.
group_mesh_option = click.option("--mesh", type=click.Path(file_okay=False), metavar="DIR", expose_value=False,
                                 callback=_group_mesh,
                                 help="Mesh directory (before the subcommand as after it).")  # fmt: skip


def _private_key(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--ssh-key is the private half: a public key (``id.pub``, ``ssh-ed25519 AAAA...``) is refused naming the other."""
    if not value:
        return value
    head = ""
    try:
        with open(value, "rb") as handle:
            head = handle.read(64).decode(errors="replace")
    except OSError:
        pass
    if value.endswith(".pub") or head.startswith(("ssh-", "ecdsa-", "sk-")):
        private = value.removesuffix(".pub")
        raise click.BadParameter(f"{value} is a public key; --ssh-key takes the private one ({private})", ctx, param)
    return value


ssh_key_option = click.option(
    "--ssh-key",
    type=click.Path(dir_okay=False),
    callback=_private_key,
    help="Private key for SSH (default: your ssh agent and config).",
)
provider_option = click.option(
    "--provider",
    type=click.Choice(NODE_PROVIDERS),
    help="Where the machine runs (default: detected from the machine).",
)
mesh_address_option = click.option(
    "--mesh-address", "address", help="The node's mesh IPv4, when it is not its SSH address (before Tailscale)."
)
yes_option = click.option("-y", "--yes", is_flag=True, help="Do it without asking (what it costs is still printed).")


def confirm(question: str, yes: bool) -> None:
    """Ask QUESTION (y/N) unless YES; without a terminal to ask on, refuse and say how to skip it."""
    import sys

    from meshctl.errors import UsageError

    if yes:
        return
    if not sys.stdin or not sys.stdin.isatty():
        raise UsageError(f"{question} (no terminal to ask on)", hint="pass -y to go ahead without asking")
    if not click.confirm(question, default=False):
        click.echo("nothing was done: you said no")  # a choice, not an error: exit 0
        raise click.exceptions.Exit(0)


def own_launch_option(owner: str, option: dict, also: str = "") -> click.Option:
    """One of a provider's own launch options (its module's LAUNCH_OPTIONS: key, flag, help,
    multiple, choices) as a click option, marked as OWNER's (``launch NAME --help`` lists NAME's);
    ALSO is added to its help."""
    made = click.Option(
        [option["flag"], option["key"]],
        multiple=option["multiple"],
        type=click.Choice(option["choices"], case_sensitive=False) if option["choices"] else None,
        help=option["help"] + also,
    )
    made.provider = owner
    return made
