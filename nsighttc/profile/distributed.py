"""Distributed jobs: every pass of a torchrun target runs once per rank (``nsighttc.runtime.rankexec`` starts the
profiler inside each rank, writing ``rank<R>/``), and an nsighttc started once per rank by the cluster's
launcher (``srun nsighttc profile --out runs/job ...``) writes ``runs/job/rank<R>/``."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from .passes import Pass
    from .target import Target


RANK_DIR = "rank{nsighttc_rank}"  # rankexec.PLACEHOLDER inside: one directory per rank


def distribute(p: Pass, target: Target, run_dir: Path, inner_len: int, only_ranks: str | None = None) -> Pass:
    """A distributed target's pass runs behind its launcher (torchrun), once per rank: paths in the run
    directory move to ``rank<R>/`` and ``nsighttc.runtime.rankexec`` starts the profiler (the first
    ``len(argv) - inner_len`` arguments) inside each rank, or only inside ``only_ranks``."""
    if not target.distributed:
        return p
    base = str(run_dir) + os.sep
    argv = [base + RANK_DIR + os.sep + a[len(base):] if a.startswith(base) else a for a in p.argv]
    tool = len(argv) - inner_len
    p.tool = argv[0] if tool else None
    p.argv = [*target.dist_prefix, "--no-python", sys.executable, "-m", "nsighttc.runtime.rankexec",
              "--mkdir", base + RANK_DIR, "--tool-args", str(tool),
              *(["--only-ranks", only_ranks] if only_ranks is not None else []), "--", *argv]
    p.ranked = True
    return p


def rank_dirs(run_dir: Path) -> list[Path]:
    """The per-rank directories a distributed pass wrote, in rank order."""
    found = [d for d in run_dir.glob("rank*") if d.is_dir() and d.name[4:].isdigit()]
    return sorted(found, key=lambda d: int(d.name[4:]))


def launched_per_rank(target: Target) -> bool:
    """nsighttc itself started once per rank by the cluster's launcher (``srun nsighttc profile ...``)."""
    from ..runtime.rank_env import world_size
    return not target.distributed and world_size() > 1


def rank_run_dir(base: Path | None) -> Path:
    """``srun nsighttc profile --out runs/job ...``: each rank writes ``runs/job/rank<R>/`` (never an
    existing one), so that ``nsighttc analyze runs/job/`` finds every rank."""
    from ..runtime.rank_env import current_rank
    if base is None:
        raise UsageError("started as one rank of several (SLURM_PROCID/RANK and a world size > 1 are set): give "
                         "--out DIR, the job's directory every rank writes its rank<R>/ into")
    d = Path(base) / f"rank{current_rank()}"
    try:
        d.mkdir(parents=True)
    except FileExistsError:
        raise UsageError(f"{d} exists already: give each job its own --out directory", d) from None
    except OSError as exc:
        raise UsageError(f"cannot create the rank's run directory ({exc.strerror or exc})", d) from None
    return d
