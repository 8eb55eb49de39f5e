"""nsighttc.runtime.recording: torch.profiler with the ranges only records the ranges and no operator."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from nsighttc.runtime import recording  # noqa: E402


def _record(tmp_path, operators: bool):
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    said = recording.start(prof, operators)
    for _ in range(20):
        with torch.profiler.record_function("step"):
            m(torch.randn(4, 8)).sum().backward()
    prof.__exit__(None, None, None)
    out = tmp_path / f"trace-{operators}.json"
    prof.export_chrome_trace(str(out))
    events = json.loads(out.read_text())["traceEvents"]
    return said, [e for e in events if e.get("cat") == "cpu_op"], [e for e in events if e.get("name") == "step"]


def test_ranges_only_keeps_the_ranges_and_drops_every_operator(tmp_path):
    said, ops, steps = _record(tmp_path, operators=False)
    assert said is False and ops == [] and len(steps) == 20
    said, ops, steps = _record(tmp_path, operators=True)
    assert said is True and len(ops) > 100 and len(steps) == 20
    # the patch lasted only while the profiler started: a later profiler records operators again
    import torch.autograd.profiler as ap
    assert ap._enable_profiler.__name__ != "ranges_only"


def test_a_profiler_that_starts_some_other_way_says_it_records_operators(capsys):
    class Elsewhere:  # a torch whose profiler does not enable itself through autograd.profiler._enable_profiler
        entered = False

        def __enter__(self):
            self.entered = True

    prof = Elsewhere()
    assert recording.start(prof, operators=False) is True and prof.entered
    assert "did not take the ranges-only scope" in capsys.readouterr().err


TWO_SESSIONS = """
import os, torch
mode = os.environ["MODE"]
m = torch.nn.Linear(16, 16); opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(8, 16)
def loop():
    for i in range(40):
        if mode == "optimizer-only":  # no model call, fetch or backward: the steps end inside Optimizer.step#...
            for p in m.parameters():
                p.grad = torch.ones_like(p)
            opt.step()
        else:
            opt.zero_grad(); m(x).sum().backward(); opt.step()
if mode == "outer":  # the program's own record_function around its whole loop: never closed before the end
    with torch.profiler.record_function("outer"):
        loop()
else:
    loop()
"""


def _launch(tmp_path, mode: str):
    import os
    import subprocess
    import sys
    prog = tmp_path / "prog.py"
    prog.write_text(TWO_SESSIONS)
    trace, ops = tmp_path / f"{mode}.json", tmp_path / f"{mode}.ops.json"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--window", "--window-warmup", "4",
                           "--window-steps", "6", "--window-end", "continue", "--torch-trace", str(trace),
                           "--record-shapes", "--ops-trace", str(ops), "--", str(prog)],
                          capture_output=True, text=True, env={**os.environ, "MODE": mode}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return trace, ops, proc.stderr


def _events(path):
    return json.loads(path.read_text())["traceEvents"]


@pytest.mark.parametrize("mode", ["model", "optimizer-only"])
def test_a_first_run_records_operators_until_the_window_and_the_window_with_the_ranges_only(tmp_path, mode):
    from nsighttc.runtime.recording import OPS_WRITTEN
    trace, ops, err = _launch(tmp_path, mode)
    assert f"{OPS_WRITTEN}{ops}" in err and "recorded from" in err and "ranges only" in err
    before, window = _events(ops), _events(trace)
    # the operators' trace: every operator with its arguments, until the window
    shaped = [e for e in before if e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {})]
    assert len(shaped) > 50 and any(e["name"] == "aten::addmm" for e in shaped) or mode == "optimizer-only"
    assert sum(e.get("name") == "nsighttc.step" for e in before) >= 3
    # the window: no operator, its steps and the optimizer's labels, every label closed where it began
    assert not any(e.get("cat") == "cpu_op" for e in window)
    steps = [e for e in window if e.get("name") == "nsighttc.step"]
    assert 5 <= len(steps) <= 7
    assert sum(e.get("name", "").startswith("Optimizer.step#") for e in window) >= 6
    assert max(e["ts"] for e in before if "ts" in e and e.get("ph") == "X") <= \
        min(e["ts"] for e in steps)  # the window's steps come after everything the operators' trace holds
    # the launcher's top range, open across the change, is in both (ended under the first, begun under the second)
    assert any(e.get("name") == "prog.py" for e in before) and any(e.get("name") == "prog.py" for e in window)


def test_a_record_function_open_across_the_window_keeps_one_session(tmp_path):
    trace, ops, err = _launch(tmp_path, "outer")
    assert not ops.exists() and "wrote operators" not in err and "ranges only" not in err
    whole = _events(trace)
    assert any(e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {}) for e in whole)
    assert sum(e.get("name") == "nsighttc.step" for e in whole) >= 8
