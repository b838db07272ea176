"""meshctl rotate-authkey: store a new Tailscale auth key and move every node to it."""

from __future__ import annotations

import sys

import click

from meshctl import display, runner
from meshctl.ops import rotate_authkey, work
from meshctl.options import mesh_option, verbose_option, wait_option


@click.command("rotate-authkey")
@click.option(
    "--key-file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="File holding the new key ('-' reads standard input). Without it meshctl asks, hiding what you type.",
)
@click.option("--stored", is_flag=True, help="Push the key already in secrets/ again (finish an earlier rotation).")
@click.option("--force", is_flag=True, help="Log every node in again, even Running ones (drops connections briefly).")
@mesh_option
@wait_option
@verbose_option
def command(key_file, stored, force, mesh_dir, wait, verbosity) -> None:
    """Replace the mesh's auth key and re-authenticate the nodes that need it, one at a time.

    Only nodes that are not Running, whose node key expired, or all with --force, log in again;
    every node gets the new key for its next start. Exit 0 only when every node is on it.
    """
    if stored and key_file:
        raise click.UsageError("--stored and --key-file exclude each other")
    asker = None
    if not stored and sys.stdin.isatty():
        asker = lambda: click.prompt("New Tailscale auth key", hide_input=True)  # noqa: E731
    with work.changing(mesh_dir, "rotate-authkey", wait) as w:
        rows = rotate_authkey.rotate_key(w, key_file, stored, asker, runner.Progress(), force=force,
                                         verbosity=verbosity, say=display.echo)  # fmt: skip
    display.table(
        "Auth key rotation",
        ["node", "before", "after", "action", "result"],
        [[r.node, r.before, r.after, r.action, r.result] for r in rows],
    )
    rotate_authkey.require_rotated(rows)
    display.echo(f"all {len(rows)} nodes are on the new key")
