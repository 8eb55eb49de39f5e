"""A distributed job's rank analyses started as soon as its traces are complete (``nsighttc.later_evidence`` says
why).

The default run starts them in the rank workers it warmed while the job ran; each rank parses its trace, tells the run
its kernel table (``kernel_tables``: what the run plans from), judges its timeline, then waits for the evidence. The
run hands it over once known (``hand_over``: the cache's rows, and on a first run the replay's measurements, as the
verdict would have merged them from the report's file), or abandons it where it will not come as planned (the
program's own Nsight Compute pass had to run, the run failed): the analysis is then made as before, after every pass.
Every rank's analysis must run at once (no more ranks than workers): a rank queued behind the others would tell its
kernels only after the evidence it waits for, which waits for the plan.
"""
from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from .. import later_evidence

EVIDENCE_FILE = ".evidence-later.pkl"  # in the run directory; removed once the analyses took it
KERNELS_DIR = ".kernels-told"          # (the same): each rank's kernel table, for the planning
KERNELS_WAIT_S = 300.0  # a rank whose kernel table has not come by then is parsed by the planning itself


class RanksAhead:
    """``analyze(inputs, evidence=LaterEvidence)`` on ``workers``, in a thread of this process."""

    def __init__(self, inputs: list, workers, run_dir: Path, timeout_s: float):
        self.path = run_dir / EVIDENCE_FILE
        self.kernels_dir = run_dir / KERNELS_DIR
        self.kernels_dir.mkdir(exist_ok=True)
        self.inputs = list(inputs)
        self.reports: list = []  # the replay's reports, handed over as evidence instead of read by every rank
        self.handed = self.abandoned = False
        self._verdict = self._error = None
        self._thread = threading.Thread(target=self._run, args=(workers, timeout_s), daemon=True,
                                        name="nsighttc-ranks-ahead")
        self._thread.start()

    def _run(self, workers, timeout_s: float) -> None:
        from ..api import analyze
        try:
            later = later_evidence.LaterEvidence(self.path, timeout_s, kernels_dir=self.kernels_dir)
            self._verdict = analyze(self.inputs, evidence=later, same_job_check=False, executor=workers)
        except BaseException as exc:  # noqa: BLE001 - given to whoever asks for the result
            self._error = exc

    def hand_over(self, evidence) -> None:
        """The evidence, final: the analyses finish with it."""
        if not (self.handed or self.abandoned):
            later_evidence.hand_over(self.path, evidence)
            self.handed = True

    def abandon(self, why: str) -> None:
        """No evidence will be handed over: the waiting analyses end at once (and the verdict is made later)."""
        if not (self.handed or self.abandoned):
            later_evidence.abandon(self.path, why)
            self.abandoned = True

    def result(self):
        """The job's verdict, once handed over (raises what the analysis raised)."""
        self._thread.join()
        self._remove()
        if self._error is not None:
            raise self._error
        return self._verdict

    def finish_abandoned(self, why: str) -> None:
        """No verdict is taken from these analyses: let them end (they fail at once) before the workers take the
        next ones."""
        self.abandon(why)
        self._thread.join()
        self._remove()

    def usable_for(self, inputs: list) -> bool:
        """Whether the analyses, handed their evidence, make the verdict of ``inputs``: the traces they read and the
        replay's reports they were handed, nothing else."""
        return self.handed and sorted(map(str, inputs)) == sorted(map(str, self.inputs + self.reports))

    def kernel_tables(self) -> "KernelTables":
        """What ``evidence.planned_needs`` takes for an executor: the kernel tables these analyses tell."""
        return KernelTables(self)

    def _remove(self) -> None:
        for p in (self.path, Path(f"{self.path}.tmp")):
            try:
                p.unlink()
            except OSError:
                pass
        shutil.rmtree(self.kernels_dir, ignore_errors=True)


class KernelTables:
    """``planned_needs``' executor where the ranks are analysed ahead: each rank's kernel table as its analysis told
    it, or a ``Failed`` (its analysis failed first, or all ended without it, or ``KERNELS_WAIT_S`` passed), which the
    planning then parses itself."""
    name = "ranks-ahead"

    def __init__(self, ahead: RanksAhead):
        self.ahead = ahead
        self.told = self.failed = 0  # kernel tables the analyses told; ranks the planning had to parse itself

    def map(self, fn, tasks, on_done=None) -> dict:
        from ..executors import Failed
        deadline = time.monotonic() + KERNELS_WAIT_S

        def give_up() -> bool:
            return not self.ahead._thread.is_alive() or time.monotonic() > deadline
        out = {}
        for key, (path, *_) in tasks:
            got = later_evidence.kernels_told(self.ahead.kernels_dir, path, give_up)
            out[key] = Failed(got) if isinstance(got, str) else got
            self.told += not isinstance(got, str)
            self.failed += isinstance(got, str)
        return out


def replay_evidence(reports: list, parsed: dict, cached):
    """What the analyses would have merged from the replay's reports (given as inputs, each rank's counters) and the
    cache's rows (``evidence``): ``api.hardware_rows`` of the two."""
    from ..api import hardware_rows
    return hardware_rows([parsed[r].kernels for r in reports if r in parsed and not parsed[r].kernels.empty], cached)


def report_inputs(reports: list, parsed: dict) -> list[dict]:
    """The verdict's input rows for the replay's reports (``api._analyze``'s shape), which the analyses did not read."""
    return [{"path": str(r), "kind": parsed[r].kind.value, "launches": int(len(parsed[r].kernels))}
            for r in reports if r in parsed]
