"""scripts/when_idle.py: `make test`'s checks start once the lanes leave the cores idle (or at the
latest after a while), never before a minimum."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_file

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "when_idle.py"
when_idle = load_file("scripts/when_idle.py")

STAT = "cpu  100 5 50 800 40 0 5 0 0 0\ncpu0 50 2 25 400 20 0 2 0 0 0\nintr 1\n"


def test_idle_and_total_come_from_the_line_of_all_cpus():
    assert when_idle.cpu_times(STAT) == (840, 1000)
    with pytest.raises(ValueError):
        when_idle.cpu_times("cpu0 1 2 3 4\n")


def test_the_idle_share_is_between_two_readings():
    assert when_idle.idle_share((840, 1000), (900, 1200)) == pytest.approx(0.3)
    assert when_idle.idle_share((840, 1000), (840, 1000)) == 0.0


def readings(idle_per_step: float, steps: int, step: float = 5):
    """Readings every STEP seconds of 2 cores with IDLE_PER_STEP of their time idle."""
    out, idle, total = [], 0, 0
    for i in range(steps + 1):
        out.append((i * step, (idle, total)))
        idle += int(200 * step * idle_per_step)
        total += int(200 * step)
    return out


def test_busy_cores_keep_it_waiting_and_idle_ones_start_it_after_the_minimum():
    busy, idle = readings(0.02, 12), readings(0.30, 12)
    assert not when_idle.ready(busy, elapsed=900, idle=0.15, window=60, after=600, at_most=1800)
    assert when_idle.ready(idle, elapsed=900, idle=0.15, window=60, after=600, at_most=1800)
    assert not when_idle.ready(idle, elapsed=300, idle=0.15, window=60, after=600, at_most=1800)  # too soon
    assert not when_idle.ready(readings(0.30, 6), elapsed=900, idle=0.15, window=60, after=600, at_most=1800)
    assert when_idle.ready(busy, elapsed=1800, idle=0.15, window=60, after=600, at_most=1800)  # at the latest


def test_the_program_starts_at_once_when_told_it_may():
    done = subprocess.run([sys.executable, str(SCRIPT), "--after", "0", "--at-most", "0"], capture_output=True,
                          text=True, timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("when_idle: starting after 0 s"), done
