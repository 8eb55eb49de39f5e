"""Draw the report's plots in worker processes started while the program runs, one figure each, side by side.

Why: a default run's report is written after the program's trace, so its plots are part of the time to the
verdict. On the lent H100's host the two figures took 0.36-0.63 s one after the other (its cores run this
analysis ~3x slower than the 2-core CI machine: reports/window/call29/host.txt), as much as the analysis itself;
VGG16's second run cost 1.14x its plain run for ~1.1 s of such fixed costs. With the workers the report took
0.15-0.32 s there, the slower figure's time (reports/window/call32, call33: ``phase_seconds.figure_seconds``). A
worker imports matplotlib and draws both kinds of figure from a made-up verdict (fonts, renderer) while the program
still runs, then waits on its stdin for one request: the verdict's JSON file and which figure to draw where. Two workers draw the two figures
at once; the report waits for the slower one instead of both.

Workers are asked for only where the host has cores to spare beside the program (``profile.default``); anything
a worker does not answer (it failed to start, died, timed out, or refused) is drawn in-process as before, so a
report never lacks a plot the verdict has data for. A worker whose parent dies reads end-of-file and exits.

Protocol (one line each way, JSON): the worker says ``{"ready": true}`` once warm; the request is
``{"plot": NAME, "doc": PATH, "out": PATH}``; the answer ``{"made": true|false, "seconds": S}`` (reading the
verdict and drawing) or ``{"error": TEXT}``. A worker that answered exits at once without waiting for anyone.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from .plots import FIGURES


class _Worker:
    def __init__(self, python: str):
        self.proc = subprocess.Popen([python, "-m", "nsighttc.render.plot_worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.answer: dict | None = None
        self._done = threading.Event()
        threading.Thread(target=self._read, daemon=True, name="nsighttc-plot-worker").start()

    def _read(self) -> None:
        """The worker's lines until its answer (its first line only says it is warm); end of file (it died)
        ends the wait with no answer."""
        try:
            for line in self.proc.stdout:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if not msg.get("ready"):
                    self.answer = msg
                    break
        except (OSError, ValueError):
            pass
        self._done.set()

    def ask(self, plot: str, doc: Path, out: Path) -> bool:
        try:
            self.proc.stdin.write(json.dumps({"plot": plot, "doc": str(doc), "out": str(out)}) + "\n")
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):  # it died before the request
            return False

    def wait(self, deadline: float) -> dict | None:
        self._done.wait(max(0.0, deadline - time.monotonic()))
        return self.answer

    def close(self) -> None:
        """A worker that answered ends by itself (its figure is written): not waited for, its interpreter's end
        is no part of the report's time (0.1-0.2 s on the H100's host). One still waiting reads end of file and
        exits; one that never answered (hung, or asked nothing yet and slow to start) is killed after a moment."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        if self.answer is not None or self.proc.poll() is not None:
            return
        try:
            self.proc.wait(0.5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class PlotWorkers:
    """One worker per figure, started now. ``draw`` hands them the verdict once; ``close`` ends them."""

    def __init__(self, python: str | None = None):
        self._workers: dict[str, _Worker] = {}
        self.seconds: dict[str, float | None] = {}
        for name in FIGURES:
            try:
                self._workers[name] = _Worker(python or sys.executable)
            except OSError:  # no process could be started: everything is drawn in-process
                break

    def draw(self, doc_path: Path, out_dir: Path, timeout_s: float = 60.0) -> dict[str, bool]:
        """{figure name: made or not} for the figures a worker drew (missing: draw it in-process). Each worker
        serves one request; a second call gets nothing. ``seconds``: how long each took there."""
        workers, self._workers = self._workers, {}
        asked = {name: w for name, w in workers.items() if w.ask(name, doc_path, out_dir / FIGURES[name][1])}
        for name in workers.keys() - asked.keys():  # gone before the request: reaped
            workers[name].close()
        deadline = time.monotonic() + timeout_s
        got: dict[str, bool] = {}
        for name, w in asked.items():
            answer = w.wait(deadline)
            if answer is not None and "made" in answer:
                got[name] = bool(answer["made"])
                self.seconds[name] = answer.get("seconds")
            w.close()
        return got

    def close(self) -> None:
        for w in self._workers.values():
            w.close()
        self._workers = {}
