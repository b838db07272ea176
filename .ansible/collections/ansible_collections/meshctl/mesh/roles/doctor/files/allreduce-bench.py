"""meshctl doctor's all-reduce: one process per node (srun), Gloo over the mesh addresses.

Rank 0 prints one JSON line: the world size and, per tensor size, the seconds per all-reduce,
the algorithm bandwidth (bytes / seconds) and the bus bandwidth (algbw * 2 (n-1) / n: what each
link carried, comparable across node counts, as nccl-tests reports it). Without PyTorch in the
job environment it says so in that line instead.
"""

import argparse
import json
import os
import sys
import time
from datetime import timedelta


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sizes", default="1,16", help="MB of float32, comma-separated")
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()
    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        if rank == 0:
            print(json.dumps({"error": "no PyTorch in the job environment (job_env_torch)"}), flush=True)
        return 0
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))  # fmt: skip
    results = []
    for megabytes in [int(s) for s in args.sizes.split(",") if s.strip()]:
        tensor = torch.ones(megabytes * 2**20 // 4, dtype=torch.float32)
        dist.all_reduce(tensor)  # warm-up: connections made
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iterations):
            dist.all_reduce(tensor)
        seconds = (time.perf_counter() - start) / args.iterations
        size = tensor.numel() * 4
        algbw = size / seconds
        results.append({"megabytes": megabytes, "seconds": round(seconds, 6), "algbw_gbps": round(algbw * 8 / 1e9, 4),
                        "busbw_gbps": round(algbw * 8 / 1e9 * 2 * (world - 1) / world, 4)})  # fmt: skip
    dist.barrier()
    if rank == 0:
        print(json.dumps({"world_size": world, "backend": "gloo", "results": results}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
