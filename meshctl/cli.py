"""meshctl's command line: parse arguments, call the library, print results.

Every user-facing failure is a :class:`meshctl.errors.MeshctlError`; ``main`` turns it
into one message on stderr and the error's exit code. ``--debug`` shows the traceback.
"""

from __future__ import annotations

import importlib
import os

import click

from meshctl import __version__, display, interrupt
from meshctl.errors import Interrupted, MeshctlError, PartialError

# Each command is one module of meshctl.commands, imported when it is run (or listed): `meshctl
# status` does not pay for what add-node imports.
COMMANDS = {
    "init": "init",
    "add-node": "add_node",
    "apply": "apply",
    "status": "status",
    "remove-node": "remove_node",
    "rotate-authkey": "rotate_authkey",
    "rotate-munge-key": "rotate_munge_key",
    "render-node": "render_node",
    "forget-host-key": "forget_host_key",
    "provider": "provider",
    "machines": "machines",
    "launch": "launch",
    "offers": "offers",
    "usage": "usage",
    "check": "check",
    "autostop": "autostop",
    "burst": "burst",
    "doctor": "doctor",
    "relaunch-node": "relaunch_node",  # hidden: the head's relaunch service runs it (role power_save)
    "offer-again": "offer_again",  # hidden: a pool node's retry timer on the head runs it
}
HIDDEN = frozenset({"relaunch-node", "offer-again"})  # run by the head's services, never suggested


class MeshctlGroup(click.Group):
    """Turns a MeshctlError into one line on stderr and the error's exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        return importlib.import_module(f"meshctl.commands.{module}").command if module else None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """click's, keeping the command line as given (``ctx.meta["argv"]``): an error's fix names the
        command to run again with its arguments (runner.again)."""
        ctx.meta["argv"] = [click.utils.make_str(a) for a in args]
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """click's, with the command a mistyped name is closest to (`statsu`: did you mean status?)."""
        name = click.utils.make_str(args[0]) if args else ""
        if args and name not in COMMANDS and not name.startswith("-") and not ctx.resilient_parsing:
            import difflib

            public = [c for c in COMMANDS if c not in HIDDEN]
            close = difflib.get_close_matches(name, public, n=1, cutoff=0.6)
            hint = f" Did you mean `meshctl {close[0]}`?" if close else " `meshctl --help` lists the commands."
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except MeshctlError as exc:
            if ctx.obj and ctx.obj.get("debug"):  # the traceback too; the exit code stays the outcome's
                import traceback

                traceback.print_exc()
            render(exc)
            ctx.exit(exc.exit_code)
        except Interrupted as exc:  # a signal: said as an outcome, never as a traceback or click's "Aborted!"
            render(exc)
            ctx.exit(exc.exit_code)


def render(exc: MeshctlError | Interrupted) -> None:
    """Every outcome but success said one way: the nodes not reached (a table), then `error:` with
    the words and `fix:` with what to do."""
    if isinstance(exc, PartialError) and exc.unreachable:
        rows = [[name, said, exc.todo_for(name)] for name, said in exc.unreachable.items()]
        display.table("Not reached", ["node", "what happened", "what to do"], rows)
    display.echo(f"error: {exc}", err=True)


@click.group(cls=MeshctlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="meshctl")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
@click.option("--mesh", "mesh_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Mesh directory, before the command as after it (a command's own --mesh wins).")  # fmt: skip
@click.option("-v", "--verbose", "verbosity", count=True,
              help="Pass -v to Ansible (repeatable), before the command as after it.")  # fmt: skip
@click.pass_context
def cli(ctx: click.Context, debug: bool, mesh_dir: str | None, verbosity: int) -> None:
    """Turn machines you can SSH into into one Slurm GPU cluster over Tailscale."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["verbosity"] = verbosity
    ctx.obj["mesh_dir"] = mesh_dir  # init's folder when it names none
    if mesh_dir:  # what every command's --mesh falls back to (its MESHCTL_MESH)
        import os

        os.environ["MESHCTL_MESH"] = mesh_dir


def main() -> None:
    """Entry point: click's own parsing; every outcome ends here with its exit code (errors.OUTCOMES).

    Ctrl+C, SIGTERM and SIGHUP at any moment end the command as interrupted (128 + the signal),
    with where tasks had run when it was inside an Ansible run, and never a word of success.
    """
    interrupt.install()
    # Nothing meshctl or what it starts (ssh's known_hosts, a log, a recorded fact) makes in the
    # mesh folder is writable by others, whatever the user's umask (002 is common): the folder's
    # own check (mesh.check_ownership) would refuse it.
    os.umask(os.umask(0) | 0o022)
    try:
        result = cli.main(prog_name="meshctl", standalone_mode=False)
    except (KeyboardInterrupt, click.exceptions.Abort) as exc:
        # click turns a KeyboardInterrupt into Abort; the Interrupted behind it says what had run.
        stopped = next((e for e in (exc, exc.__cause__, exc.__context__) if isinstance(e, Interrupted)), None)
        stopped = stopped or interrupt.stopped()
        render(stopped)
        raise SystemExit(stopped.exit_code) from None
    except click.exceptions.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except click.ClickException as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None
    except Exception as exc:  # a signal Python wrapped in another exception (interrupt.found_in) is interrupted too
        stopped = interrupt.found_in(exc)
        if stopped is None:
            raise
        render(stopped)
        raise SystemExit(stopped.exit_code) from None
    # Without standalone mode click returns an Exit's code (MeshctlGroup uses ctx.exit) instead of raising.
    raise SystemExit(result if isinstance(result, int) else 0)
