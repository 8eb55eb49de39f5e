"""The default run analyses the timeline while the replay measures the Tensor Core evidence
(``api.TimelineAhead``): the verdict must be the one made all at once, on what an H100 recorded."""
from __future__ import annotations

import json

import pytest

from nsighttc import api
from nsighttc.analysis import timeline as timeline_mod
from nsighttc.analysis.tensor_cores import classify_launches
from nsighttc.parse import load
from tests.conftest import MULTI_REPLAY_NCU, MULTI_SHAPES, MULTI_TORCH


@pytest.fixture(scope="module")
def inputs():
    return load(MULTI_SHAPES), load(MULTI_REPLAY_NCU)


def _doc(v) -> str:
    return json.dumps(v.to_json(), sort_keys=True)


def test_the_verdict_with_the_timeline_made_ahead_is_the_one_made_at_once(inputs, monkeypatch):
    trace, ncu = inputs
    at_once = api.analyze([trace, ncu])
    ahead = api.TimelineAhead([trace])
    made = ahead.take([trace], None, None)
    assert made is not None
    calls = []
    real = timeline_mod.analyze_timelines
    monkeypatch.setattr(timeline_mod, "analyze_timelines", lambda *a, **k: calls.append(1) or real(*a, **k))
    with_ahead = api.analyze([trace, ncu], ahead=ahead)
    assert calls == []  # the timeline side was not computed again
    assert _doc(with_ahead) == _doc(at_once)


def test_ahead_is_ignored_for_other_inputs_or_settings(inputs, monkeypatch):
    trace, ncu = inputs
    ahead = api.TimelineAhead([trace])
    other = load(MULTI_TORCH)
    assert ahead.take([other], None, None) is None
    assert ahead.take([trace], None, "step") is None
    calls = []
    real = timeline_mod.analyze_timelines
    monkeypatch.setattr(timeline_mod, "analyze_timelines", lambda *a, **k: calls.append(1) or real(*a, **k))
    v = api.analyze([other], ahead=ahead)
    assert calls == [1] and _doc(v) == _doc(api.analyze([other]))


def test_the_tensor_core_row_follows_the_final_evidence(inputs):
    trace, ncu = inputs
    launches = classify_launches(trace.kernels)
    res = timeline_mod.analyze_timelines([trace.timeline], launches)
    merged = api.analyze([trace, ncu]).launches
    assert (merged["tc_state"] == "yes").any()
    row = list(timeline_mod.refresh_tensor_cores(res, merged).activity["tensor_core_busy"])
    assert row == api.analyze([trace, ncu]).timeline["activity"]["tensor_core_busy"]
    assert len(row) == len(res.activity["busy"])
    res.activity_window = res.window  # the whole run, where its GEMMs ran (the picture shows one phase's steps)
    yes = timeline_mod.refresh_tensor_cores(res, merged).activity["tensor_core_busy"]
    assert max(yes) > 0 and all(0 <= x <= 1 for x in yes)
    none = timeline_mod.refresh_tensor_cores(res, merged.assign(tc_state="no")).activity["tensor_core_busy"]
    assert set(none) == {0.0}
