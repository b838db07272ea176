"""examples/ddp's checkpoint folder (ddp_checkpoints.py, no PyTorch needed): the newest step wins,
a checkpoint is never seen half-written, each Slurm job has its own folder."""

import importlib.util
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[3] / "examples" / "ddp" / "ddp_checkpoints.py"


@pytest.fixture(scope="module")
def ck():
    spec = importlib.util.spec_from_file_location("ddp_checkpoints", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_newest_is_the_highest_step_not_the_last_written(ck):
    assert ck.newest(["step-000100.pt", "step-000020.pt", "checkpoints/step-000090.pt"]) == "step-000100.pt"
    assert ck.newest(["checkpoints/step-000010.pt"]) == "checkpoints/step-000010.pt"  # MLflow's artifact paths
    assert ck.newest(["step-000100.partial", "model.pt", "step-10.pt", "notes"]) is None
    assert ck.newest([]) is None


def test_a_folder_store_keeps_each_job_apart_and_loads_the_newest(ck, tmp_path):
    store = ck.FolderStore(str(tmp_path), "777")
    assert store.load() is None  # a first attempt starts from step 0
    store.save(10, b"ten")
    store.save(20, b"twenty")
    assert store.save(15, b"fifteen").endswith("777/step-000015.pt")
    assert store.load() == b"twenty"
    assert ck.FolderStore(str(tmp_path), "778").load() is None  # another job's checkpoints are not this one's


def test_a_half_written_checkpoint_is_never_loaded(ck, tmp_path):
    store = ck.FolderStore(str(tmp_path), "5")
    store.save(10, b"whole")
    (tmp_path / "5" / "step-000020.partial").write_bytes(b"half")  # a node lost mid-write leaves this
    assert store.load() == b"whole"
    assert sorted(p.name for p in (tmp_path / "5").iterdir()) == ["step-000010.pt", "step-000020.partial"]
