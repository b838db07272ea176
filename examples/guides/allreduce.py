"""One all-reduce across every rank, as a guide's training script starts: the process group from
the environment torchrun or the batch script set (env://), gloo on the CPU (the GPUs here may be
simulated), one JSON line per rank with what it saw. Each rank adds its rank + 1: the sum every
rank must get back is WORLD_SIZE * (WORLD_SIZE + 1) / 2."""

import json
import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(
    json.dumps(
        {
            "rank": rank,
            "world_size": world,
            "host": socket.gethostname(),
            "master_addr": os.environ.get("MASTER_ADDR", ""),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "slurm_localid": os.environ.get("SLURM_LOCALID"),
            "sum": value.item(),
            "expected": world * (world + 1) / 2,
        }
    ),
    flush=True,
)
dist.destroy_process_group()
