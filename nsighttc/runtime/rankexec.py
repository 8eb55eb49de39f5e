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

Where the command is nsighttc's own launcher under this same interpreter (``python -m nsighttc.runtime.launch``:
the torch engine's ranks, no profiler in front of it), the shim runs it in this process instead of starting an
interpreter again (``in_process``): the same process, environment and exit code, one interpreter start fewer a rank
(0.06-0.08 s on two H200s, reports/profile_overhead/torchrun_cost call 17).

Rank: ``RANK`` (torchrun), else ``SLURM_PROCID``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, else 0.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .lines import say
from .rank_env import current_rank

PLACEHOLDER = "{nsighttc_rank}"


def command_for_rank(argv: list[str], rank: int, tool_args: int, only_ranks: set[int] | None) -> list[str]:
    """The command this rank runs: placeholders filled, the profiler dropped on ranks not profiled."""
    if only_ranks is not None and rank not in only_ranks:
        argv = argv[tool_args:]
    return [a.replace(PLACEHOLDER, str(rank)) for a in argv]


LAUNCHER = ("-m", "nsighttc.runtime.launch")


def in_process(cmd: list[str]) -> bool:
    """Whether ``cmd`` is nsighttc's launcher run by this interpreter, with no option of the interpreter's own: what
    the shim may run in this process (the module docstring)."""
    return len(cmd) > len(LAUNCHER) + 1 and tuple(cmd[1:1 + len(LAUNCHER)]) == LAUNCHER and \
        os.path.realpath(cmd[0]) == os.path.realpath(sys.executable)


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
    if in_process(cmd):
        from . import launch
        args = cmd[1 + len(LAUNCHER):]
        sys.argv = [launch.__file__, *args]  # (as ``python -m`` sets it)
        return launch.main(args)
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        say(f"nsighttc.rankexec: rank {rank}: cannot run {cmd[0]}: {exc.strerror or exc}")
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
