"""The default run reads the timeline's trace when the launcher says it is written, not when the launcher's
process is gone (a CUDA program's exit takes ~1-2 s); the pass' exit code and time still come from the end."""
from __future__ import annotations

import sys
import time

from nsighttc.runtime.launch import TRACE_WRITTEN
from nsighttc.profile import Pass
from nsighttc.profile.timeline_run import TimelineRun


def _pass(tmp_path, code: str) -> Pass:
    trace = tmp_path / "torch_trace.json"
    argv = [sys.executable, "-c", code.replace("TRACE", repr(f"{TRACE_WRITTEN}{trace} (program 0.1 s)"))]
    return Pass("torch", argv, tmp_path / "torch.log", torch_trace=trace, mode="timeline")


def test_trace_is_read_while_the_launcher_still_exits_and_the_exit_code_comes_at_the_end(tmp_path):
    p = _pass(tmp_path, "import sys, time; print(TRACE, file=sys.stderr, flush=True); time.sleep(2.0); sys.exit(3)")
    t0 = time.monotonic()
    run = TimelineRun(p, early=True, say=lambda s: None)
    run.until_written(timeout=60)
    assert run.pending and p.returncode is None
    assert time.monotonic() - t0 < 1.8  # did not wait for the 2 s exit
    time.sleep(4.0)  # the caller comes back well after the process ended: its time is still the process'
    run.finish(timeout=60)
    assert not run.pending
    assert p.returncode == 3 and 2.0 <= p.seconds < 3.6
    assert p.trace_written_s is not None and p.trace_written_s < p.seconds
    assert TRACE_WRITTEN in (tmp_path / "torch.stderr.log").read_text()


def test_another_files_trace_line_or_no_early_read_waits_for_the_end(tmp_path):
    other = _pass(tmp_path, "import sys, time; print(TRACE.replace('torch_trace', 'other'), file=sys.stderr, "
                            "flush=True); time.sleep(0.5); sys.exit(0)")
    run = TimelineRun(other, early=True, say=lambda s: None)
    run.until_written(timeout=60)
    assert not run.pending and other.returncode == 0 and other.seconds >= 0.5
    late = _pass(tmp_path, "import sys, time; print(TRACE, file=sys.stderr, flush=True); time.sleep(0.5)")
    run = TimelineRun(late, early=False, say=lambda s: None)  # nsys / a distributed job: no early read
    run.until_written(timeout=60)
    assert not run.pending and late.returncode == 0 and late.seconds >= 0.5
    assert run.finish(timeout=60) is late


def test_a_program_that_never_writes_its_trace_is_stopped_at_the_timeout(tmp_path):
    p = _pass(tmp_path, "import time; time.sleep(60)")
    t0 = time.monotonic()
    run = TimelineRun(p, early=True, say=lambda s: None)
    run.until_written(timeout=1.0)
    assert time.monotonic() - t0 < 15
    assert p.timed_out and p.returncode is None and not run.pending
    assert run.run.proc.poll() is not None


def test_stop_kills_a_launcher_still_exiting(tmp_path):
    p = _pass(tmp_path, "import sys, time; print(TRACE, file=sys.stderr, flush=True); time.sleep(60)")
    run = TimelineRun(p, early=True, say=lambda s: None)
    run.until_written(timeout=60)
    assert run.pending
    t0 = time.monotonic()
    run.stop()
    assert run.run.proc.poll() is not None and time.monotonic() - t0 < 10


def test_a_distributed_jobs_rank_0_lines_are_read_after_other_text_and_the_job_is_waited_for(tmp_path):
    """A torchrun job: its ranks share one stderr, and the pass ends with the job, not with rank 0's trace. Rank 0's
    line says when its recording began, even after text a program left without a newline (a progress bar's)."""
    rank0 = tmp_path / "rank0"
    line = f"{TRACE_WRITTEN}{rank0 / 'torch_trace.json'} (program 2.00 s, recorded from 1.25 s, ranges only)"
    other = f"{TRACE_WRITTEN}{tmp_path / 'rank1' / 'torch_trace.json'} (program 2.00 s, recorded from 9.00 s)"
    p = _pass(tmp_path, f"import sys, time; sys.stderr.write('epoch 1:  50%|#####     \\r'); "
                        f"sys.stderr.write({other!r} + chr(10)); sys.stderr.write('x' + {line!r} + chr(10)); "
                        "sys.stderr.flush(); time.sleep(0.5)")
    run = TimelineRun(p, early=False, say=lambda s: None, rank_dir=rank0)
    run.until_written(timeout=60)
    assert not run.pending and p.returncode == 0 and p.seconds >= 0.5
    assert p.recorded_from_s == 1.25 and run.said_written


def test_launcher_lines_are_written_whole_in_one_write(monkeypatch):
    """print() writes a line's text and its newline apart (two write(2) calls under strace): two ranks' lines were
    glued. ``runtime.lines.say`` hands stderr the whole line at once."""
    from nsighttc.runtime import lines

    class Stderr:
        writes: list = []

        def write(self, text):
            self.writes.append(text)

        def flush(self):
            self.writes.append("<flush>")
    monkeypatch.setattr(sys, "stderr", Stderr())
    lines.say("nsighttc.launch: wrote X")
    assert Stderr.writes == ["nsighttc.launch: wrote X\n", "<flush>"]


def test_a_jobs_gpu_work_is_over_once_every_rank_that_started_said_its_exit_code(tmp_path):
    """The replay may use a GPU once the job's windows are over: not at rank 0's exit code, nor at its trace's line,
    while another rank still runs its last steps (issue 50: every rank records alike in the steps compared)."""
    from nsighttc.runtime.launch import EXIT_SAID
    for r in (0, 1):
        (tmp_path / f"rank{r}").mkdir()
    rank0 = tmp_path / "rank0"
    code = ("import sys, time\n"
            f"sys.stderr.write({EXIT_SAID + '0'!r} + chr(10)); sys.stderr.flush(); time.sleep(0.6)\n"
            f"sys.stderr.write({TRACE_WRITTEN + str(rank0 / 'torch_trace.json') + ' (program 1.00 s)'!r} + chr(10))\n"
            "sys.stderr.flush(); time.sleep(0.6)\n"
            f"sys.stderr.write({EXIT_SAID + '0'!r} + chr(10)); sys.stderr.flush(); time.sleep(3.0)\n")
    p = Pass("torch", [sys.executable, "-c", code], tmp_path / "torch.log", torch_trace=tmp_path / "torch_trace.json",
             mode="timeline")
    run = TimelineRun(p, early=False, say=lambda s: None, rank_dir=rank0)
    t0 = time.monotonic()
    assert run.program_done.wait(30)
    waited = time.monotonic() - t0
    assert 1.1 <= waited < 3.0 and run.run.proc.poll() is None  # the second rank's code, not the first's nor the end
    run.stop()
