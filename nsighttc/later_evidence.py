"""Hardware evidence handed to analyses already under way: a rank's analysis starts before the run's own
measurements are final and waits for them only where it needs them.

Why: a distributed job's first run measures the kernels lacking evidence by replaying their operators under Nsight
Compute once every rank's program has ended, and the ranks' analyses (each trace parsed, its timeline judged, in the
rank workers) waited for that replay and ran only after it. Two H200s, DDP ResNet-50 (20 steps,
byte-compiled): after the traces were complete the planning took 0.6-0.7 s, the replay 0.5-0.9 s more, its report
0.27 s, then the analysis 1.3-1.4 s: the verdict came 1.4-1.7 s after the job had ended
(reports/profile_overhead/torchrun_cost/2026-11-27, call 7). The timeline side of an analysis needs no evidence
(``api.TimelineAhead`` says why), so each rank's analysis now parses and judges its timeline while the replay runs,
and takes the evidence as it is handed over (``hand_over``), in the worker that made it.

The hand-over is a file beside the run (the rank workers are processes of this machine): ``LaterEvidence`` is small
and picklable, and its ``wait`` polls for the file. Where the evidence will not come (the run failed, a later pass
was needed), ``abandon`` says so and each waiting analysis fails at once instead of waiting for its timeout.

The run plans from the same parse (``kernels_dir``): each analysis writes its kernel table there as soon as its trace
is parsed (``tell_kernels``, or ``tell_failed``), and the run's planning reads those (``kernels_told``) instead of
having every trace parsed a second time for it; so the analyses start as soon as the traces are complete, before the
plan, and a second run (whose evidence is the cache's, known once planned) no longer parses each trace twice one
after the other: two H200s, FSDP2, 0.5-0.7 s of planning then 1.3-1.7 s of analysis after the job's traces.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import time
from pathlib import Path

from .errors import NsighttcError

POLL_S = 0.01


class EvidenceAbandoned(NsighttcError):
    """The run that was to hand the evidence over gave up (its reason is the message)."""


class LaterEvidence:
    """Evidence an analysis takes once ``hand_over`` wrote it to ``path`` (``analyze(..., evidence=this)``)."""

    def __init__(self, path: Path | str, timeout_s: float = 1800.0, kernels_dir: Path | str | None = None):
        self.path, self.timeout_s = str(path), timeout_s
        self.kernels_dir = None if kernels_dir is None else str(kernels_dir)

    def __repr__(self) -> str:
        return f"LaterEvidence({self.path!r})"

    def tell_kernels(self, parsed: list) -> None:
        """In the analysis, its traces parsed: each one's kernel table, for the run's planning (``kernels_told``)."""
        if self.kernels_dir is not None:
            for p in parsed:
                _write(kernels_file(self.kernels_dir, p.path), {"kernels": p.kernels})

    def tell_failed(self, paths: list, why: str) -> None:
        """In the analysis, which failed before its traces were parsed: the planning reads them itself."""
        if self.kernels_dir is not None:
            for p in paths:
                if not os.path.exists(kernels_file(self.kernels_dir, p)):
                    _write(kernels_file(self.kernels_dir, p), {"failed": why})

    def wait(self):
        """The evidence table (or None: no evidence but the analysis' own); raises ``EvidenceAbandoned``."""
        deadline = time.monotonic() + self.timeout_s
        while not os.path.exists(self.path):
            if time.monotonic() > deadline:
                raise EvidenceAbandoned(f"the hardware evidence was not handed over within {self.timeout_s:g} s")
            time.sleep(POLL_S)
        with open(self.path, "rb") as fh:
            doc = pickle.load(fh)
        if doc.get("abandoned"):
            raise EvidenceAbandoned(f"the hardware evidence will not come: {doc['abandoned']}")
        return doc.get("evidence")


def kernels_file(kernels_dir: Path | str, trace) -> str:
    """Where the analysis of ``trace`` writes its kernel table (by the trace's path: the run names the same files)."""
    return os.path.join(str(kernels_dir), hashlib.sha1(str(trace).encode()).hexdigest() + ".pkl")


def kernels_told(kernels_dir: Path | str, trace, give_up) -> object:
    """The kernel table the analysis of ``trace`` wrote, or an error's words (a str) where it failed first or
    ``give_up()`` turned true before it came (the analyses ended, or too long a wait)."""
    path = kernels_file(kernels_dir, trace)
    while not os.path.exists(path):
        if give_up():
            if os.path.exists(path):
                break
            return "its analysis gave no kernel table"
        time.sleep(POLL_S)
    with open(path, "rb") as fh:
        doc = pickle.load(fh)
    return doc["kernels"] if "kernels" in doc else str(doc.get("failed") or "its analysis failed")


def _write(path: Path | str, doc: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as fh:
        pickle.dump(doc, fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)  # (whole or not at all: the analyses poll for the name)


def hand_over(path: Path | str, evidence) -> None:
    """Give the waiting analyses their evidence (a table shaped for ``merge.apply_hardware_evidence``, or None)."""
    _write(path, {"evidence": evidence})


def abandon(path: Path | str, why: str) -> None:
    """Tell the waiting analyses that no evidence will come (they fail at once, saying ``why``)."""
    _write(path, {"abandoned": why})
