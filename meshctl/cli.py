"""meshctl's command line: parse arguments, call the library, print results.

Every user-facing failure is a :class:`meshctl.errors.MeshctlError`; ``main`` turns it
into one message on stderr and the error's exit code. ``--debug`` shows the traceback.
"""

from __future__ import annotations

import sys

import click

from meshctl import __version__
from meshctl.errors import MeshctlError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="meshctl")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Turn machines you can SSH into into one Slurm GPU cluster over Tailscale."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _register() -> None:
    from meshctl import commands  # noqa: F401 - commands register here as they land


_register()


def main(argv: list[str] | None = None) -> None:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="meshctl", standalone_mode=False)
    except MeshctlError as exc:
        if debug:
            raise
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
