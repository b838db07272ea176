"""meshctl: one Slurm GPU cluster out of the machines you already have."""

__version__ = "0.1.0"
