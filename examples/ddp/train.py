"""Data-parallel training across the mesh, started by torchrun on every node (see ddp.sbatch).

A small regression model trained on generated data: each rank draws its own shard, gradients are
all-reduced every step (NCCL on GPUs, Gloo on CPUs, over the interface the mesh's TaskProlog
put in NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME). Rank 0 logs the parameters, the loss of every
step and the final checkpoint to MLflow (MLFLOW_TRACKING_URI; the tracking server keeps artifacts
on the head's share). Every rank prints one JSON line at the end: its rank, the world size, a
checksum of its final parameters (equal on all ranks when training was in step) and the
interface variables it saw.
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist
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
    # One experiment per user: MLflow gives an account nothing on experiments others made.
    parser.add_argument("--experiment", default=f"meshctl-ddp-{getpass.getuser()}")
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)

    torch.manual_seed(args.seed)  # the same initial parameters on every rank
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    x, y = shard(rank, args.batch * args.steps, args.seed)
    x, y = x.to(device), y.to(device)
    parameters = sum(p.numel() for p in model.parameters())

    run = None
    tracking = rank == 0 and bool(os.environ.get("MLFLOW_TRACKING_URI"))
    if rank == 0 and not tracking:
        print("MLFLOW_TRACKING_URI is not set: nothing is logged to MLflow", flush=True)
    if tracking:
        import mlflow

        mlflow.set_experiment(args.experiment)
        run = mlflow.start_run(run_name=f"slurm-{os.environ.get('SLURM_JOB_ID', 'local')}")
        mlflow.log_params({
            "world_size": world, "backend": dist.get_backend(), "steps": args.steps, "batch_per_rank": args.batch,
            "lr": args.lr, "parameters": parameters, "allreduce_bytes_per_step": parameters * 4,
        })  # fmt: skip

    start = time.monotonic()
    loss_value = float("nan")
    for step in range(args.steps):
        batch = slice(step * args.batch, (step + 1) * args.batch)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(x[batch]), y[batch])
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        loss_value = mean.item() / world
        if tracking:
            mlflow.log_metric("loss", loss_value, step=step)
    seconds = time.monotonic() - start

    if tracking:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.pt")
            torch.save(model.state_dict(), path)
            mlflow.log_artifact(path, artifact_path="checkpoint")
        mlflow.log_metric("train_seconds", seconds)
        mlflow.end_run()
    print(json.dumps({
        "rank": rank, "world_size": world, "host": socket.gethostname(), "backend": dist.get_backend(),
        "checksum": checksum(model), "final_loss": round(loss_value, 6), "steps": args.steps,
        "allreduce_bytes_per_step": parameters * 4, "train_seconds": round(seconds, 2),
        "run_id": run.info.run_id if run else None,
        "nccl_socket_ifname": os.environ.get("NCCL_SOCKET_IFNAME"),
        "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
    }), flush=True)  # fmt: skip
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
