"""An MPI allreduce across every rank of the job, launched by `srun --mpi=pmix` (see mpi.sbatch).

This is how Horovod and other MPI programs start on a Slurm cluster: Slurm starts the ranks and
hands them the PMIx wire-up, with no mpirun. Every rank contributes rank + 1; each prints one JSON
line with the sum it received, which must be n(n+1)/2 on every rank.
"""

import json
import os
import socket

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
print(json.dumps({
    "rank": rank, "size": size, "host": socket.gethostname(), "sum": total, "expected": size * (size + 1) // 2,
    "ok": total == size * (size + 1) // 2, "btl_tcp_if_include": os.environ.get("OMPI_MCA_btl_tcp_if_include")  # noqa: SIM112 Open MPI spells it so,
}), flush=True)  # fmt: skip
