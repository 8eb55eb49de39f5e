"""A recording with no loop in it: HolisticTraceAnalysis's critical-path test trace (tests/fixtures/foreign), a PARAM
benchmark of AlexNet on an A100, one warm-up and one measured forward each in its own annotation, no ProfilerStep.

Main of 2026-11-30 found "3 steady steps of 27.1 ms" there: a name launched three times in each forward whose
distances (7, 16, 16 kernels) matched across the forwards' boundary by chance; without that, three 5-kernel conv
blocks of the warm-up forward ("3 steady steps of 1.95 ms"). Neither is what the program repeats."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import nsighttc
import pytest

from nsighttc.analysis.timeline import steps as steps_mod
from nsighttc.analysis.timeline.steps import KERNEL_PERIOD, period, within_one_range

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "foreign" / "hta_critical_path_alexnet_a100.json.xz"


@pytest.fixture(scope="module")
def seen():
    """(the verdict, what the step finder held: the kernel loops found, the recording's ranges, the launch order)."""
    got = {}
    real = steps_mod.within_one_range

    def spy(sets, ranges, order):
        got.update(sets=sets, ranges=ranges, order=order)
        return real(sets, ranges, order)
    steps_mod.within_one_range = spy
    try:
        doc = nsighttc.analyze([TRACE]).to_json()
    finally:
        steps_mod.within_one_range = real
    return doc, got


def test_an_anchor_whose_steps_do_not_repeat_at_the_period_is_no_loop(seen):
    """Each step the approximate loop's anchor starts must repeat at its period, not only the name's distances."""
    order = seen[1]["order"]
    found = period.find(order.codes, order.names, order.times)
    if found is not None and found.get("approximate"):
        d = np.diff(found["launches"][found["warmup"]:])
        assert np.all(np.abs(d - found["period"]) <= max(2.0, period.NEAR * found["period"])), found


def test_a_block_of_layers_inside_one_range_is_no_step_and_the_recording_is_judged_whole(seen):
    tl = seen[0]["timeline"]
    assert not (tl.get("steps") or {}).get("count"), tl.get("steps")
    assert not any(f["source"] == KERNEL_PERIOD for f in tl.get("step_families") or [])
    assert tl["basis"] != "steady steps", tl["basis"]


def test_a_loop_holding_most_of_its_range_stays(seen):
    """The kernel loop found (the conv blocks) is dropped inside the forward's range, kept inside a range that holds
    little more than it (one kernel before and after), and dropped inside one around the whole recording, or with no
    range, where the recording is the range (TraceLens' capture trace of torch.compile recording Flux's CUDA graphs,
    no range around its kernels: "24 steady steps of 1.21 ms", its transformer blocks)."""
    import pandas as pd
    sets, order = seen[1]["sets"], seen[1]["order"]
    assert len(sets) == 1 and sets[0].source == KERNEL_PERIOD and within_one_range(sets, seen[1]["ranges"], order) == []
    st = sets[0]
    first, last = np.searchsorted(order.times, [st.starts[0], st.ends[-1]])
    tight = pd.DataFrame({"path": ["around"], "start_ns": [order.times[first - 1]], "end_ns": [order.times[last]]})
    assert within_one_range(sets, tight, order) == sets
    wide = pd.DataFrame({"path": ["around"], "start_ns": [order.times[0]], "end_ns": [order.times[-1] + 1]})
    assert within_one_range(sets, wide, order) == []
    # no range at all (an nsys recording of a program that marks nothing): the recording is the range around it
    assert within_one_range(sets, pd.DataFrame(columns=["path", "start_ns", "end_ns"]), order) == []
