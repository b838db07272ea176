"""One error family for everything meshctl reports to a user.

Each class carries the process exit code the CLI uses for it; the codes are
documented in README.md ("Exit codes") and never reused for something else.
"""

from __future__ import annotations


class MeshctlError(Exception):
    """An error the user can act on. ``hint`` says what to do about it."""

    exit_code = 1

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

    exit_code = 2


class InventoryError(MeshctlError):
    """The mesh directory or its inventory is missing, corrupt or inconsistent."""

    exit_code = 3


class PreflightError(MeshctlError):
    """A node failed a check before anything was changed on it."""

    exit_code = 4


class PlaybookError(MeshctlError):
    """An Ansible run failed on one or more hosts."""

    exit_code = 5


class Busy(MeshctlError):
    """Another meshctl run holds the mesh (its lock): who, which command, since when."""

    exit_code = 9


class Interrupted(MeshctlError):
    """The user stopped a run (Ctrl+C): what finished is said, and how to go on."""

    exit_code = 130


class PartialError(MeshctlError):
    """The change was made on every node that could be reached; some could not."""

    exit_code = 7

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


class EnvironmentProblem(MeshctlError):
    """The machine meshctl runs on lacks something (Docker engine, debootstrap, ...)."""

    exit_code = 6


class ProviderError(MeshctlError):
    """A provider's API (Lambda, Runpod, Paperspace) refused or failed a call."""

    exit_code = 8


class ParseError(UsageError):
    """A command output could not be understood."""
