"""Ctrl+C, SIGTERM and SIGHUP: one way to stop, at any moment of any command.

``install`` (meshctl's entry point) makes each of the three signals record itself and raise
:class:`meshctl.errors.Interrupted`, wherever the command is: before SSH, while connecting, while
writing (the store's writes are atomic). Inside an Ansible run (``deferred``) the signal is
recorded and ansible-playbook asked to stop at once (SIGTERM, which Ansible passes on to every
worker's process group; ansible-runner polls its cancel callback, ``cancel_requested``, only every
few seconds, and kills what is left ``GRACE`` seconds after the signal), and the runner then raises
Interrupted with where tasks had run, so that no result of a stopped run is read as an answer.
ansible-runner's own handlers (which only flag a cancel, and stay installed after the run: a later
Ctrl+C would do nothing) are never set.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from meshctl.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NAMES = {signal.SIGINT: "Ctrl+C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP (the terminal closed)"}
GRACE = 10.0  # seconds ansible-playbook has to stop its workers before ansible-runner kills its group

_received: int | None = None  # the first signal of this process
_deferring = 0  # > 0 inside ``deferred``
_asked_at: float | None = None  # when the run's processes were asked to stop


def install() -> None:
    """Every stopping signal raises Interrupted (or, inside ``deferred``, is recorded)."""
    global _received, _asked_at
    _received, _asked_at = None, None
    for number in SIGNALS:
        signal.signal(number, _handler)


def _handler(number: int, _frame) -> None:
    global _received
    if _received is None:
        _received = number
    if _deferring:  # the run in progress is asked to stop now, not at ansible-runner's next poll
        _ask_children()
        return
    raise stopped()


def received() -> int | None:
    """The signal that stopped this command, if one did."""
    return _received


def said(number: int | None = None) -> str:
    number = number or _received or signal.SIGINT
    return NAMES.get(signal.Signals(number), signal.Signals(number).name)


def stopped(where: str = "", hint: str | None = None) -> Interrupted:
    """The Interrupted outcome for the signal received (Ctrl+C when none was: a KeyboardInterrupt)."""
    number = _received or signal.SIGINT
    return Interrupted(f"interrupted ({said(number)}){where}", hint=hint, signum=int(number))


def found_in(exc: BaseException | None) -> Interrupted | None:
    """The Interrupted behind EXC, if one is: EXC itself, or what it was raised from or during. Python
    wraps an exception raised while a class body's attributes are named (a dataclass's fields, as a
    module loads: 3.11 raises RuntimeError "Error calling __set_name__" from it), so a signal that
    lands there arrives as another exception."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, Interrupted):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


@contextmanager
def deferred() -> Iterator[None]:
    """Within, a signal is recorded, not raised: the Ansible run in progress is stopped through its
    cancel callback and its caller raises Interrupted once it has ended."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1


def _children(pid: int) -> list[int]:
    """PID's child processes (Linux: /proc; elsewhere none are known and ansible-runner kills the group)."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(p) for p in (task / "children").read_text().split()]
    except OSError:
        return []
    return found


def cancel_requested() -> bool:
    """ansible-runner's cancel callback: False while no signal came; then ansible-playbook is asked to
    stop (SIGTERM: Ansible ends its workers' process groups and itself), and True (kill what is
    left) once GRACE seconds have passed without it ending."""
    if _received is None:
        return False
    if _asked_at is None:
        _ask_children()
        return False
    return time.monotonic() - _asked_at > GRACE


def _ask_children() -> None:
    """SIGTERM to this process's children (ansible-playbook): Ansible ends its workers' process
    groups and itself at once. Once per command."""
    global _asked_at
    if _asked_at is not None:
        return
    _asked_at = time.monotonic()
    for child in _children(os.getpid()):
        with contextlib.suppress(OSError):  # gone already
            os.kill(child, signal.SIGTERM)


def raise_if_received(where: str = "", hint: str | None = None) -> None:
    """Raise Interrupted when a signal came (during a run that was deferring it)."""
    if _received is not None:
        raise stopped(where, hint)
