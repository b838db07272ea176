"""Where examples/ddp keeps its checkpoints, and which MLflow run a Slurm job continues (no PyTorch
needed here: train.py serializes, these keep the bytes).

A checkpoint is ``step-NNNNNN.pt`` (the number of steps done), in a folder every node sees
(``FolderStore``: DIR/<jobid>/, written whole then renamed) or among the artifacts of the job's
MLflow run (``RunStore``: checkpoints/). The newest is the one with the highest step.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

CHECKPOINTS = "checkpoints"  # the MLflow run's artifact folder they go to
NAME = re.compile(r"^step-(\d{6})\.pt$")
JOB_TAG = "slurm.job_id"  # the MLflow tag naming the Slurm job a run belongs to


def newest(names) -> str | None:
    """The newest checkpoint among file names (``step-000040.pt``), or None."""
    steps = sorted((int(m.group(1)), name) for name in names if (m := NAME.match(os.path.basename(name))))
    return steps[-1][1] if steps else None


class FolderStore:
    """Checkpoints in a folder every node sees (the share): DIR/<job>/step-NNNNNN.pt, written whole."""

    def __init__(self, folder: str, job: str):
        self.folder = Path(folder) / job
        self.folder.mkdir(parents=True, exist_ok=True)

    def save(self, step: int, blob: bytes) -> str:
        path = self.folder / f"step-{step:06d}.pt"
        partial = path.with_suffix(".partial")
        partial.write_bytes(blob)
        os.replace(partial, path)  # a node lost mid-write leaves no half checkpoint
        return str(path)

    def load(self) -> bytes | None:
        name = newest(p.name for p in self.folder.iterdir())
        return (self.folder / name).read_bytes() if name else None


class RunStore:
    """Checkpoints as artifacts of the MLflow run (a pod, or a mesh without a share everywhere)."""

    def __init__(self, client, run_id: str):
        self.client, self.run_id = client, run_id

    def save(self, step: int, blob: bytes) -> str:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, f"step-{step:06d}.pt")
            Path(path).write_bytes(blob)
            self.client.log_artifact(self.run_id, path, artifact_path=CHECKPOINTS)
        return f"runs:/{self.run_id}/{CHECKPOINTS}/step-{step:06d}.pt"

    def load(self) -> bytes | None:
        name = newest(f.path for f in self.client.list_artifacts(self.run_id, CHECKPOINTS))
        if not name:
            return None
        with tempfile.TemporaryDirectory() as folder:
            return Path(self.client.download_artifacts(self.run_id, name, folder)).read_bytes()


def open_run(mlflow, experiment: str, job: str):
    """The job's MLflow run: the one an earlier attempt of this Slurm job started, or a new one."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    found = mlflow.set_experiment(experiment)
    earlier = client.search_runs(
        [found.experiment_id], filter_string=f"tags.`{JOB_TAG}` = '{job}'", max_results=1,
        order_by=["attributes.start_time ASC"],
    )  # fmt: skip
    if earlier:
        return client, mlflow.start_run(run_id=earlier[0].info.run_id), True
    return client, mlflow.start_run(run_name=f"slurm-{job}", tags={JOB_TAG: job}), False
