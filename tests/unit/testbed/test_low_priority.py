"""scripts/low-priority: `make test`'s checks beside its lanes, at a low priority in a session of
their own (Linux shares the CPU between sessions' autogroups first)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "low-priority"
AUTOGROUPS = Path("/proc/sys/kernel/sched_autogroup_enabled")


def test_the_command_runs_niced_in_a_session_of_its_own_and_its_status_comes_back():
    said = subprocess.run([str(SCRIPT), "sh", "-c", "ps -o sid=,ni= -p $$; exit 3"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert said.returncode == 3
    sid, nice = said.stdout.split()
    assert int(sid) != os.getsid(0) and int(nice) == min(19, os.nice(0) + 10)  # nice is relative


@pytest.mark.skipif(not AUTOGROUPS.exists() or AUTOGROUPS.read_text().strip() != "1", reason="no autogroups")
def test_its_sessions_autogroup_is_niced_and_ours_is_not():
    said = subprocess.run([str(SCRIPT), "cat", "/proc/self/autogroup"], capture_output=True, text=True, check=True)
    assert said.stdout.split()[-2:] == ["nice", "10"]
    assert said.stdout.split()[0] != Path("/proc/self/autogroup").read_text().split()[0]  # not ours


def test_stopping_it_stops_its_session(tmp_path):
    marker = tmp_path / "child.pid"
    started = subprocess.Popen([str(SCRIPT), "sh", "-c", f"echo $$ > {marker}; exec sleep 60"])
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(marker.read_text())
    started.send_signal(signal.SIGTERM)
    assert started.wait(timeout=30) == 143
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail("the command outlived the script")
