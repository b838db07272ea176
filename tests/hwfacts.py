"""A sound hardware fact set, as the mesh_hw_facts module returns it (every key of the schema)."""

NO_GPU = {
    "cpus": 4,
    "sockets": 1,
    "cores_per_socket": 2,
    "threads_per_core": 2,
    "topology_source": "lscpu",
    "topology_adjusted": False,
    "memory_total_mb": 4000,
    "real_memory_mb": 3000,
    "gpus": [],
    "gpu_status": "absent",
    "gpu_error": None,
    "slurm_version": "22.05.8",
    "slurm_major": "22.05",
    "in_container": True,
    "cgroup_version": 2,
}
GPU = {"index": 0, "model": "NVIDIA RTX A5000", "type": "rtx_a5000", "uuid": "GPU-5d3c0a1e-0000-1111-2222-333344445555",
       "memory_mb": 24564, "file": "/dev/nvidia0"}  # fmt: skip
ONE_GPU = {**NO_GPU, "gpus": [GPU], "gpu_status": "ok"}
