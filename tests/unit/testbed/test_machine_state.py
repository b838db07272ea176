"""bench/machine_state.py: the figures `.ci/run` prints before and after `make test` (what new memory
and new processes cost on this machine), each one measured, none made up."""

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import load_file

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "machine_state.py"
machine_state = load_file("bench/machine_state.py")


def test_every_figure_is_measured_and_positive():
    figures = machine_state.measure(4)
    assert figures["size_mb"] == 4
    for name in ("cpu_loop_s", "first_touch_us_per_page", "again_us_per_page", "fork_ms"):
        assert figures[name] > 0, (name, figures)
    # System time is part of the wall time a page took.
    assert figures["first_touch_sys_us_per_page"] <= figures["first_touch_us_per_page"] * 1.5 + 1, figures


def test_a_page_costs_what_writing_it_took(monkeypatch):
    ticks = iter([10.0, 10.5])  # half a second for the pages of 2 MiB (512 pages)
    monkeypatch.setattr(machine_state.time, "perf_counter", lambda: next(ticks))
    wall, _system = machine_state.touch(2)
    assert wall == 0.5 * 1e6 / 512


def test_the_ci_prints_one_line_and_json_on_request():
    line = subprocess.run([sys.executable, str(SCRIPT), "--size", "4"], capture_output=True, text=True, check=True)
    assert line.stdout.startswith("machine: cpu loop ") and "us/page" in line.stdout and line.stdout.count("\n") == 1
    data = subprocess.run([sys.executable, str(SCRIPT), "--size", "4", "--json"], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert set(json.loads(data.stdout)) >= {"cpu_loop_s", "first_touch_us_per_page", "again_us_per_page", "fork_ms"}
    ci = (SCRIPT.parents[1] / ".ci" / "run").read_text().splitlines()
    runs = [n for n, line in enumerate(ci) if line.startswith("python3 bench/machine_state.py")]
    assert len(runs) == 2 and runs[0] < ci.index("make test") < runs[1]  # before and after the suite
