# Copyright: meshctl contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A daemon of the mesh as a supervisor program (a pod: no systemd): its program file, and the
state `supervisorctl status` says it is in. Plain functions, for module mesh_supervisor_program
and its tests."""

from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
HEADER = "; Managed by meshctl (module meshctl.mesh.mesh_supervisor_program): changes here are overwritten."
UP = ("RUNNING", "STARTING")  # supervisorctl's states of a program that needs no start


class ProgramError(ValueError):
    """A program that cannot be written as asked."""


def program_conf(name: str, command: str, comment: str, log_dir: str) -> str:
    """The program file of NAME running COMMAND, logging into LOG_DIR/NAME.log.

    One line per value: a newline in any of them would add lines of its own to the file."""
    if not NAME.fullmatch(name):
        raise ProgramError(f"supervisor program name {name!r}: use letters, digits, '_', '.', '-'")
    for what, value in (("command", command), ("comment", comment), ("log_dir", log_dir)):
        if not value or "\n" in value or "\r" in value:
            raise ProgramError(f"supervisor program {name}: its {what} must be one line, not empty")
    return "\n".join([
        HEADER,
        f"; {comment}",
        f"[program:{name}]",
        f"command={command}",
        "autostart=true",
        "autorestart=true",
        "startsecs=1",
        "; like Restart=always without a start limit: it keeps trying while the head is away",
        "startretries=1000000",
        "; only the daemon itself: slurmd's job steps (slurmstepd) outlive a restart of slurmd",
        "stopasgroup=false",
        "killasgroup=false",
        "redirect_stderr=true",
        f"stdout_logfile={log_dir.rstrip('/')}/{name}.log",
        "stdout_logfile_maxbytes=10MB",
        "stdout_logfile_backups=2",
        "",
    ])  # fmt: skip


def state(status_output: str, name: str) -> str:
    """The state `supervisorctl status NAME` printed for NAME ("RUNNING", "FATAL", ...), or "" if none."""
    for line in status_output.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == name:
            return fields[1]
    return ""
