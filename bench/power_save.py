#!/usr/bin/env python3
"""Power saving benchmark: how long a job waits for a stopped rented node, and how soon
an idle one is stopped.

Runs tests/e2e/test_power_save.py (a head and a node that is a "Paperspace machine" of the
stand-in API, its start a `docker start` of about 1 s) and prints the two figures it measures:
seconds from `sbatch` to RUNNING on the stopped node (Slurm's resume, the head's program calling
the API, the node's slurmd starting and registering: meshctl's and Slurm's overhead), and seconds
from the job's end until the node is stopped again with `idle_stop: 60s`. No time is asserted.

    python bench/power_save.py [--suite bookworm|trixie]

Needs the Docker engine and the meshctl-node images (`make engine images`); about 8 minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="bookworm", choices=["bookworm", "trixie"],
                        help="Debian 12 (Slurm 22.05) or 13 (Slurm 24.11)")  # fmt: skip
    args = parser.parse_args()
    env = {**os.environ, "MESHCTL_E2E_POWER_SUITE": args.suite, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-m", "e2e", "tests/e2e/test_power_save.py"],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    figures = re.search(r"sbatch to RUNNING on a stopped node: (\d+) s.*stopped (\d+) s after its job ended "
                        r"\(idle_stop (\d+) s\)", done.stdout)  # fmt: skip
    if done.returncode != 0 or not figures:
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
        return 1
    running, stopped, idle = figures.groups()
    print(f"{'measure':<50} {'seconds':>8}")
    print(f"{'sbatch to RUNNING on a stopped node (' + args.suite + ')':<50} {running:>8}")
    print(f"{'stopped after its job ended, idle_stop ' + idle + ' s':<50} {stopped:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
