"""A torch.profiler trace written by a forked copy of the launcher's process (``runtime.trace_writer``): the program
goes on (or exits) while the copy writes, the copy says when it is done or why it failed, and the profile run takes
the trace as complete only then, even where the process itself ended first (``profile.timeline_run``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsighttc.profile import Pass
from nsighttc.profile.timeline_run import TimelineRun
from nsighttc.record_format import TRACE_WRITING, TRACE_WRITTEN, WRITE_FAILED

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked writer needs os.fork")

# A program that records a little with torch.profiler (CPU), then has the trace written apart with a write that takes
# 1.5 s more than kineto's own, and says when its own part is over.
PROGRAM = r"""
import sys, time, torch
from torch.profiler import profile, ProfilerActivity
from nsighttc.runtime import trace_writer
path = sys.argv[1]
with profile(activities=[ProfilerActivity.CPU]) as prof:
    x = torch.randn(64, 64)
    for _ in range(200):
        x = (x @ x).tanh()
def write():
    time.sleep(1.5)
    if "--fail" in sys.argv:
        raise OSError(28, "No space left on device")
    prof.export_chrome_trace(path)
    return f"nsighttc.launch: wrote {path} (program 0.1 s, trace written)"
t0 = time.perf_counter()
w = trace_writer.apart(path, write, 60)
print(f"PARENT BACK {time.perf_counter() - t0:.3f} {time.time():.3f}", file=sys.stderr, flush=True)
if "--wait" in sys.argv:
    print(f"PARENT SAW {w.wait(30)}", file=sys.stderr, flush=True)
"""


def _run(tmp_path, *flags):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    trace = tmp_path / "torch_trace.json"
    env = {k: v for k, v in os.environ.items() if k != "NSIGHTTC_WRITE_INLINE"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.time()
    r = subprocess.run([sys.executable, str(prog), str(trace), *flags], capture_output=True, text=True,
                       timeout=120, env=env)
    return r, trace, t0


@pytest.mark.torch
def test_the_trace_is_written_by_a_forked_copy_while_the_program_goes_on(tmp_path):
    pytest.importorskip("torch")
    r, trace, _ = _run(tmp_path, "--wait")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    back = next(ln for ln in lines if ln.startswith("PARENT BACK"))
    assert float(back.split()[2]) < 1.0  # the program did not wait for the 1.5 s write
    # said in order: being written (before the fork), the program's own line, then the copy's line once it is on disk
    writing = lines.index(f"{TRACE_WRITING}{trace} (in a forked process)")
    wrote = next(i for i, ln in enumerate(lines) if ln.startswith(f"{TRACE_WRITTEN}{trace} "))
    assert writing < lines.index(back) < wrote
    assert "PARENT SAW True" in lines  # the parent reaped its copy, which exited 0
    doc = json.loads(trace.read_text())
    assert any(e.get("name") == "aten::mm" for e in doc["traceEvents"])  # the recording, from the copy's memory


@pytest.mark.torch
def test_a_copy_that_cannot_write_says_why_and_the_program_is_not_affected(tmp_path):
    pytest.importorskip("torch")
    r, trace, _ = _run(tmp_path, "--wait", "--fail")
    assert r.returncode == 0, r.stderr
    failed = [ln for ln in r.stderr.splitlines() if ln.startswith(WRITE_FAILED)]
    assert failed == [f"{WRITE_FAILED}{trace}: OSError: [Errno 28] No space left on device"]
    assert "PARENT SAW False" in r.stderr and TRACE_WRITTEN not in r.stderr and not trace.exists()


@pytest.mark.torch
def test_the_program_may_end_before_its_copy_has_written_the_trace(tmp_path):
    """The process' exit is not kept waiting: it ends first, and whoever reads its output sees the copy's line."""
    pytest.importorskip("torch")
    r, trace, _ = _run(tmp_path)
    assert r.returncode == 0, r.stderr
    back = next(ln for ln in r.stderr.splitlines() if ln.startswith("PARENT BACK"))
    assert float(back.split()[2]) < 1.0
    assert r.stderr.rstrip().splitlines()[-1].startswith(f"{TRACE_WRITTEN}{trace} ")
    assert json.loads(trace.read_text())["traceEvents"]


def test_inline_writing_where_asked_says_the_line_itself(tmp_path, monkeypatch, capsys):
    from nsighttc.runtime import trace_writer
    monkeypatch.setenv(trace_writer.INLINE_ENV, "1")
    path = tmp_path / "t.json"
    w = trace_writer.apart(path, lambda: (path.write_text("{}"), f"{TRACE_WRITTEN}{path} (x)")[1], 60)
    assert w.pid is None and w.wait(0) is True and path.read_text() == "{}"
    assert capsys.readouterr().err.splitlines() == [f"{TRACE_WRITTEN}{path} (x)"]


def test_the_writing_limit_grows_with_the_stop_that_made_the_recording():
    from nsighttc.runtime.trace_writer import LIMIT_MIN_S, limit_for
    assert limit_for(0.0) == LIMIT_MIN_S and limit_for(5.0) > limit_for(0.4) > LIMIT_MIN_S


# A launcher stand-in: it says its exit code and that its trace is being written, forks a copy that writes the trace
# 3 s later (or fails), and ends at once (1.5 s was not enough on a loaded 2-core machine: its own exit came later,
# and the copy had written by then: a fresh clone's suite beside another, 2026-12-02).
LAUNCHER = r"""
import os, sys, time
path, outcome = sys.argv[1], sys.argv[2]
print("nsighttc.launch: program exit code 0", file=sys.stderr, flush=True)
print(f"nsighttc.launch: writing {path} (in a forked process)", file=sys.stderr, flush=True)
if os.fork() == 0:
    time.sleep(3.0)
    if outcome == "ok":
        open(path, "w").write('{"traceEvents": []}')
        print(f"nsighttc.launch: wrote {path} (program 0.1 s)", file=sys.stderr, flush=True)
    elif outcome == "fail":
        print(f"nsighttc.launch: could not write {path}: OSError: disk full", file=sys.stderr, flush=True)
    os._exit(0)
sys.exit(0)
"""


@pytest.mark.parametrize("outcome", ["ok", "fail", "silent"])
def test_the_profile_run_takes_a_trace_as_complete_only_once_its_copy_is_done(tmp_path, outcome):
    trace = tmp_path / "torch_trace.json"
    argv = [sys.executable, "-c", LAUNCHER, str(trace), outcome]
    p = Pass("torch", argv, tmp_path / "torch.log", torch_trace=trace, mode="timeline")
    t0 = time.monotonic()
    run = TimelineRun(p, early=True, say=lambda s: None)
    while run.run.proc.poll() is None:  # the launcher's own process ends at once
        time.sleep(0.01)
    assert not run.trace_done() and run.writing()  # its copy still writes: the trace is not complete
    run.until_written(timeout=60)
    waited = time.monotonic() - t0
    assert 2.9 <= waited < 15 and run.trace_done() and not run.writing()
    assert run.said_written == (outcome == "ok") and p.returncode == 0
    assert trace.exists() == (outcome == "ok")


def test_where_no_copy_can_be_forked_the_process_writes_and_the_trace_is_complete_only_then(tmp_path, monkeypatch,
                                                                                             capsys):
    """Out of processes or memory: the program's own process writes the trace, and nothing it says before the usual
    line lets the profile run take the trace (or the operators' trace) as complete."""
    from nsighttc.profile.timeline_run import Writers
    from nsighttc.runtime import trace_writer

    def no_fork():
        raise OSError(11, "Resource temporarily unavailable")
    monkeypatch.delenv(trace_writer.INLINE_ENV, raising=False)
    monkeypatch.setattr(trace_writer.os, "fork", no_fork)
    path = tmp_path / "torch_ops_trace.json"
    w = trace_writer.apart(path, lambda: (path.write_text("{}"), f"{TRACE_WRITTEN}operators {path} (x)")[1], 60)
    assert w.pid is None and w.wait(0) is True and path.read_text() == "{}"
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == f"{TRACE_WRITTEN}operators {path} (x)" and not any(ln.startswith(WRITE_FAILED) for ln in lines)
    writers = Writers()
    for i, line in enumerate(lines):
        writers.line(line)
        assert bool(writers.pending()) == (i < len(lines) - 1), (i, line)  # complete with the last line only


# A writer that says its own scheduling class, forked beside the program (an operators' trace written while the window
# it precedes runs) or at its end (the last trace, which the verdict waits for).
POLICY = r"""
import os, sys
from nsighttc.runtime import trace_writer
w = trace_writer.apart(sys.argv[1], lambda: f"POLICY {os.sched_getscheduler(0)} NICE {os.nice(0)}", 60,
                       beside_program=sys.argv[2] == "beside")
w.wait(30)
print(f"PARENT POLICY {os.sched_getscheduler(0)}", file=sys.stderr, flush=True)
"""


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="the idle scheduling class is Linux's")
def test_a_trace_written_beside_the_programs_steps_takes_no_core_from_them(tmp_path):
    prog = tmp_path / "policy.py"
    prog.write_text(POLICY)
    env = {k: v for k, v in os.environ.items() if k != "NSIGHTTC_WRITE_INLINE"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    seen = {}
    for where in ("beside", "end"):
        r = subprocess.run([sys.executable, str(prog), str(tmp_path / "t.json"), where], capture_output=True,
                           text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        seen[where] = r.stderr
    assert f"POLICY {os.SCHED_IDLE} " in seen["beside"] and f"PARENT POLICY {os.SCHED_OTHER}" in seen["beside"]
    assert f"POLICY {os.SCHED_OTHER} " in seen["end"]  # the last trace, which the verdict waits for: as it was
