"""Which rank of a distributed job this process is, and how many there are, from what its launcher set in the
environment: torchrun's ``RANK``/``WORLD_SIZE``, Slurm's, Open MPI's, PMI's. Standard library only: read inside the
user's program (the launcher, the host sampler, the trace's metadata) and by the profile run."""
from __future__ import annotations

import os

RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def current_rank(env: dict | None = None) -> int:
    env = os.environ if env is None else env
    for var in RANK_VARIABLES:
        value = env.get(var, "")
        if value.strip().isdigit():
            return int(value)
    return 0


def world_size(env: dict | None = None) -> int:
    env = os.environ if env is None else env
    for var in ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        value = env.get(var, "")
        if value.strip().isdigit():
            return int(value)
    return 1
