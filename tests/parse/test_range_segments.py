"""The vectorised innermost-range lookup (``parse.timeline._segment_codes``) must say what the exact sweep
over every boundary event says, on real recordings and on any nesting of ranges over several threads."""
import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

from nsighttc.parse import load
from nsighttc.parse.range_paths import _segment_codes, _sweep, nest_paths, paths_at
from tests.conftest import FIXTURES


def _lookup(seg_t, seg_c, t):
    pos = np.searchsorted(seg_t, t, side="right") - 1
    return np.where(pos >= 0, seg_c[np.clip(pos, 0, None)], -1)


def _both(r: pd.DataFrame, t: np.ndarray):
    fast = _lookup(*_segment_codes(r), t)
    path = r["path"]
    cat_depth = np.array([str(c).count("/") for c in path.cat.categories] + [0])
    codes = path.cat.codes.to_numpy().astype(np.int64)
    slow = _lookup(*_sweep(r["start_ns"].to_numpy(float), r["end_ns"].to_numpy(float), cat_depth[codes], codes), t)
    return fast, slow


def test_real_recordings_agree_with_the_sweep():
    for name in ("multi_phase_nsys_node.sqlite.xz", "multi_phase_torch.json.xz"):
        p = load(FIXTURES / name)
        r = p.timeline.ranges
        pid = r["pid"].mode().iloc[0]
        mine = r[r["pid"] == pid]
        edges = np.concatenate([mine["start_ns"], mine["end_ns"]])
        t = np.concatenate([edges, edges - 1, edges + 1, p.kernels["start_ns"].to_numpy(float)])
        fast, slow = _both(mine, t)
        assert len(mine) > 10 and (fast >= 0).sum() > 10
        np.testing.assert_array_equal(fast, slow)


@st.composite
def nested_ranges(draw):
    """Push/pop ranges on 1-3 threads: each thread a random tree of ranges laid out in time."""
    rows = []
    for tid in range(draw(st.integers(1, 3))):
        t = draw(st.integers(0, 20))

        def emit(depth, t):
            for _ in range(draw(st.integers(0, 3 if depth < 3 else 0))):
                t += draw(st.integers(0, 5))
                start = t
                t = emit(depth + 1, t)
                t += draw(st.integers(0, 5))
                rows.append((tid, float(start), float(t), draw(st.sampled_from(["a", "b", "step", "x/y"]))))
            return t
        emit(0, t)
    return pd.DataFrame(rows, columns=["tid", "start_ns", "end_ns", "name"])


@settings(max_examples=150, deadline=None)
@given(nested_ranges(), st.lists(st.integers(-2, 120), min_size=1, max_size=40))
def test_any_nesting_agrees_with_the_sweep(r, times):
    if r.empty:
        return
    r = r.assign(pid=1)
    r["path"] = nest_paths(r)
    fast, slow = _both(r, np.asarray(times, dtype=float))
    np.testing.assert_array_equal(fast, slow)


def test_overlapping_start_end_ranges_take_the_sweep():
    r = pd.DataFrame({"pid": 1, "tid": 1, "start_ns": [0.0, 5.0], "end_ns": [10.0, 20.0], "name": ["a", "b"]})
    r["path"] = pd.Series(["a", "b"], dtype="category")  # same depth, same thread, overlapping
    got = paths_at(r, pd.Series([1, 1, 1, 1]), pd.Series([1.0, 7.0, 12.0, 25.0]))
    assert list(got.astype(str)) == ["a", "b", "b", ""]


def _sweep_paths(r):
    from nsighttc.parse.range_paths import _nest_sweep
    return _nest_sweep(r).astype(str).tolist()


def test_nesting_by_arrays_matches_the_sweep_on_real_recordings():
    from nsighttc.parse.range_paths import _nest_arrays
    for name in ("multi_phase_nsys_node.sqlite.xz", "multi_phase_torch.json.xz", "kineto_trace_cases_loops.json.xz"):
        r = load(FIXTURES / name).timeline.ranges
        fast = _nest_arrays(r)
        assert fast is not None, name
        assert fast.astype(str).tolist() == _sweep_paths(r)


@settings(max_examples=150, deadline=None)
@given(nested_ranges())
def test_nesting_by_arrays_matches_the_sweep_on_any_nesting(r):
    from nsighttc.parse.range_paths import _nest_arrays
    if r.empty:
        return
    r = r.assign(pid=1)
    fast = _nest_arrays(r)
    if fast is None:  # zero-length ranges: the sweep answers
        assert (r["end_ns"] <= r["start_ns"]).any()
        return
    assert fast.astype(str).tolist() == _sweep_paths(r)


def test_crossing_ranges_take_the_sweep():
    from nsighttc.parse.range_paths import _nest_arrays
    r = pd.DataFrame({"pid": 1, "tid": 1, "start_ns": [0.0, 5.0, 6.0], "end_ns": [10.0, 20.0, 7.0],
                      "name": ["a", "b", "c"]})
    assert _nest_arrays(r) is None
    assert nest_paths(r).astype(str).tolist() == ["a", "a/b", "a/b/c"]


def test_a_range_that_outlives_the_one_it_started_in_nests_under_what_holds_it_whole():
    """Lightning's profiler opens each ``ProfilerStep#N`` inside the previous step's ``Optimizer.step``, which closes
    first: nested by start alone, every later range's path grew by a step. A range nests under the innermost open
    range that holds its end too; one that outlives its parent by less than ``CROSS_NS`` (kineto's rounding) stays
    under it."""
    from nsighttc.parse.range_paths import CROSS_NS
    r = pd.DataFrame({"pid": 1, "tid": 1, "name": ["epoch", "step#1", "opt", "step#2", "batch", "step#3"],
                      "start_ns": [0.0, 10e3, 20e3, 30e3, 40e3, 60e3],
                      "end_ns": [100e3, 30e3, 32e3, 60e3, 58e3, 90e3]})
    assert nest_paths(r).astype(str).tolist() == ["epoch", "epoch/step", "epoch/opt", "epoch/step",
                                                  "epoch/step/batch", "epoch/step"]
    # (by start alone: "epoch/step/opt", "epoch/step/opt/step", "epoch/step/opt/step/batch", ...)
    rounding = r.assign(end_ns=[100e3, 30e3, 30e3 + CROSS_NS / 2, 60e3, 58e3, 90e3])
    assert nest_paths(rounding).astype(str).tolist()[2] == "epoch/step/opt"
