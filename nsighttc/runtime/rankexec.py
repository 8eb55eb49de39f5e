"""Per-rank exec shim for distributed launchers: ``torchrun ... --no-python python -m nsighttc.runtime.rankexec
[options] -- TOOL... PROGRAM...``.

torchrun (and ``python -m torch.distributed.run``) starts one process per rank with ``RANK``,
``LOCAL_RANK`` and ``WORLD_SIZE`` set. Profilers must then start *inside* each rank's process, writing
one recording per rank: this shim reads the rank, replaces ``{nsighttc_rank}`` in every argument (so
``-o RUN/rank{nsighttc_rank}/nsys`` becomes ``RUN/rank1/nsys``), creates the rank's directory, and
replaces itself with the command (``os.execvp``: no extra process between the launcher and the rank, so
signals and exit codes pass through unchanged). ``--only-ranks 0`` keeps the profiler (the first
``--tool-args N`` arguments) on those ranks only; the others run the program without it (the Nsight
Compute pass measures kernels on one rank: every rank runs the same kernels, and replaying one rank's
kernels already slows the whole job to that rank's pace).

Rank: ``RANK`` (torchrun), else ``SLURM_PROCID``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, else 0.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .lines import say

PLACEHOLDER = "{nsighttc_rank}"
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


def command_for_rank(argv: list[str], rank: int, tool_args: int, only_ranks: set[int] | None) -> list[str]:
    """The command this rank runs: placeholders filled, the profiler dropped on ranks not profiled."""
    if only_ranks is not None and rank not in only_ranks:
        argv = argv[tool_args:]
    return [a.replace(PLACEHOLDER, str(rank)) for a in argv]


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m nsighttc.runtime.rankexec", description=__doc__.split("\n")[0])
    ap.add_argument("--mkdir", action="append", default=[], help=f"create this directory first ({PLACEHOLDER} allowed)")
    ap.add_argument("--tool-args", type=int, default=0, help="how many leading arguments are the profiler")
    ap.add_argument("--only-ranks", default=None, help="comma-separated ranks that run the profiler (default: all)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    ns = ap.parse_args(argv)
    if ns.command and ns.command[0] == "--":
        ns.command = ns.command[1:]
    if not ns.command:
        ap.error("nothing to run")
    return ns


def main(argv: list[str] | None = None) -> int:
    ns = _parse(sys.argv[1:] if argv is None else argv)
    rank = current_rank()
    only = {int(r) for r in ns.only_ranks.split(",") if r.strip()} if ns.only_ranks else None
    for d in ns.mkdir:
        Path(d.replace(PLACEHOLDER, str(rank))).mkdir(parents=True, exist_ok=True)
    cmd = command_for_rank(ns.command, rank, ns.tool_args, only)
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        say(f"nsighttc.rankexec: rank {rank}: cannot run {cmd[0]}: {exc.strerror or exc}")
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
