"""Stopping the passes: the default run's Nsight Compute pass on the program is ended as soon as what it was
started for is measured, so the rest of the program never runs under ncu.

``ProgramPass`` owns that pass: started beside the timeline behind the launcher's gate (``start_beside``), or
after it, filtered to the missing kernels; the gate opened (``open_gate``) or the pass stood down when nothing
is missing (``stand_down``); and ``measure``: the stop rule (``collect.hardware_pass.StopWhenCovered``) watches
ncu's ``==PROF==`` lines and interrupts the program (SIGINT to the launcher, whose KeyboardInterrupt lets ncu
write its report) once every needed kernel was profiled, once the run went past where the missing ones first
ran, or once most of their time is measured and nothing new comes.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..collect import process
from ..errors import NsighttcError
from ..runtime.gate import write_gate
from .evidence import Outcome, export
from .passes import PERM_FIX, CounterPermission, Options, Pass
from .planning import hardware_pass
from .running import finish_pass, start_pass
from .target import Target

if TYPE_CHECKING:
    import pandas as pd

    from ..collect.hardware_pass import StopWhenCovered
# collect.hardware_pass imports pandas: loaded in ``measure``, after the program started (see ``default``)

GATE_WAIT_S = 60.0  # how long a gated pass told "stop" may take to exit before its group is killed


def interrupt_program(pid_file: Path, p: Pass, say: Callable[[str], None], reason: str) -> None:
    """SIGINT the profiled program (the launcher turns it into KeyboardInterrupt; ncu then writes its
    report). The pid file may not exist yet when ncu prints before the program starts: retry a while."""
    p.stopped_early = True

    def send() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGINT)
                return
            except (OSError, ValueError):
                time.sleep(0.05)

    say("[ncu] " + {"covered": "every kernel that needed hardware evidence was profiled",
                    "passed": "the run went past where the kernels still missing first ran in the timeline run "
                              "(this run chose others)"}.get(reason, "most of the needed kernels' time is measured "
                                                                    "and no new one came for a while")
        + ": stopping the program")
    threading.Thread(target=send, daemon=True).start()


class _Relay:
    """ncu's ``==PROF==`` lines, kept until the stop rule exists (the gate can open before the plan is made),
    then handed to it in order. The pump thread calls it; ``attach`` runs on the main thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._target: Callable[[str], None] | None = None

    def __call__(self, line: str) -> None:
        with self._lock:
            if self._target is None:
                self._lines.append(line)
                return
            target = self._target
        target(line)

    def attach(self, target: Callable[[str], None]) -> None:
        with self._lock:
            lines, self._lines, self._target = self._lines, [], target
        for line in lines:
            target(line)


class ProgramPass:
    """The default run's Nsight Compute pass on the program itself (see the module docstring)."""

    def __init__(self, ncu, opts: Options, target: Target, run_dir: Path, cc: str | None,
                 say: Callable[[str], None]):
        self.ncu, self.opts, self.target, self.run_dir, self.cc, self.say = ncu, opts, target, run_dir, cc, say
        self.gate, self.pid_file = run_dir / ".ncu-gate", run_dir / ".ncu-pid"
        # the pid the stop rule interrupts: rank 0's launcher in a distributed run (rankexec fills rank<R>/)
        self.pid_to_stop = run_dir / "rank0" / self.pid_file.name if target.distributed else self.pid_file
        self.p: Pass | None = None
        self.running: process.Running | None = None
        self._relay: _Relay | None = None
        self.opened_at: float | None = None  # when the gate opened early (the timeline just ended)
        self.timeline_events: list[dict] | None = None  # the timeline run's window events, once it ended

    def start_beside(self, gate_at: str) -> None:
        """Start now; the launcher waits at the gate (``gate_at``) while the timeline pass runs."""
        from .window import ncu_window
        self.p = hardware_pass(self.ncu, self.opts, self.target, self.run_dir, self.cc, "overlapped", self.pid_file,
                               gate=self.gate, gate_at=gate_at,
                               window=ncu_window(self.opts, self.target.python_program, None))
        self.p.on_prof = self._relay = _Relay()  # kept for the stop rule (the gate may open before the plan exists)
        self.say("[ncu] starting now and waiting at the gate while the timeline runs (start-up overlaps)")
        self.running = start_pass(self.p, say=lambda s: None if s.startswith("[ncu] running") else self.say(s))

    def _go(self) -> str:
        """'go', with the window the timeline run found (its warm-up steps, or none: profile from the start)."""
        from .window import gate_words
        words = gate_words(self.opts, self.timeline_events or []) if self.p is not None and self.p.window else ""
        return f"go {words}".strip()

    def open_gate(self) -> None:
        """Let the waiting program run on under ncu before the plan is made (it will almost surely be needed)."""
        write_gate(self.gate, self._go())
        self.opened_at = time.monotonic()

    def stand_down(self) -> None:
        """Nothing to measure on the program: stop the pass, at its gate or past it."""
        if self.running is None:
            return
        if self.opened_at is not None:  # already past the gate: stop it now
            self.running.kill(grace_s=2.0)
            return
        write_gate(self.gate, "stop")
        res = self.running.wait(GATE_WAIT_S)
        if res.returncode is None:
            self.running.kill(grace_s=2.0)

    def abort(self) -> None:
        """The run failed or was interrupted: leave nothing running."""
        if self.running is not None:
            write_gate(self.gate, "stop")
            self.running.kill(grace_s=2.0)

    def measure(self, missing: list[str], have: set, need: pd.DataFrame, out: Outcome, started: float,
                remaining: Callable[[], float | None]) -> None:
        """Profile the kernels still ``missing`` on the program and stop it once the rule says so; the report
        goes into ``out.inputs``, what happened into ``out.info`` and ``out.notes``."""
        from ..collect import hardware_pass as hw_rules
        say, info = self.say, out.info
        say(f"[2/2 ncu] {len(missing)} kernel(s) need hardware evidence"
            + (f" ({len(have)} more found in the cache)" if have else "") + f" ... {time.monotonic() - started:.0f}s")
        if self.p is None:  # not started beside the timeline: start it now, filtered to exactly these kernels
            from .window import ncu_window
            self.p = hardware_pass(self.ncu, self.opts, self.target, self.run_dir, self.cc, "after", self.pid_file,
                                   regex=hw_rules.kernel_regex(missing),
                                   window=ncu_window(self.opts, self.target.python_program, self.timeline_events or []))
        p = self.p
        weights = need.groupby("name")["time_ns"].sum().to_dict()
        watcher = hw_rules.StopWhenCovered(missing, stop=lambda: interrupt_program(self.pid_to_stop, p, say,
                                                                                    watcher.reason)
                                           if self.target.python_program else None, weights=weights,
                                           order=need.attrs.get("order"))

        def progress(line: str) -> None:
            watcher.on_line(line)
            say(f"[2/2 ncu] profiled {watcher.profiled} kernel(s); {watcher.covered}/{watcher.total} of those needed "
                f"... {time.monotonic() - started:.0f}s")
        if self.running is None:
            p.on_prof = progress
            self.running = start_pass(p, say=say)
            watcher.started = time.monotonic()
        else:
            if self.opened_at is None:
                write_gate(self.gate, self._go())
            watcher.started = self.opened_at if self.opened_at is not None else time.monotonic()
            self._relay.attach(progress)
        running = self.running

        def idle_stop() -> None:
            while running.proc.poll() is None and not watcher.stopped:
                watcher.check_idle()
                time.sleep(0.5)
        if self.target.python_program:
            threading.Thread(target=idle_stop, daemon=True).start()
        try:
            finish_pass(p, running, remaining())
        except CounterPermission:
            out.notes.append(f"ncu was refused the performance counters; Tensor Core evidence comes from kernel "
                             f"names and the cache. {PERM_FIX}")
            return
        out.done.append(p)
        info.update({"hardware_pass": p.mode, "stopped_early": p.stopped_early, "stop_reason": watcher.reason,
                     "profiled": p.profiled_kernels, "measured": watcher.covered,
                     "measured_time_share": round(watcher.covered_share, 4),
                     "seconds_after_timeline": round(time.monotonic() - watcher.started, 2)})
        try:
            out.inputs += export(p, self.run_dir, out.notes)
        except NsighttcError as exc:
            out.failures.append(str(exc))
        note = _stop_note(p, watcher)
        if note:
            out.notes.append(note)

    def clean_up(self) -> None:
        for f in (self.gate, self.pid_file):
            try:
                f.unlink()
            except OSError:
                pass


def _stop_note(p: Pass, watcher: StopWhenCovered) -> str | None:
    """What the report says about how the pass on the program ended."""
    if p.stopped_early and watcher.reason == "covered":
        return (f"Nsight Compute pass: the program was stopped after the {watcher.total} kernel(s) "
                "needing hardware evidence were profiled (its timeline comes from the timeline pass alone)")
    if p.stopped_early and watcher.reason == "passed":
        return (f"Nsight Compute pass: the program was stopped once {watcher.covered} of "
                f"{watcher.total} kernel(s) needing evidence ({watcher.covered_share:.0%} of their "
                "GPU time) were profiled and the run had gone past the point where the others first "
                "ran in the timeline run (this run launched other kernels there); the others keep "
                "their names' answer")
    if p.stopped_early:
        return (f"Nsight Compute pass: the program was stopped once {watcher.covered} of "
                f"{watcher.total} kernel(s) needing evidence ({watcher.covered_share:.0%} of their "
                "GPU time) were profiled and no new one appeared for a while; the others keep their "
                "names' answer (`--engine ncu` profiles every launch configuration of a whole run)")
    if watcher.remaining:
        return (f"Nsight Compute pass: {len(watcher.remaining)} kernel(s) needing evidence were not "
                "seen by ncu (launched only in the timeline run, or named differently); they keep "
                "name-rule evidence")
    return None
