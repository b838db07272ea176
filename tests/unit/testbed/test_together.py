"""scripts/together: both lanes of `make test` at once, and what failed said where CI shows it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "together"


def run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOGETHER_FAILED": str(tmp_path / "failed.txt")}
    return subprocess.run(
        [str(SCRIPT), *argv], capture_output=True, text=True, env=env, cwd=SCRIPT.parents[1], check=False
    )


def test_a_failed_lane_is_named_with_its_error_lines_in_the_output_and_the_file(tmp_path):
    done = run(
        tmp_path,
        "good", "echo fine",
        "bad", "echo 'TASK [Start slurmd]'; echo 'fatal: [n1]: FAILED! => {}'; echo noise; exit 3",
    )  # fmt: skip
    assert done.returncode == 1
    summary = (tmp_path / "failed.txt").read_text()
    assert summary.splitlines() == [
        "==> what failed in bad (its last error lines):",
        "[bad] TASK [Start slurmd]",
        "[bad] fatal: [n1]: FAILED! => {}",
        "==> failed: bad",
    ]
    assert done.stdout.rstrip().endswith(summary.rstrip())
    assert "[good " in done.stdout and "fine" in done.stdout


def test_a_tests_error_at_teardown_is_named_as_its_failures_are(tmp_path):
    said = "E   AssertionError: rp1 is still in the mesh"
    summary = "ERROR tests/e2e/test_pod.py::test_last - AssertionError: rp1 is still in the mesh"
    done = run(tmp_path, "providers", f"echo '{said}'; echo '{summary}'; echo '1 passed, 1 error'; exit 1")
    assert done.returncode == 1
    assert (tmp_path / "failed.txt").read_text().splitlines()[1:3] == [f"[providers] {said}", f"[providers] {summary}"]


def test_lanes_that_pass_write_no_summary(tmp_path):
    done = run(tmp_path, "a", "true", "b", "echo b")
    assert done.returncode == 0
    assert not (tmp_path / "failed.txt").exists()


def test_a_tests_first_failure_is_said_in_full_after_the_last_lines(tmp_path):
    message = [f"E         node line {i}" for i in range(16)]
    lines = ["E       AssertionError: --- job:", *message, "E       assert False"]
    later = "E   KeyError: 'kept'"
    failed = "FAILED tests/x.py::test_a - AssertionError"
    script = "; ".join(f"echo {line!r}" for line in [*lines, "tests/x.py:3: AssertionError", later, failed])
    done = run(tmp_path, "providers", script + "; exit 1")
    assert done.returncode == 1
    summary = (tmp_path / "failed.txt").read_text().splitlines()
    full = summary.index("==> the first failure in providers, in full:")
    assert summary.index(f"[providers] {failed}") < full  # the last lines first
    assert summary[full + 1 :] == [f"[providers] {line}" for line in lines] + ["==> failed: providers"]
    assert done.stdout.rstrip().endswith(summary[-1])


def test_a_short_failure_is_not_said_twice(tmp_path):
    done = run(tmp_path, "bad", "echo 'E   assert 1 == 2'; echo 'FAILED tests/x.py::test_b - assert 1 == 2'; exit 1")
    assert done.returncode == 1
    assert "in full" not in (tmp_path / "failed.txt").read_text()
