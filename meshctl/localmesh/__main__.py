"""Test-bed helper used by the Makefile: ``python -m meshctl.localmesh engine|images|up|down``."""

from __future__ import annotations

import sys

import click

from meshctl.errors import MeshctlError
from meshctl.localmesh import cache, engine, images, nodes, ready, wheels


@click.group()
def main() -> None:
    """Local Docker mesh for the demo and the tests."""


@main.command("engine")
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for the engine.")
def engine_cmd(timeout: float) -> None:
    """Make a Docker engine answer (install and start it when needed)."""
    engine.ensure(timeout=timeout)


@main.command("cache")
@click.option("--stop", is_flag=True, help="Stop the cache this command started.")
def cache_cmd(stop: bool) -> None:
    """Serve the nodes Debian's packages from this machine (apt-cacher-ng on port 3142)."""
    if stop:
        cache.stop()
        return
    cache.ensure(images.spec_for("bookworm").mirror)
    click.echo(f"package cache: {cache.usage()} held in {cache.CACHE_DIR}")
    click.echo(cache.summary())


@main.command("wheels")
@click.option(
    "--background",
    "log",
    type=click.Path(dir_okay=False),
    default=None,
    help="Fill and serve in a process of its own, logging to this file, and return at once.",
)
@click.option(
    "--env",
    "show_env",
    is_flag=True,
    help="Print the pip environment a test bed gives its nodes (JSON): the CA bundle, and the "
    "cache's settings when it is ready.",
)
@click.option("--stop", is_flag=True, help="Stop the server this command started.")
@click.option(
    "--wait",
    "wait_seconds",
    type=float,
    default=None,
    help="Wait up to this many seconds for the cache a background fill is making, then return.",
)
def wheels_cmd(log: str | None, show_env: bool, stop: bool, wait_seconds: float | None) -> None:
    """Serve the nodes the Python packages the roles install from this machine (port 3144)."""
    import json
    from pathlib import Path

    if stop:
        wheels.stop()
    elif wait_seconds is not None:
        wheels.wait_ready(wait_seconds)
    elif show_env:
        click.echo(json.dumps(wheels.bed_pip_environment()))
    elif log:
        wheels.start_in_background(Path(log))
        click.echo(f"wheel cache: filling and serving in the background (log: {log})")
    else:
        wheels.ensure()


@main.command("images")
@click.option("--suite", "suites", multiple=True, default=tuple(images.SUITES), show_default=True)
def images_cmd(suites: tuple[str, ...]) -> None:
    """Build the node images (cached by the hash of their inputs)."""
    for suite in suites:
        images.build(suite)


@main.command("ready")
@click.option("--suite", "suites", multiple=True, default=ready.SUITES, show_default=True)
def ready_cmd(suites: tuple[str, ...]) -> None:
    """Build the ready images: a node image with what the roles install (test beds' nodes skip it)."""
    wheels.fill()
    for suite in suites:
        ready.build(suite)


@main.command("up")
@click.option("--suite", default="bookworm", show_default=True)
def up_cmd(suite: str) -> None:
    """Start head, gpu1 and cpu1 as systemd containers."""
    nodes.up(suite)


@main.command("authorize")
@click.option("--key", "key", required=True, type=click.Path(exists=True, dir_okay=False), help="Public key file.")
@click.option("--user", default="root", show_default=True)
@click.argument("names", nargs=-1, required=True)
def authorize_cmd(key: str, user: str, names: tuple[str, ...]) -> None:
    """Add a public key to the nodes' authorized_keys (once)."""
    from pathlib import Path

    public = Path(key).read_text().strip()
    for name in names:
        nodes.authorize(name, public, user=user)
        click.echo(f"node {name}: key authorized for {user}")


@main.command("vm-files")
@click.argument("name")
@click.option("--forget", is_flag=True, help="Remove the node's files instead.")
def vm_files_cmd(name: str, forget: bool) -> None:
    """Write NAME's /etc/hosts and resolv.conf as a fresh cloud VM's; print their `docker run`
    mounts as JSON (Molecule's create.yml)."""
    import json

    if forget:
        nodes.forget_vm_files(name)
        return
    args = nodes.vm_file_args(name)
    click.echo(json.dumps([args[i + 1] for i in range(0, len(args), 2)]))


@main.command("down")
def down_cmd() -> None:
    """Remove the local mesh containers and network."""
    nodes.down()


if __name__ == "__main__":
    try:
        main(standalone_mode=False)
    except MeshctlError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
