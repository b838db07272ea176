"""Options shared by several commands, defined once."""

from __future__ import annotations

import click

from meshctl.model import PROVIDERS

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
verbose_option = click.option("-v", "--verbose", "verbosity", count=True, help="Pass -v to Ansible (repeatable).")


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
    type=click.Choice(PROVIDERS),
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
