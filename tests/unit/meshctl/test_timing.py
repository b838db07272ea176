"""Where a run's seconds went (meshctl/timing.py), from events shaped as ansible-runner hands them over
(recorded from a run of ansible-runner 2.4 on this machine: ``created``, and ``duration`` and ``role``
in the event data of a task's end)."""

import pytest

from meshctl import timing


def event(kind, at, **data):
    return kind, data, f"2026-12-01T22:20:{at:06.3f}+00:00"


RUN = [
    event("playbook_on_start", 0.0),
    event("playbook_on_play_start", 0.5, play="Validate"),
    event("runner_on_ok", 1.0, play="Validate", host="localhost", duration=0.4),
    event("playbook_on_play_start", 2.0, play="Slurm"),
    event("runner_on_start", 2.1, play="Slurm", host="head", role="meshctl.mesh.slurm"),
    event("runner_on_ok", 9.0, play="Slurm", host="head", role="meshctl.mesh.slurm", duration=6.9),
    event("runner_on_ok", 9.5, play="Slurm", host="gpu1", role="meshctl.mesh.slurm", duration=7.3),
    event("runner_on_skipped", 9.6, play="Slurm", host="gpu1", role="munge", duration=0.1),
    event("runner_on_failed", 12.0, play="Slurm", host="gpu1", role="munge", duration=2.0),
    event("runner_on_ok", 12.5, play="Slurm", host="head", duration=0.5),
    event("playbook_on_stats", 14.0),
]


def test_a_runs_seconds_per_play_and_per_role_for_each_host():
    seen = timing.Timing()
    for kind, data, created in RUN:
        seen.seen(kind, data, created)
    assert seen.plays == pytest.approx({"Validate": 1.5, "Slurm": 12.0})  # wall: to the next play's start, or the end
    assert dict(seen.by_role["gpu1"]) == pytest.approx({"slurm": 7.3, "munge": 2.1})  # a role by its own name
    assert dict(seen.by_role["head"]) == pytest.approx({"slurm": 6.9, timing.OWN: 0.5})
    assert dict(seen.by_play["gpu1"]) == pytest.approx({"Slurm": 9.4})
    lines = seen.lines()
    assert lines[0].startswith("profile: the run took 14.0 s")
    assert lines[1].split() == ["play", "wall", "gpu1", "head", "localhost"]
    assert lines[2].split() == ["Validate", "1.5", "0.0", "0.0", "0.4"]
    assert lines[3].split() == ["Slurm", "12.0", "9.4", "7.4", "0.0"]
    assert lines[4].split() == ["role", "gpu1", "head", "localhost"]
    assert lines[5].split() == ["slurm", "7.3", "6.9", "0.0"]  # the largest first
    assert lines[6].split() == ["munge", "2.1", "0.0", "0.0"]
    assert lines[7].startswith(timing.OWN) and lines[7].split()[-3:] == ["0.0", "0.5", "0.4"]


def test_what_is_no_time_is_left_out_and_an_empty_run_says_nothing():
    seen = timing.Timing()
    assert seen.lines() == []
    seen.seen("runner_on_ok", {"host": "h", "duration": "$(reboot)"}, "not a time")
    seen.seen("runner_on_ok", {"host": "h", "duration": True}, None)
    seen.seen("runner_on_ok", {"host": "h", "duration": -1}, None)
    assert seen.lines() == [] and seen.started is None
