#!/usr/bin/env python3
"""Lost-node benchmark on the demo's mesh: what losing a node costs a running training job.

Submits examples/ddp on the demo's 3 nodes (`make demo`: head, gpu1, cpu1), waits for its second
checkpoint, then `docker kill`s gpu1 (a rented machine taken away: no grace) and prints, from the
kill: when the job script said the node stopped answering, when the training ran again (train.py's
"resumed from the checkpoint" line, in the same allocation: the job stays RUNNING), and when the job
completed, with its Slurm restarts. Then it starts gpu1 again, gives it its simulated GPUs back (as
a driver does at boot) and prints how long it took to be idle again with both GPUs.

    python bench/lost_node.py [--runs 2] [--json]

No timing is asserted: these are figures to read (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e import wait_for as wait  # noqa: E402  (asks WHAT until it is true, or gives up)

HEAD, LOST = "head", "gpu1"
EXAMPLES = "/mnt/shared-slurm/examples"


def on(container: str, command: str, check: bool = True) -> str:
    done = subprocess.run(["docker", "exec", container, "sh", "-c", command], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise SystemExit(f"{container}: {command}: {done.stderr.strip()}")
    return done.stdout


def copy_example() -> None:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        tar.add(REPO / "examples" / "ddp", arcname="ddp")
    subprocess.run(["docker", "exec", "-i", HEAD, "sh", "-c", f"mkdir -p {EXAMPLES} && tar -C {EXAMPLES} -x"],
                   input=data.getvalue(), check=True)  # fmt: skip


def one_run() -> dict:
    submit = "runuser -u alice -- sbatch --parsable --nodes=3 --output=/var/tmp/ddp-%j.out"  # root runs no job
    job = on(HEAD, f"cd {EXAMPLES}/ddp && {submit} ddp.sbatch --steps 200 --checkpoint-every 10 "
                   "--step-seconds 0.5").strip()  # fmt: skip
    out = f"/var/tmp/ddp-{job}.out"
    batch = wait(lambda: re.search(r"BatchHost=(\S+)", on(HEAD, f"scontrol show job {job}")), 60)
    host = batch.group(1)
    if host == LOST:
        raise SystemExit(f"job {job}'s script runs on {LOST}: this bench loses a node that is not the batch host")
    if not wait(lambda: int(on(host, f"grep -c 'checkpoint of step' {out}", check=False).strip() or 0) >= 2, 180):
        raise SystemExit(f"job {job} never checkpointed twice")
    killed = time.monotonic()
    subprocess.run(["docker", "kill", LOST], capture_output=True, check=True)
    said = wait(lambda: "stopped answering" in on(host, f"cat {out}", check=False), 120, 0.5)
    said_at = time.monotonic() - killed if said else None
    resumed = wait(lambda: "resumed from the checkpoint" in on(host, f"cat {out}", check=False), 180, 0.5)
    resumed_at = time.monotonic() - killed if resumed else None
    ended = wait(lambda: re.search(r"JobState=(COMPLETED|FAILED|CANCELLED)", on(HEAD, f"scontrol show job {job}")), 400)
    ended_at = time.monotonic() - killed
    show = on(HEAD, f"scontrol show job {job}")
    started = time.monotonic()
    subprocess.run(["docker", "start", LOST], capture_output=True, check=True)
    subprocess.run([str(REPO / "molecule" / "resources" / "simulate-gpus"), LOST], capture_output=True, check=True)

    def back():
        lines = on(HEAD, f"sinfo --noheader --Node --nodes={LOST} --format='%T|%G'", check=False).split()
        return lines and all(line.startswith("idle|") and line.count(":1") == 2 for line in lines)

    idle = wait(back, 300, 2)
    return {
        "job": job,
        "state": ended.group(1) if ended else "?",
        "restarts": int(re.search(r"Restarts=(\d+)", show).group(1)),
        "kill_to_lost_s": round(said_at, 1) if said_at is not None else None,
        "kill_to_training_again_s": round(resumed_at, 1) if resumed_at is not None else None,
        "kill_to_completed_s": round(ended_at, 1),
        "start_to_idle_with_gpus_s": round(time.monotonic() - started, 1) if idle else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    copy_example()
    results = [one_run() for _ in range(args.runs)]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    keys = list(results[0])
    print("  ".join(f"{k:>26}" if i else f"{k:>6}" for i, k in enumerate(keys)))
    for row in results:
        print("  ".join(f"{row[k]!s:>26}" if i else f"{row[k]!s:>6}" for i, k in enumerate(keys)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
