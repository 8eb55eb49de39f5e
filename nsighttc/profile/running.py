"""Running the passes: each profiler run as a subprocess in its own process group (``collect.process``), its
output logged and watched line by line, its end (exit code, time, timeout, Ctrl-C) recorded on the ``Pass``.
"""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Callable

from ..collect import process
from ..collect.yield_cores import IdleFrontend
from ..errors import NsighttcError
from ..record_format import FRONTENDS_PAUSED, OWN_PROFILER_HELD
from ..runtime.window_events import EVENT_PREFIX, read_events
from .evidence import export
from .passes import PERM_ERROR, PERM_FIX, CounterPermission, Options, Pass, signal_name  # noqa: F401
from .rundir import write_meta
from .target import Target

WINDOW_EVENT = EVENT_PREFIX.strip()


def describe(e: dict, records: bool = True) -> str:
    """A window event (``runtime.window``) as a progress line (``records`` False: a plain run, which times its steps
    and records nothing)."""
    kind, phase = e.get("event"), e.get("phase") or "the program"
    if kind == "start":
        return (f"`{phase}` steady after {e.get('warmup')} warm-up steps ({e.get('median_ms')} ms/step): "
                f"{'recording' if records else 'timing'} {e.get('steps')} steps")
    if kind == "end" and e.get("program_end"):
        return (f"`{phase}`: window {'recorded' if records else 'timed'} to step {e.get('step')}, with the optimizer "
                "step the program's last run ended after; its end runs unrecorded")
    if kind == "end":
        return f"`{phase}`: window {'recorded' if records else 'timed'}" + \
            ("; stopping the program" if e.get("stop") else "; the program runs on")
    if kind == "ended":
        return (f"`{phase}`: the program ended by itself after {e.get('optimizer_steps')} optimizer steps (its next "
                "run's window ends there)")
    if kind == "dropped":
        return "the program marks its own steps: the window of the hooks' steps is dropped"
    if kind == "stop":
        return f"no new phase began within {e.get('grace_s')} s after the last window: stopping the program"
    if kind == "finish":
        return f"no new phase began within {e.get('grace_s')} s after the last window: recording ends, the program runs on"
    if kind == "replays":
        return (f"`{phase}`: the program's CUDA graph replays begin; its warm-up starts again on them"
                if e.get("warmup_again") else
                f"`{phase}`: the program's CUDA graph replays begin inside the window (the steps before it are no "
                "measure of a replay)")
    if kind == "off":
        return "no window (the program has no steps to choose from): recording everything"
    return f"`{phase}`: {kind}"

_PROF_LINE = re.compile(r'==PROF== Profiling "([^"]+)"')


def pass_env() -> dict[str, str]:
    """The passes' environment. Even a command that is not a Python program may reach our launcher or
    ``rankexec`` (behind torchrun): both must import nsighttc from wherever this copy lives."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["NSIGHTTC_GATE_OWNER"] = str(os.getpid())  # a gated program leaves when this process is gone
    return env


def start_pass(p: Pass, *, say: Callable[[str], None]) -> process.Running:
    """Start a pass; its output lines are logged, shown (workload output) and watched (ncu progress)."""
    seen: set[str] = set()

    def on_line(line: str) -> None:
        if p.on_line is not None:
            p.on_line(line)
        if WINDOW_EVENT in line:
            p.window_events += read_events([line])
            if p.window_events:
                say(f"[{p.mode or p.engine}] {describe(p.window_events[-1], p.records)}")
            return
        if FRONTENDS_PAUSED in line:  # (runtime.paused_frontends)
            try:
                p.frontends_paused_s = float(line.split(FRONTENDS_PAUSED, 1)[1].split()[0])
            except (ValueError, IndexError):
                pass
            return
        if OWN_PROFILER_HELD in line and p.own_profiler is None:
            p.own_profiler = line.split(OWN_PROFILER_HELD, 1)[1].strip()
        m = _PROF_LINE.search(line)
        if m:
            p.profiled_kernels += 1
            seen.add(m.group(1))
            if p.on_prof is not None:
                p.on_prof(line)
            elif p.profiled_kernels % 10 == 1:
                say(f"[{p.engine}] profiled {p.profiled_kernels} kernels ({len(seen)} distinct), last: {m.group(1)[:70]}")
        elif PERM_ERROR in line:
            p.perm_lines.append(line)
        elif not line.startswith("==PROF=="):
            say(f"  | {line}")

    say(f"[{p.mode or p.engine}] running: {shlex.join(p.argv)}")
    running = process.start(p.argv, stdout_path=p.log, stderr_path=p.log.with_suffix(".stderr.log"),
                            env=pass_env(), on_line=on_line)
    if p.engine == "ncu":  # ncu's frontend spins a core while its program runs or waits (collect.yield_cores)
        running.frontend = IdleFrontend(running.pid, p.mode or p.engine)
    return running


def finish_pass(p: Pass, running: process.Running, timeout: float | None) -> Pass:
    r = running.wait(timeout)
    p.returncode, p.seconds, p.timed_out, p.interrupted = r.returncode, r.seconds, r.timed_out, r.interrupted
    if p.perm_lines:
        raise CounterPermission(PERM_FIX)
    return p


def run_pass(p: Pass, *, timeout: float | None, say: Callable[[str], None]) -> Pass:
    return finish_pass(p, start_pass(p, say=say), timeout)


def run_queue(passes: list[Pass], opts: Options, target: Target, run_dir: Path, gpus: list, notes: list[str],
               say: Callable[[str], None], remaining: Callable[[], float | None]):
    """The explicit engines (``--engine ncu|nsys|torch``): their passes one after the other."""
    inputs: list[Path] = []
    done: list[Pass] = []
    failures: list[str] = []
    for p in passes:
        try:
            run_pass(p, timeout=remaining(), say=say)
        except CounterPermission as exc:
            write_meta(run_dir, target, opts, done + [p], gpus, notes + [str(exc)])
            raise
        done.append(p)
        try:
            inputs += export(p, run_dir, notes)
        except NsighttcError as exc:
            failures.append(str(exc))
            if not opts.keep_going:
                write_meta(run_dir, target, opts, done, gpus, notes + failures)
                raise
        if p.interrupted or p.timed_out:
            break
    return done, inputs, failures
