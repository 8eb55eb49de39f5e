"""Several ranks of one job, the map: every rank's analysis on its own, where an executor runs it (``executors``:
here, local processes, a Dask cluster), each sending back only its summary; ``api`` then reduces them
(``analysis.ranks``).

A rank whose analysis fails (its file missing or corrupt, its worker lost, past the timeout) does not end the job's
analysis: it comes back as a ``RankFailure`` and is named in the verdict's ``distributed.incomplete_ranks``, with why.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from . import executors
from .parse import Parsed
from .parse import ranks as rank_inputs

# Ranks are analysed in worker processes (``jobs`` None: one per core) only when their inputs are big enough to pay for
# the processes' start (spawn, then importing pandas and the analysis in each): on this repository's 2-core CPU machine
# two ranks of 2-10 MB each (tests/fixtures/ddp/straggler_torch, straggler_nsys, unmarked/ddp_uneven) took 0.47-0.62 s
# one after the other against 0.80-0.89 s in two processes. A compressed input counts as GZIP_RATIO times its size on
# disk (the fixtures: torch JSON 13.6x, nsys SQLite 3.2-3.3x).
RANKS_IN_PROCESSES_MIN_BYTES = 48 * 2**20
GZIP_RATIO = 8


@dataclass
class RankFailure:
    """A rank that could not be analysed: its inputs and why."""
    rank: int
    inputs: list[str]
    reason: str
    error: BaseException | None = None


def input_bytes(inputs: list) -> float:
    """The ranks' inputs' size as read (compressed files at ``GZIP_RATIO``); an input already parsed counts nothing
    (there is nothing left to read, and a worker process would be sent the whole table), any other input that is
    not a file (a URL) as large."""
    total = 0.0
    for x in inputs:
        if isinstance(x, Parsed):
            continue
        try:
            size = os.path.getsize(x)
        except (TypeError, OSError):
            return float("inf")
        total += size * (GZIP_RATIO if str(x).endswith((".gz", ".xz")) else 1)
    return total


def rank_jobs(jobs: int | None, inputs: list) -> int:
    """How many ranks are analysed at once: ``jobs`` if given, else one per core where the ranks' ``inputs`` are big
    enough (``RANKS_IN_PROCESSES_MIN_BYTES``), else 1 (here, one after the other)."""
    if jobs is None and input_bytes(inputs) < RANKS_IN_PROCESSES_MIN_BYTES:
        return 1
    return max(1, jobs or os.cpu_count() or 1)


def rank_job(rank: int, paths: list, kwargs: dict, keep_launches: bool, analyze: Callable):
    """One rank's verdict (``analyze``: ``api.analyze``, handed in, so that this module needs no import of the API
    that calls it), small enough to send back: its launch table only when asked (one rank's). Runs where the executor
    puts it (a Dask worker: the files are read where they lie; a URL is fetched to a local copy first)."""
    import contextlib
    from .analysis import tensor_cores
    from .collect.readable import load
    from .parse.timeline import only_process
    from .remote_inputs import RemoteInput, local_copy
    with contextlib.ExitStack() as stack:
        inputs = []
        for p in paths:
            if isinstance(p, rank_inputs.ProcessInput):
                inputs.append(only_process(load(p.path), p.pid))
            elif isinstance(p, RemoteInput):
                inputs.append(stack.enter_context(local_copy(p)))
            else:
                inputs.append(p)
        try:
            v = analyze(inputs, **kwargs)
        except Exception as exc:
            later = kwargs.get("evidence")
            if hasattr(later, "tell_failed"):  # (``later_evidence``: the run that plans from it reads these itself)
                later.tell_failed(paths, f"{type(exc).__name__}: {exc}")
            raise
    for i, p in zip(v.inputs, paths):
        if isinstance(p, (rank_inputs.ProcessInput, RemoteInput)):
            i["path"] = str(p)
    compacted = tensor_cores.compact(v.launches)
    from .analysis import ranks as ranks_mod
    row = ranks_mod.rank_row(rank, v)  # before the launches go: the work per step is counted from them
    if not keep_launches:
        v.launches = v.launches.iloc[0:0].copy()  # a view would keep the whole table alive in-process
    return rank, v, compacted, row


def summarize(got) -> dict:
    """What the job's verdict needs of one rank (``rank_job``'s result), small whatever the rank's recording: its rank
    table row (``analysis.ranks.rank_row``), per-kernel rows, compacted launches, warnings and inputs. The rank's full
    verdict stays where it was made until the job's verdict asks for it (the rank it shows, the lowest rank)."""
    from array import array
    rank, v, compacted, row = got
    for key in ("_iterations", "_all_iterations", "_own_iterations"):  # 8 bytes a step, not a float object's 32
        row[key] = array("d", row[key])
    return {"rank": rank, "row": row, "kernels": v.kernels, "compacted": compacted,
            "warnings": list(v.warnings), "inputs": list(v.inputs), "device": v.device}


def choose_executor(executor, jobs: int | None, inputs: list):
    """The executor to use: the one given (an object, or a ``--executor`` value), else today's rule: here for small
    ranks, one process per core for big ones (``rank_jobs``)."""
    if executor is not None and not isinstance(executor, str):
        return executor, False
    if executor is None:
        n = rank_jobs(jobs, inputs)
        return (executors.Local() if n == 1 else executors.Processes(n)), True
    return executors.make(executor, jobs), True


def _pack(summary: dict) -> bytes:
    """A rank's summary as the client keeps it until the reduce: compressed (a summary unpacked is ~140 KB of pandas
    and Python objects, 9 KB packed: what lets the client hold thousands of ranks)."""
    import pickle
    import zlib
    return zlib.compress(pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL), 1)


def _unpack(blob: bytes) -> dict:
    import pickle
    import zlib
    return pickle.loads(zlib.decompress(blob))


class RankMap:
    """Every rank analysed with the executor (``choose_executor``), as a context: inside it, ``summaries`` holds each
    rank's ``summarize``d result, ``failures`` the ranks that failed, and ``verdict(rank)`` brings one rank's full
    verdict from where it was made (the executor keeps them: in memory here, in a temporary folder for processes, on
    the cluster for Dask). The lowest rank keeps its launch table, except on a cluster (a launch table is what the
    client must not receive). ``progress(done, total, failed)`` after each rank."""

    def __init__(self, by_rank: dict[int, list], counters: list, jobs: int | None, kwargs: dict, analyze: Callable,
                 executor=None, progress: Callable[[int, int, int], None] | None = None):
        self.by_rank, self.counters, self.jobs, self.kwargs, self.analyze = by_rank, counters, jobs, kwargs, analyze
        self.executor, self.progress = executor, progress
        self.summaries: dict[int, dict] = {}
        self.failures: list[RankFailure] = []

    def __enter__(self) -> "RankMap":
        self.ex, self.owned = choose_executor(self.executor, self.jobs, [x for r in self.by_rank for x in self.by_rank[r]])
        try:
            self._run()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _run(self) -> None:
        low = min(self.by_rank)
        keep = self.ex.name != "dask"
        tasks = [(r, (r, [*self.by_rank[r], *self.counters], self.kwargs, keep and r == low, self.analyze))
                 for r in sorted(self.by_rank)]
        state = {"done": 0, "failed": 0}

        def on_done(_key, res):
            state["done"] += 1
            state["failed"] += isinstance(res, executors.Failed)
            if self.progress:
                self.progress(state["done"], len(tasks), state["failed"])
            return res if isinstance(res, executors.Failed) else _pack(res)
        got, self._fetch = self.ex.map_keep(rank_job, summarize, tasks, on_done)
        for r in sorted(got):
            res = got[r]
            if isinstance(res, executors.Failed):
                self.failures.append(RankFailure(r, [str(p) for p in self.by_rank[r]], res.reason, res.error))
            else:
                self.summaries[r] = res

    def unpacked(self):
        """Each rank's summary, rank order, unpacked one at a time."""
        names: dict[str, str] = {}  # one string per kernel name across ranks (a thousand ranks name the same kernels)
        for r in sorted(self.summaries):
            s = _unpack(self.summaries[r])
            row = s["row"]
            row["_compute_kernels"] = frozenset(names.setdefault(n, n) for n in row["_compute_kernels"])
            yield s

    def verdict(self, rank: int):
        """The rank's full verdict (``Verdict``)."""
        return self._fetch(rank)[1]

    def __exit__(self, *exc) -> None:
        if getattr(self, "owned", False):
            self.ex.close()
            self.owned = False
