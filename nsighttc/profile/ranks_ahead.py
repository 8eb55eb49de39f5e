"""A distributed job's rank analyses started while its replay still measures (``nsighttc.later_evidence`` says why).

The default run starts them once the ranks' traces are planned from, in the rank workers it warmed while the job ran;
each rank parses its trace and judges its timeline, then waits for the evidence. The run hands the evidence over
once the replay's report is read (``hand_over``: the cache's evidence and the replay's measurements, as the verdict
would have merged them from the report's file), or abandons it where it will not come as planned (the program's own
Nsight Compute pass had to run, the run failed): the analysis is then made as before, after every pass.
"""
from __future__ import annotations

import threading
from pathlib import Path

from .. import later_evidence

EVIDENCE_FILE = ".evidence-later.pkl"  # in the run directory; removed once the analyses took it


class RanksAhead:
    """``analyze(inputs, evidence=LaterEvidence)`` on ``workers``, in a thread of this process."""

    def __init__(self, inputs: list, workers, run_dir: Path, timeout_s: float):
        self.path = run_dir / EVIDENCE_FILE
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
            self._verdict = analyze(self.inputs, evidence=later_evidence.LaterEvidence(self.path, timeout_s),
                                    same_job_check=False, executor=workers)
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

    def _remove(self) -> None:
        for p in (self.path, Path(f"{self.path}.tmp")):
            try:
                p.unlink()
            except OSError:
                pass


def replay_evidence(reports: list, parsed: dict, cached):
    """What the analyses would have merged from the replay's reports (given as inputs, each rank's counters) and the
    cache's rows (``evidence``): the reports' launches classified, then the cached rows, in ``api._analyze``'s order."""
    import pandas as pd
    from ..analysis.tensor_cores import classify_launches
    frames = [parsed[r].kernels for r in reports if r in parsed and not parsed[r].kernels.empty]
    hw = [classify_launches(pd.concat(frames, ignore_index=True))] if frames else []
    if cached is not None and not cached.empty:
        hw.append(cached)
    return pd.concat(hw, ignore_index=True) if hw else None


def report_inputs(reports: list, parsed: dict) -> list[dict]:
    """The verdict's input rows for the replay's reports (``api._analyze``'s shape), which the analyses did not read."""
    return [{"path": str(r), "kind": parsed[r].kind.value, "launches": int(len(parsed[r].kernels))}
            for r in reports if r in parsed]
