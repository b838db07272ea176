"""What a command ends with: one outcome each, its exit code, its words and its fix, in one table.

Every command ends in exactly one of ``OUTCOMES``. A success is code 0; every other outcome is one
:class:`MeshctlError` subclass whose ``exit_code`` is read from the table, and the CLI
(``meshctl.cli``) renders it one way: the error's words, then ``fix:`` and what to do. README.md's
"Exit codes" table is this table (tests/unit/meshctl/test_outcomes.py holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    code: int
    name: str  # the outcome's one word (done, refused, failed, partial, provider, busy, interrupted)
    meaning: str  # what the README says of it
    fix: str  # what to do, when the error itself names nothing better


OUTCOMES: tuple[Outcome, ...] = (
    Outcome(0, "done", "done, or nothing to do (the command says which)", ""),
    Outcome(
        1,
        "failed",
        "failed: something meshctl checks is not right (`status`: a node is unhealthy)",
        "each line says what to do",
    ),
    Outcome(
        2,
        "refused",
        "refused: bad arguments or unreadable input; nothing changed",
        "correct the command line or the file named",
    ),
    Outcome(
        3,
        "refused",
        "refused: the mesh folder, its inventory or a setting is missing, corrupt, "
        "misspelt or of the wrong type; nothing changed",
        "edit the file and line named",
    ),
    Outcome(
        4,
        "refused",
        "refused: a preflight check failed before anything changed",
        "fix the machine as said, then run the command again",
    ),
    Outcome(
        5,
        "failed",
        "failed: an Ansible run failed on a node that answered",
        "fix the problem shown (the run's whole output is in `logs/`) and run the command again",
    ),
    Outcome(
        6,
        "refused",
        "refused: this machine lacks something meshctl needs (Docker engine, debootstrap, ...)",
        "install what is named",
    ),
    Outcome(
        7,
        "partial",
        "unreachable: a node or the head did not answer; done on every node that did, "
        "and the others are listed with what to do",
        "start them and run the command again",
    ),
    Outcome(
        8,
        "provider",
        "provider: a provider's API (Lambda, Runpod, Paperspace) refused a call, failed, or could not be reached",
        "as the error says: the key, the network, or later",
    ),
    Outcome(
        9,
        "busy",
        "busy: another meshctl run holds the mesh (the error says which, where and since when; `--wait SECONDS`)",
        "wait for it, or pass `--wait SECONDS`",
    ),
    Outcome(
        130,
        "interrupted",
        "interrupted: Ctrl+C or a signal (128 + its number: SIGTERM 143, SIGHUP "
        "129); the error says where tasks had run; nothing is recorded as done that was not",
        "nothing is recorded as done that was not (a node being added stays pending); run the command again to finish",
    ),
)


def outcome(code: int) -> Outcome:
    """The table's row for CODE (an interruption by any signal is the interrupted row)."""
    for row in OUTCOMES:
        if row.code == code:
            return row
    if code > 128:
        return outcome(130)
    raise KeyError(code)


def _code(name: str, first: int = 0) -> int:
    """The exit code of the table's outcome NAME (the first row at or after FIRST)."""
    return next(row.code for row in OUTCOMES if row.name == name and row.code >= first)


class MeshctlError(Exception):
    """An error the user can act on. ``hint`` says what to do about it."""

    exit_code = _code("failed")

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  fix: {self.hint}"
        return self.message


class UsageError(MeshctlError):
    """Bad arguments or bad input files."""

    exit_code = _code("refused")


class InventoryError(MeshctlError):
    """The mesh directory or its inventory is missing, corrupt or inconsistent."""

    exit_code = _code("refused", 3)


class PreflightError(MeshctlError):
    """A node failed a check before anything was changed on it."""

    exit_code = _code("refused", 4)


class PlaybookError(MeshctlError):
    """An Ansible run failed on one or more hosts."""

    exit_code = _code("failed", 5)


class Busy(MeshctlError):
    """Another meshctl run holds the mesh (its lock): who, which command, since when."""

    exit_code = _code("busy")


class Interrupted(KeyboardInterrupt):
    """The user stopped a run (Ctrl+C, or a signal): what had run is said, and how to go on.

    Not a MeshctlError: no ``except MeshctlError`` that goes on past a failure may go on past an
    interruption. The exit code is 128 + the signal's number (130 for Ctrl+C); the CLI renders it
    as it renders an error (its words, then ``fix:``)."""

    exit_code = _code("interrupted")

    def __init__(self, message: str, hint: str | None = None, signum: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or outcome(130).fix
        self.signum = signum
        self.exit_code = 128 + signum

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.hint}"


class PartialError(MeshctlError):
    """The change was made on every node that could be reached; some (or the head) could not."""

    exit_code = _code("partial")

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        unreachable: dict[str, str] | None = None,
        todo: str = "",
        todos: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.unreachable = unreachable or {}  # node -> what happened
        self.todo = todo  # what to do about one of them; ``{node}`` names it
        self.todos = todos or {}  # node -> what to do, where it differs from ``todo``

    def todo_for(self, node: str) -> str:
        return self.todos.get(node) or self.todo.format(node=node)


# The words and the fix for nodes that did not answer: one place, every command (PartialError).
UNREACHABLE_WORDS = "{count} node(s) could not be reached: {names}"
UNREACHABLE_FIX = "start them (they rejoin Slurm by themselves) and run `{again}` again, or take one out with " \
    "`meshctl remove-node NODE --force`"  # fmt: skip
UNREACHABLE_TODO = (
    "start it (or check `ssh` reaches it), then run `{again}` again; or `meshctl remove-node {{node}} --force`"
)

UNREACHABLE_HEAD_TODO = "start it (or check `ssh` reaches it): every node waits for it; then run `{again}` again"


def unreachable(done: str, rows: dict[str, str], again: str, todos: dict[str, str] | None = None,
                head: str | None = None) -> PartialError:  # fmt: skip
    """The one 'could not be reached' outcome (exit 7): DONE (what was done, or what was not, when
    the head itself did not answer) and ROWS (node -> what SSH said)."""
    names = ", ".join(rows)
    said = UNREACHABLE_WORDS.format(count=len(rows), names=names)
    todos = dict(todos or {})
    if head is not None and head in rows:
        said += f" (the head, {head}, among them)"
        todos.setdefault(head, UNREACHABLE_HEAD_TODO.format(again=again))
    return PartialError(
        f"{done}; {said}" if done else said,
        hint=UNREACHABLE_FIX.format(again=again),
        unreachable=rows,
        todo=UNREACHABLE_TODO.format(again=again),
        todos=todos,
    )


class EnvironmentProblem(MeshctlError):
    """The machine meshctl runs on lacks something (Docker engine, debootstrap, ...)."""

    exit_code = _code("refused", 6)


class ProviderError(MeshctlError):
    """A provider's API (Lambda, Runpod, Paperspace) refused or failed a call."""

    exit_code = _code("provider")


class ProviderUnreachable(ProviderError):
    """A provider's API could not be reached at all (DNS, connection, TLS, timeout): the network,
    never "no offer"."""


class ParseError(UsageError):
    """A command output could not be understood."""
