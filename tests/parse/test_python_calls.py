"""A torch.profiler trace recorded with_stack=True (made without nsighttc, as users record them) carries its Python
calls: parse.python_calls reads them as host stacks. Recorded here on the CPU by a program that sleeps 40 ms in
`slow` and 12 ms in `log_metrics` per step: long against the profiler's own work around each range, which on a
loaded CI machine took a tenth of a 3 ms range."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from nsighttc.parse import host_samples as hs_mod
from nsighttc.parse import python_calls

PROGRAM = '''
import sys, time, torch
def slow():
    time.sleep(0.040)
    return torch.randn(8, 8)
def log_metrics(x):
    time.sleep(0.012)
    return x.item()
m = torch.nn.Linear(8, 8)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True) as p:
    for i in range(8):
        with torch.profiler.record_function("step"):
            x = slow()
            y = m(x).sum()
        with torch.profiler.record_function("log"):
            log_metrics(y)
p.export_chrome_trace(sys.argv[1])
'''


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("with_stack")
    (d / "prog.py").write_text(PROGRAM)
    out = d / "trace.json"
    r = subprocess.run([sys.executable, str(d / "prog.py"), str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_the_calls_and_their_kinds(trace):
    assert python_calls.present(trace)
    hs = python_calls.read(trace)
    fr = hs.frames
    own = set(fr.loc[fr["kind"] == hs_mod.OWN, "function"])
    assert {"slow", "log_metrics", "<module>"} <= own
    assert (fr.loc[fr["file"].str.startswith("torch/"), "kind"] == hs_mod.LIBRARY).all()
    assert (fr.loc[fr["file"] == "<built-in>", "kind"] == hs_mod.STDLIB).all()
    assert hs.placed and len(hs.calls) > 100 and (hs.calls["parent"] >= -1).all()
    # the calls into C are there too: `.item()` is a synchronising call by its name
    from nsighttc.analysis.timeline.host_topics import topics as _topics
    item = fr["function"].str.contains("method item of").to_numpy()
    assert item.any() and (_topics(fr)[item] == "sync").all()


def test_stacks_at_moments_are_the_calls_open_then(trace):
    """Moments spread evenly over the `log` ranges are inside log_metrics (its sleep); over the `step` ranges, mostly
    inside `slow`'s sleep."""
    from nsighttc.parse import load
    r = load(trace).timeline.ranges
    hs = python_calls.read(trace)

    def stacks(name):
        rows = r[r["name"].astype(str) == name]
        t = python_calls.moments(np.sort(rows["start_ns"].to_numpy()), np.sort(rows["end_ns"].to_numpy()), 400)
        got = python_calls.stacks_at(hs, t, hs.main_tid)
        fr = got.frames
        return pd.Series([[fr["function"].iat[i] for i in got.stacks[k]] for k in got.samples["stack"]])

    log = stacks("log")
    assert log.map(lambda s: "log_metrics" in s).mean() > 0.9
    assert log.map(lambda s: s[:2] == ["built-in function sleep", "log_metrics"]).mean() > 0.8
    step = stacks("step")
    assert step.map(lambda s: "slow" in s).mean() > 0.6
    assert all(s[-1] == "<module>" for s in step if s)  # every stack reaches the program's top level


def test_moments_weigh_intervals_by_their_length():
    t = python_calls.moments(np.array([0.0, 100.0]), np.array([10.0, 130.0]), 40)
    assert len(t) == 40 and (t < 10).sum() == 10 and ((t >= 100) & (t < 130)).sum() == 30


def test_the_analysis_reads_a_with_stack_trace_s_calls(trace):
    """`nsighttc analyze` of such a trace uses its calls (no GPU here: no idle time to put them down to)."""
    import nsighttc
    tl = nsighttc.analyze([trace]).to_json()["timeline"]
    hf = tl["host_frames"]
    assert hf["source"] == "torch.profiler with_stack" and hf["placed"]


def test_recorded_calls_read_in_the_idle_time_are_put_down_to_their_frames(trace):
    """The program's `step` and `log` ranges taken as the GPU's idle pieces: the calls read at evenly spaced moments
    of them give the rows `<module>` → `slow` and `<module>` → `log_metrics`, in the ratio of their sleeps."""
    from nsighttc.analysis.timeline import host_frames, idle
    from nsighttc.parse import load
    r = load(trace).timeline.ranges
    rows = r[r["name"].astype(str).isin(["step", "log"])].sort_values("start_ns")
    s, e = rows["start_ns"].to_numpy(), rows["end_ns"].to_numpy()
    pieces = idle.Idle(s, e, np.full(len(s), idle.HOST, dtype=np.int8), np.zeros(len(s), dtype=np.int32),
                       np.ones(len(s), dtype=bool), np.array(["prog.py"], dtype=object), None)
    scope = (np.array([s.min()]), np.array([e.max()]))
    hs = host_frames.sample_calls(python_calls.read(trace), pieces, scope, set())
    att = host_frames.attribute(hs, pieces, set(), scope)
    table = {r_["calls"]: r_ for r_ in host_frames.table(att, scope, float((e - s).sum()))}
    assert table["slow"]["frame"] == "<module>" and table["slow"]["own"]
    assert table["log_metrics"]["topic"] == "logging"
    ratio = table["slow"]["share"] / table["log_metrics"]["share"]
    assert 2.3 < ratio < 4.8  # 40 ms against 12 ms of sleep per step (the step's own compute adds to `slow`'s side)
