"""Data-parallel training across the mesh, started by torchrun on every node (see ddp.sbatch).

A small regression model trained on generated data: each rank draws its own shard, gradients are
all-reduced every step (NCCL on GPUs, Gloo on CPUs, over the interface the mesh's TaskProlog
put in NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME). Rank 0 logs the parameters and the loss of every
step to MLflow (MLFLOW_TRACKING_URI; the tracking server keeps artifacts on the head's share).

Training survives a lost node: every --checkpoint-every steps rank 0 saves the model, the
optimizer and the step, to --checkpoint-dir (a folder every node sees: the share) or, without
one, to the MLflow run's artifacts. When Slurm runs the job again (requeued after a node failed,
or after a planned stop), rank 0 finds the job's MLflow run (tag slurm.job_id), continues it,
loads the newest checkpoint and gives it to every rank: steps already logged are not logged
again, so the run holds steps 1..N once each. A planned stop (ddp.sbatch's --signal=B:USR1)
reaches the ranks as the file MESHCTL_STOP_FILE on their node: they checkpoint and leave.

Every rank prints one JSON line at the end: its rank, the world size, a checksum of its final
parameters (equal on all ranks when training was in step) and the interface variables it saw.
"""

from __future__ import annotations

import argparse
import gc
import getpass
import hashlib
import io
import json
import os
import socket
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from ddp_checkpoints import FolderStore, RunStore, open_run
from torch import nn
from torch.nn.parallel import DistributedDataParallel

FEATURES = 16


def shard(rank: int, samples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's samples of y = x·w + noise; every rank draws different ones."""
    truth = torch.Generator().manual_seed(seed)
    weights = torch.randn(FEATURES, 1, generator=truth)
    mine = torch.Generator().manual_seed(seed + 1 + rank)
    x = torch.randn(samples, FEATURES, generator=mine)
    return x, x @ weights + 0.01 * torch.randn(samples, 1, generator=mine)


def checksum(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():  # raw float32 bytes (no NumPy needed)
        digest.update(bytes(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).tolist()))
    return digest.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints (0: none)")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("MESHCTL_CHECKPOINT_DIR", ""),
                        help="a folder every node sees (the share); default: the MLflow run's artifacts")  # fmt: skip
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep per step (to watch a run)")
    # One experiment per user: MLflow gives an account nothing on experiments others made.
    parser.add_argument("--experiment", default=f"meshctl-ddp-{getpass.getuser()}")
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    # A peer that vanished fails a collective within a minute instead of Gloo's half hour.
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=timedelta(seconds=90))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    job = os.environ.get("SLURM_JOB_ID", "local")
    stop_file = os.environ.get("MESHCTL_STOP_FILE", "")

    torch.manual_seed(args.seed)  # the same initial parameters on every rank
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    parameters = sum(p.numel() for p in model.parameters())

    run = client = store = None
    logged: set[int] = set()
    tracking = rank == 0 and bool(os.environ.get("MLFLOW_TRACKING_URI"))
    if rank == 0 and not tracking:
        print("MLFLOW_TRACKING_URI is not set: nothing is logged to MLflow", flush=True)
    if tracking:
        import mlflow

        client, run, resumed = open_run(mlflow, args.experiment, job)
        if resumed:
            logged = {m.step for m in client.get_metric_history(run.info.run_id, "loss")}
        else:
            mlflow.log_params({
                "world_size": world, "steps": args.steps, "batch_per_rank": args.batch, "lr": args.lr,
                "parameters": parameters, "allreduce_bytes_per_step": parameters * 4, "backend": dist.get_backend(),
                "checkpoint_every": args.checkpoint_every,
            })  # fmt: skip
    if rank == 0 and args.checkpoint_every:
        if args.checkpoint_dir:
            store = FolderStore(args.checkpoint_dir, job)
        elif run is not None:
            store = RunStore(client, run.info.run_id)

    # Rank 0 reads the newest checkpoint and gives it to every rank: all continue from its step.
    state = [None]
    if rank == 0 and store is not None:
        state = [store.load()]
    dist.broadcast_object_list(state, src=0)
    start = 0
    if state[0] is not None:
        saved = torch.load(io.BytesIO(state[0]), map_location=device)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        start = saved["step"]
        if rank == 0:
            print(f"resumed from the checkpoint of step {start} (attempt {os.environ.get('SLURM_RESTART_COUNT', 0)},"
                  f" world size {world}, was {saved['world_size']})", flush=True)  # fmt: skip
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    x, y = shard(rank, args.batch * args.steps, args.seed)
    x, y = x.to(device), y.to(device)
    if tracking:
        mlflow.log_metric("world_size", world, step=start + 1)  # the size of this attempt, from its first step

    def checkpoint(step: int) -> None:
        if store is None:
            return
        blob = io.BytesIO()
        torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "world_size": world, "run_id": run.info.run_id if run else None}, blob)  # fmt: skip
        where = store.save(step, blob.getvalue())
        print(f"checkpoint of step {step}: {where}", flush=True)

    began = time.monotonic()
    loss_value = float("nan")
    stopped = False
    step = start
    for step in range(start + 1, args.steps + 1):  # steps 1..N
        batch = slice((step - 1) * args.batch, step * args.batch)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(x[batch]), y[batch])
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        loss_value = mean.item() / world
        if tracking and step not in logged:  # a step an earlier attempt logged is not logged twice
            mlflow.log_metric("loss", loss_value, step=step)
        due = args.checkpoint_every and step % args.checkpoint_every == 0 and step < args.steps
        if rank == 0 and due:
            checkpoint(step)
        if stop_file:  # a planned stop asked on any node stops every rank at the same step
            asked = torch.tensor([1 if os.path.exists(stop_file) else 0], device=device)
            dist.all_reduce(asked, op=dist.ReduceOp.MAX)
            if asked.item() and step < args.steps:
                if rank == 0 and not due:
                    checkpoint(step)
                stopped = True
                break
        if args.step_seconds:
            time.sleep(args.step_seconds)
    seconds = time.monotonic() - began

    if tracking and not stopped:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.pt")
            torch.save(model.state_dict(), path)
            mlflow.log_artifact(path, artifact_path="checkpoint")
        mlflow.log_metric("train_seconds", seconds)
        mlflow.end_run()
    if tracking and stopped:
        mlflow.end_run(status="SCHEDULED")  # to be continued by the next attempt (not FINISHED)
    if stopped and local_rank == 0:
        Path(stop_file + ".done").write_text(f"{step}\n")  # ddp.sbatch: stopped as planned, run it again
    print(json.dumps({
        "rank": rank, "world_size": world, "host": socket.gethostname(), "backend": dist.get_backend(),
        "checksum": checksum(model), "final_loss": round(loss_value, 6), "steps": step, "resumed_from": start,
        "stopped": stopped, "allreduce_bytes_per_step": parameters * 4, "train_seconds": round(seconds, 2),
        "run_id": run.info.run_id if run else None,
        "nccl_socket_ifname": os.environ.get("NCCL_SOCKET_IFNAME"),
        "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
    }), flush=True)  # fmt: skip
    # DDP holds the process group: let go of it here, while the interpreter is whole, so that
    # destroy_process_group really ends Gloo's threads. Left to the interpreter's teardown, they
    # were destroyed still running: "terminate called without an active exception", SIGABRT, and
    # torchrun failed the finished job.
    del ddp
    gc.collect()
    dist.barrier()  # every rank is done with the store before any leaves (no c10d errors at the end)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
