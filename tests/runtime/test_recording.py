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
