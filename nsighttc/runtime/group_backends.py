"""Which backends the process groups of a rank's program used: whether what the program left behind needs the
launcher's settle and full collection before the interpreter exits (``launch._let_go``).

Why: those are there for gloo, whose worker threads take the interpreter's lock (a gloo group destroyed with the lock
held while one of them still released the job's last collective hung the rank; kept until the interpreter's exit,
3 of 16 aborted: ``launch``'s comment). NCCL's threads are C++ only. A collection of the whole heap is not free: in
two H200s' DDP ResNet-50 cached runs it took each rank 0.11-0.27 s (median 0.23) after its program (py-spy, 4 runs,
reports/profile_overhead/torchrun_cost call 17), added to a run of ~10 s. So a rank whose groups were all NCCL is let
go as a plain run would be: the program's objects stay until the interpreter exits.

The groups are read where the program ends them (``destroy_process_group``, wrapped as the program imports
``torch.distributed``) and at the program's end; a rank that saw none is treated as gloo's (the settle and the
collection, as before). Standard library only until the program imports torch.
"""
from __future__ import annotations

import sys

SEEN: set[str] = set()     # each registered group's backend config ("cuda:nccl", "cpu:gloo,cuda:nccl"), or "unknown"


def note() -> None:
    """Add the backends of the groups registered now."""
    if "torch.distributed" not in sys.modules:
        return
    try:
        from torch.distributed import distributed_c10d
        SEEN.update(str(cfg) for cfg in list(distributed_c10d._world.pg_backend_config.values()))
    except Exception:  # noqa: BLE001 - a torch without this table: nothing known, the careful path
        SEEN.add("unknown")


def install() -> None:
    """Note the groups before the program destroys them (``torch.distributed.destroy_process_group``)."""
    try:
        import torch.distributed as dist
        original = dist.destroy_process_group
    except (ImportError, AttributeError):
        return
    if getattr(original, "_nsighttc_notes", False):
        return

    import functools

    @functools.wraps(original)
    def destroy_process_group(*args, **kwargs):
        note()
        return original(*args, **kwargs)
    destroy_process_group._nsighttc_notes = True
    dist.destroy_process_group = destroy_process_group
    try:
        from torch.distributed import distributed_c10d
        if distributed_c10d.destroy_process_group is original:
            distributed_c10d.destroy_process_group = destroy_process_group
    except ImportError:
        pass


def nccl_only() -> bool:
    """Every group the program registered was NCCL's alone (and there was at least one)."""
    note()
    return bool(SEEN) and all("nccl" in cfg and "gloo" not in cfg for cfg in SEEN)  # ("unknown": no nccl in it)
