"""A daemon's supervisor program (plugins/module_utils/mesh_supervisor.py), as module
mesh_supervisor_program writes it for roles tailscale, munge and slurm_node on a pod (the pod
e2e test runs it under a real supervisor)."""

from __future__ import annotations

import configparser

import pytest

from plugins.module_utils.mesh_supervisor import (
    HEADER,
    ProgramError,
    program_conf,
    state,
)


def test_the_program_runs_the_command_restarts_without_limit_and_stops_the_daemon_alone():
    text = program_conf("slurmd", "/usr/sbin/slurmd -D -s -N gpu1", "Slurm's node daemon", "/var/log/meshctl/")
    assert text.startswith(HEADER + "\n") and text.endswith("\n")
    parsed = configparser.ConfigParser(inline_comment_prefixes=None, interpolation=None)
    parsed.read_string(text)
    program = parsed["program:slurmd"]
    assert program["command"] == "/usr/sbin/slurmd -D -s -N gpu1"
    assert program["autorestart"] == "true" and int(program["startretries"]) >= 1000000
    assert program["stopasgroup"] == program["killasgroup"] == "false"  # job steps outlive a restart
    assert program["stdout_logfile"] == "/var/log/meshctl/slurmd.log"
    assert parsed.sections() == ["program:slurmd"]


@pytest.mark.parametrize(
    ("name", "command", "comment", "said"),
    [
        ("slurmd\n[program:evil]", "x", "c", "name"),
        ("", "x", "c", "name"),
        ("../etc/x", "x", "c", "name"),
        ("munge", "munged\ncommand=/bin/sh", "c", "command"),
        ("munge", "munged", "daemon\n[program:evil]\ncommand=/bin/sh", "comment"),
        ("munge", "", "c", "command"),
    ],
)
def test_a_value_that_would_add_lines_or_escape_the_folder_is_refused(name, command, comment, said):
    with pytest.raises(ProgramError, match=said):
        program_conf(name, command, comment, "/var/log/meshctl")


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("slurmd                           RUNNING   pid 412, uptime 0:01:02\n", "RUNNING"),
        ("slurmd                           STARTING  \n", "STARTING"),
        ("slurmd                           FATAL     Exited too quickly (process log may have details)\n", "FATAL"),
        ("slurmd: ERROR (no such process)\n", ""),
        ("slurmd2                          RUNNING   pid 9\n", ""),
        ("", ""),
    ],
)
def test_the_state_is_read_from_supervisorctl_status_for_that_program_only(output, expected):
    assert state(output, "slurmd") == expected
