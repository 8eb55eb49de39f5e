"""The run's own cost (profile.run_cost), on what a first and a cached run on the H200 wrote: the plain estimate counts
the window's steps at the unrecorded steps' speed, a first run's ratio is a lower bound, and the report says it."""
from __future__ import annotations

import json
import lzma
from pathlib import Path
from types import SimpleNamespace

import pytest

from nsighttc.profile.run_cost import run_cost
from nsighttc.render.markdown.headlines import run_cost_line

FIXTURE = Path(__file__).parent / "fixtures" / "run_cost" / "h200_grad_accum_cost.json.xz"


def _case(name: str):
    doc = json.loads(lzma.decompress(FIXTURE.read_bytes()))[name]
    p = SimpleNamespace(mode="timeline", **doc["timeline_pass"])
    return doc, p


@pytest.mark.parametrize("name", ["first", "cached"])
def test_the_plain_estimate_counts_the_window_at_the_unrecorded_speed(name):
    doc, p = _case(name)
    said = doc["run_cost"]
    cost = run_cost(doc["timeline"], [SimpleNamespace(mode="replay"), p], said["elapsed_s"])
    slow = doc["timeline"]["steps"]["unrecorded"]["recording_slowdown"]
    window_s = doc["timeline"]["loop_time"]["total_ns"] / 1e9
    assert cost["program_s"] == pytest.approx(p.trace_written_s, abs=0.01)
    assert cost["plain_estimate_s"] == pytest.approx(p.trace_written_s - window_s * (1 - 1 / max(slow, 1)), abs=0.01)
    assert cost["plain_estimate_s"] == pytest.approx(said["plain_estimate_s"], abs=0.02)  # as the GPU run said it
    assert cost["ratio"] == pytest.approx(said["elapsed_s"] / cost["plain_estimate_s"], abs=0.01)
    # a first run recorded the operators with their arguments until its window: its estimate is high, its ratio low
    assert cost["lower_bound"] is (name == "first") and (p.operators_until_s is not None) is (name == "first")
    line = run_cost_line({"provenance": {"run_cost": cost}})
    assert line.startswith(f"This run took {said['elapsed_s']:.1f} s to its verdict, "
                           + ("at least " if name == "first" else "") + f"{cost['ratio']:.2f}x a plain run")
    assert ("lower bound" in line) is (name == "first")


def test_without_unrecorded_steps_the_run_says_its_parts_and_no_ratio():
    doc, p = _case("cached")
    tl = {**doc["timeline"], "steps": {k: v for k, v in doc["timeline"]["steps"].items() if k != "unrecorded"}}
    cost = run_cost(tl, [p], 20.0)
    assert cost["ratio"] is None and cost["plain_estimate_s"] is None
    assert cost["after_program_s"] == pytest.approx(20.0 - p.trace_written_s, abs=0.01)
    assert run_cost_line({"provenance": {"run_cost": cost}}) == (
        f"This run took 20.0 s to its verdict: the program {p.trace_written_s:.1f} s under the recording, then "
        f"{20.0 - p.trace_written_s:.1f} s for the hardware evidence and the analysis")
    assert run_cost(tl, [SimpleNamespace(mode="replay")], 20.0) is None  # no timeline pass: nothing to say
