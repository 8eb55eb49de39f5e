"""A program that profiles itself (PyTorch's profiler recipe: a schedule whose cycle repeats, a trace per cycle by
``tensorboard_trace_handler``, ``prof.step()`` each step, ``key_averages()`` read at the end) run by ``nsighttc
profile`` with torch.profiler. Its cycles ended nsighttc's session: on an H200 the launcher's own stop failed ("Can't
disable Kineto profiler when it's not running"), no trace, no verdict, "the workload exited with code 1" for a
program that exited 0 (benchmarks/gpu/user_programs/sched_cycles.py, gpu_steps_time.sh users5); on this CPU build the
program's first cycle took the session over and nsighttc wrote no trace. A program that stops whatever profiler is on
before starting its own (Lightning's ``Trainer(profiler="pytorch")``) stopped nsighttc's. Now its profiler is held off
(``runtime.guest_profiler``) and its steps are the verdict's."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from nsighttc.collect import tools
from nsighttc.profile import Options, profile, resolve_target
from tests.collect.fakes import make_bin

OWN_PROFILER = """import sys, time, torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randint(0, 4, (32,))
if torch.autograd._profiler_enabled():  # (as Lightning's PyTorchProfiler does: "close profiler if it is already opened")
    torch.autograd._disable_profiler()
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3),
             on_trace_ready=tensorboard_trace_handler(sys.argv[1])) as prof:
    for i in range(int(sys.argv[2])):
        opt.zero_grad(); torch.nn.functional.cross_entropy(m(x), y).backward(); opt.step()
        time.sleep(0.003)
        prof.step()
print("rows", len(prof.key_averages()), "steps done")
with torch.autograd.profiler.profile() as legacy:  # (the older spelling, entered as a context)
    m(x).sum().backward()
print("legacy rows", len(legacy.key_averages()), legacy.key_averages().table().count("\\n") >= 0)
legacy.export_chrome_trace(sys.argv[1] + ".legacy.json")
"""


def test_a_program_profiling_itself_keeps_running_as_written_and_its_steps_are_the_verdicts(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(tools, "_SEARCH", {"ncu": [], "nsys": []})
    monkeypatch.setenv("PATH", f"{make_bin(tmp_path)}{os.pathsep}{Path(sys.executable).parent}")
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = tmp_path / "own_profiler.py"
    script.write_text(OWN_PROFILER)
    log = tmp_path / "tb"
    res = profile(resolve_target(str(script), [str(log), "12"], None),
                  Options(out=tmp_path / "runs", fast=True, timeline_engine="torch"))
    assert res.exit_code == 0, res.notes
    assert (res.run_dir / "torch_trace.json").exists()
    said = (res.run_dir / "torch.stderr.log").read_text()
    assert "the program's own torch.profiler held off, at own_profiler.py:7" in said
    out = (res.run_dir / "torch.log").read_text()
    assert "rows 0 steps done" in out and "legacy rows 0 True" in out  # (what it read back: empty, no error)
    assert not log.exists() or not any(log.iterdir())  # its own traces: not written this run (and the note says so)
    assert not Path(f"{log}.legacy.json").exists()
    note = next(n for n in res.notes if "runs its own torch.profiler" in n)
    assert "own_profiler.py:7" in note and "--timeline-engine nsys" in note
    steps = res.verdict.to_json()["timeline"]["steps"]
    assert steps["source"] == "explicit" and steps["name"].endswith("ProfilerStep") and steps["count"] >= 10
