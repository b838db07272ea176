"""`meshctl relaunch-node`, run by the head's relaunch service (root): each node meshctl-power resume
asked for in the spool gets a machine (``meshctl.ops.machine``): launched again (a node whose
provider cannot stop it) or, a burst pool's, rented, and set up; one that fails is marked DOWN with
the reason and the others go on. ``reap`` is the service's ExecStopPost: what a rent cut short made
is terminated."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path

from meshctl import burst as pooled
from meshctl import core
from meshctl.errors import MeshctlError
from meshctl.model import NAME_RE, check_name
from meshctl.ops import burst, machine, relaunch, work

MAX_REQUESTS = 64  # requests served a round (more nodes than a mesh holds); the rest removed unserved


def reap(mesh_dir: str | None, spool: Path, cooldown: int, say: Callable[[str], None],
         warn: Callable[[str], None]) -> list[str]:  # fmt: skip
    """What a rent cut short left, terminated; each such node's jobs told, the node marked DOWN,
    powered down and offered again after COOLDOWN seconds. Returns those nodes."""
    reaped = machine.reap(work.find(mesh_dir), say=say)
    for name in reaped:
        warn(f"{name}: its rent was cut short; what it made is terminated")
        remove_request(spool / name, warn)  # else the path unit would start the service on it again
        if NAME_RE.match(name):
            with contextlib.suppress(OSError):
                burst.note_jobs(name, "the head's rent of a machine for it was cut short")
                relaunch.mark_down(name, "the head's rent of a machine for it was cut short")
                burst.power_down(name)
                burst.retry_later(name, cooldown)
    return reaped


def serve(mesh_dir: str | None, spool: Path, state: Path, key_file: Path, authorized: Path | None, cooldown: int,
          say: Callable[[str], None], warn: Callable[[str], None]) -> list[str]:  # fmt: skip
    """Every request in SPOOL served, and removed; returns the nodes that failed. At most
    MAX_REQUESTS a round: the spool is the slurm user's to write, and each request costs a launch or
    at least one scontrol; what is over is removed unserved and said in one line."""
    mesh = work.find(mesh_dir)
    failed = []
    refused: list[str] = []
    for count, request in enumerate(sorted(spool.iterdir()) if spool.is_dir() else []):
        name, is_pool = request.name, False
        if count >= MAX_REQUESTS:
            refused.append(name)
            remove_request(request, warn)
            continue
        try:
            if request.is_symlink() or not request.is_file():
                failed.append(name)
                warn(f"{name}: FAILED: not a request (the spool holds plain files only); removed")
                continue
            check_name(name)
            is_pool = pooled.pool_of(mesh.load()[1], name) is not None
            public = authorized / f"{name}.pub" if authorized else None
            if is_pool:
                machine.rent(mesh, name, key_file, public, say=say, ended=state / core.mesh_watch.ENDED)
                continue
            machine.relaunch(mesh, name, state / f"{name}.json", key_file, public, say=say)
            say(f"{name}: launched again and set up; its slurmd registers by itself")
        except Exception as exc:  # one node's failure is said, and the others go on
            failed.append(name)
            message = exc.message if isinstance(exc, MeshctlError) else f"{type(exc).__name__}: {exc}"
            hint = exc.hint if isinstance(exc, MeshctlError) else ""
            warn(f"{name}: FAILED: {message} ({hint})" if hint else f"{name}: FAILED: {message}")
            if NAME_RE.match(name):
                with contextlib.suppress(OSError):  # no scontrol here: said above all the same
                    if is_pool:
                        burst.note_jobs(name, f"no machine could be rented: {message}")
                        relaunch.mark_down(name, f"the head could not rent a machine for it: {message}")
                        burst.power_down(name)
                        burst.retry_later(name, cooldown)
                    else:
                        relaunch.mark_down(name, f"the head could not launch it again: {message}")
        finally:
            remove_request(request, warn)
    if refused:
        shown = ", ".join(n[:40] for n in refused[:5]) + (", ..." if len(refused) > 5 else "")
        warn(f"{len(refused)} more request(s) refused and removed unserved ({shown}): the service serves at most "
             f"{MAX_REQUESTS} a round; a node Slurm still wants is asked for again by its resume")  # fmt: skip
        failed += refused
    return failed


def remove_request(request: Path, warn: Callable[[str], None]) -> None:
    """The request gone, whatever it is: one left behind would start the service again forever (its
    path unit starts it while the spool is not empty). A folder goes whole, its links unfollowed."""
    try:
        if request.is_dir() and not request.is_symlink():
            shutil.rmtree(request)
        else:
            request.unlink(missing_ok=True)
    except OSError as exc:
        warn(f"{request.name}: could not be removed from the spool ({exc})")
