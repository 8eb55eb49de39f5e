"""Timeline verdicts on the real H200 recordings of the probe's --loops (fixtures/README-h200.md):
`cpu_bound` = host-side 'dataloader' work starving a tiny step; `gpu_bound` = back-to-back fp16 GEMMs."""
import gzip
import json
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nsighttc
from tests.conftest import KINETO, fixture_open


def _sweep_busy(intervals, lo, hi):
    """Independent busy time: plain sort-and-sweep over (start, end) pairs clipped to [lo, hi]."""
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy


def _steady(doc, name, scale=1.0):
    """The phase's steady window (the verdict's own: the range is judged there), in the recording's time unit."""
    f = next(f for f in doc["timeline"]["step_families"] if f["name"] == f"{name}/step")
    return f["steady_window_ns"][0] / scale, f["steady_window_ns"][1] / scale


def _clip(rng, window):
    return max(rng[0], window[0]), min(rng[1], window[1])


def _nsys_truth(db, doc):
    con = sqlite3.connect(db)
    gpu = [r for t in ("KERNEL", "MEMCPY", "MEMSET")
           for r in con.execute(f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t}")]
    ranges = {name: _clip((s, e), _steady(doc, name)) for s, e, name in con.execute(
        "SELECT start, end, text FROM NVTX_EVENTS WHERE text IN ('cpu_bound', 'gpu_bound')")}
    return {n: _sweep_busy(gpu, s, e) / (e - s) for n, (s, e) in ranges.items()}


def _kineto_truth(path, doc):
    ev = json.load(fixture_open(path))["traceEvents"]
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in ev
           if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ranges = {e["name"]: _clip((e["ts"], e["ts"] + e["dur"]), _steady(doc, e["name"], 1e3)) for e in ev
              if e.get("cat") == "user_annotation" and e["name"] in ("cpu_bound", "gpu_bound")}
    return {n: _sweep_busy(gpu, s, e) / (e - s) for n, (s, e) in ranges.items()}


@pytest.fixture(scope="module")
def nsys_doc(tmp_path_factory):
    from tests.conftest import NSYS_SQLITE_GZ
    db = tmp_path_factory.mktemp("nsys") / "run.sqlite"
    db.write_bytes(fixture_open(NSYS_SQLITE_GZ).read())
    return db, nsighttc.analyze([db]).to_json()


@pytest.fixture(scope="module")
def kineto_doc():
    return nsighttc.analyze([KINETO]).to_json()


def _ranges(doc):
    return {r["name"]: r for r in doc["ranges"]}


def test_nsys_busy_shares_match_an_independent_sweep(nsys_doc):
    db, doc = nsys_doc
    truth = _nsys_truth(db, doc)  # each range judged within its phase's steady steps
    r = _ranges(doc)
    assert r["cpu_bound"]["scope"] == r["gpu_bound"]["scope"] == "steady steps"
    assert r["cpu_bound"]["gpu_busy_share"] == pytest.approx(truth["cpu_bound"], abs=1e-9)
    assert r["gpu_bound"]["gpu_busy_share"] == pytest.approx(truth["gpu_bound"], abs=1e-9)
    assert truth["cpu_bound"] < 0.01 and truth["gpu_bound"] > 0.9  # README: 0.3% and 91.5%


def test_kineto_busy_shares_match_an_independent_sweep(kineto_doc):
    truth = _kineto_truth(KINETO, kineto_doc)
    r = _ranges(kineto_doc)
    for name in ("cpu_bound", "gpu_bound"):
        # µs floats from the trace vs our ns: endpoints differ by ~1 ns each, so 1e-5 of an 11 ms range
        assert r[name]["gpu_busy_share"] == pytest.approx(truth[name], abs=1e-5)


@pytest.mark.parametrize("which", ["nsys", "kineto"])
def test_cpu_bound_range_is_cpu_bound_and_blames_the_dataloader(which, nsys_doc, kineto_doc):
    doc = nsys_doc[1] if which == "nsys" else kineto_doc
    r = _ranges(doc)
    assert r["cpu_bound"]["verdict"] == "cpu-bound"
    assert r["cpu_bound"]["idle_causes"][0]["range"] == "cpu_bound/dataloader"
    assert r["gpu_bound"]["verdict"] == "gpu-bound"
    assert doc["timeline"]["causes"][0]["name"] == "cpu_bound/dataloader"
    assert "dataloader" in doc["timeline"]["headline_cause"]
    assert "gpu-starved-by-data-loading" in {f["id"] for f in doc["findings"]}


def test_both_inputs_give_the_same_verdicts(nsys_doc, kineto_doc):
    a, b = _ranges(nsys_doc[1]), _ranges(kineto_doc)
    common = set(a) & set(b)
    assert {"cpu_bound", "gpu_bound", "cpu_bound/dataloader", "cpu_bound/step"} <= common
    for name in ("cpu_bound", "gpu_bound", "cpu_bound/step"):
        assert a[name]["verdict"] == b[name]["verdict"], name
    assert nsys_doc[1]["timeline"]["verdict"] == kineto_doc["timeline"]["verdict"] == "cpu-bound"
    assert nsys_doc[1]["timeline"]["steps"]["name"] == kineto_doc["timeline"]["steps"]["name"] == "cpu_bound/step"


def test_steps_use_steady_state_not_warm_up(nsys_doc):
    steps = nsys_doc[1]["timeline"]["steps"]
    assert steps["count"] == 30 and set(steps["families"]) == {"cpu_bound/step", "gpu_bound/step"}
    assert steps["warmup_steps"] >= 1  # README: first steps 185 ms and 17 ms
    it = steps["iteration_ns"]
    assert max(it) > 20 * steps["median_iteration_ns"]
    assert 0.6e6 < steps["median_ns"] < 0.9e6  # README: steady-state step 0.76 ms
    assert steps["median_gpu_busy_share"] < 0.05


def test_kernels_are_attributed_through_their_launch_call(nsys_doc):
    db, doc = nsys_doc
    con = sqlite3.connect(db)
    # independent: kernels whose cudaLaunch* call started inside a gpu_bound 'step' range
    s, e = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text='gpu_bound'").fetchone()
    n = con.execute("""SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
                       ON r.correlationId = k.correlationId
                       WHERE r.start >= ? AND r.start <= ?""", (s, e)).fetchone()[0]
    r = _ranges(doc)
    assert r["gpu_bound"]["launches"] == n


def test_steady_window_and_whole_run_counts(nsys_doc):
    """The family's causes come from its steady window (warm-up left out); syncs and copies are counted
    over the whole run and attributed to the range that issued them."""
    db, doc = nsys_doc
    tl = doc["timeline"]
    assert tl["steps"]["warmup_steps"] == 2  # README: the first two steps are one-time initialisation
    con = sqlite3.connect(db)
    # independent: the steady window starts at the third cpu_bound 'step' and lasts at least to the last one's end
    cpu = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text='cpu_bound'").fetchone()
    steps = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text='step' AND start >= ? AND end <= ? "
                        "ORDER BY start", cpu).fetchall()
    lo, hi = steps[2][0], steps[-1][1]
    assert tl["steps"]["steady_window_ns"][0] == lo and tl["steps"]["steady_window_ns"][1] >= hi
    n_copies = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind=1 AND srcKind=0").fetchone()[0]
    assert tl["pageable_copies"]["copies"] == n_copies > 0
    n_loaders = con.execute("SELECT count(*) FROM NVTX_EVENTS WHERE text='dataloader'").fetchone()[0]
    assert tl["sync"]["by_range"]["cpu_bound/dataloader"]["calls"] == n_loaders  # one .cuda() sync per batch
    fam = {f["name"]: f for f in tl["step_families"]}
    assert set(fam) == {"cpu_bound/step", "gpu_bound/step"}
    assert fam["cpu_bound/step"]["causes"][0]["name"] == "cpu_bound/dataloader"
    assert fam["gpu_bound/step"]["verdict"] == "gpu-bound"


def test_combined_with_ncu_makes_range_shares_hardware_true(nsys_doc):
    from tests.conftest import RAW
    db, _ = nsys_doc
    v = nsighttc.analyze([db, RAW])
    k = v.launches
    gemm = k[k["nvtx"] == "gpu_bound/step"]
    assert (gemm["evidence"] == "hardware").all()  # nvjet fp16 GEMMs: merged from ncu by name
    assert (gemm["tensor_core"] == True).all()  # noqa: E712
    assert any("merged ncu hardware evidence" in w for w in v.warnings)
    assert _ranges(v.to_json())["gpu_bound"]["tc_time_share"] > 0.99


def test_markdown_headlines_for_timeline(run_cli, nsys_doc):
    code, out, _ = run_cli("analyze", nsys_doc[0])
    assert code == 0
    bold = [line for line in out.splitlines() if line.startswith("**")]
    assert bold[0].startswith("**Tensor Cores:")
    assert bold[1].startswith("**GPU busy") and "CPU-bound" in bold[1] and "dataloader" in bold[1]
    assert "| `cpu_bound` | 1 |" in out


def test_thresholds_and_step_range_are_configurable(nsys_doc):
    from nsighttc.analysis.timeline import Thresholds
    db, _ = nsys_doc
    # with a 0.1% line the starved loop no longer counts as CPU-bound
    doc = nsighttc.analyze([db], thresholds=Thresholds(cpu_bound=0.001, gpu_bound=0.002)).to_json()
    assert _ranges(doc)["cpu_bound"]["verdict"] == "gpu-bound"
    doc = nsighttc.analyze([db], thresholds=Thresholds(min_kernels=10_000)).to_json()
    assert _ranges(doc)["cpu_bound"]["verdict"] == "insufficient-data"
    doc = nsighttc.analyze([db], step_range="dataloader").to_json()
    assert doc["timeline"]["steps"]["name"] == "cpu_bound/dataloader"


def test_cli_rejects_contradictory_thresholds(run_cli, nsys_doc):
    code, _, err = run_cli("analyze", nsys_doc[0], "--cpu-bound", "0.9", "--gpu-bound", "0.5")
    assert code == 2 and "--cpu-bound" in err


def test_empty_timeline_does_not_swallow_ncu_evidence(tmp_path):
    """Under ncu, torch.profiler records no GPU events (CUPTI refuses a second subscriber): the verdict
    must then come from the counters, not from the empty timeline."""
    from tests.conftest import RAW
    doc = json.load(fixture_open(KINETO))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in
                          ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_runtime", "cuda_driver")]
    f = tmp_path / "empty_trace.json"
    f.write_text(json.dumps(doc))
    v = nsighttc.analyze([f, RAW])
    assert v.tensor_cores["launches"] == 404 and v.tensor_cores["evidence"] == "hardware"
    assert any("no GPU events" in w for w in v.warnings)


def test_merge_matches_names_written_with_template_casts():
    """ncu_report and nsys 2025 write `<(int)1024, (bool)0>` where the ncu CSV writes `<1024, 0>`."""
    from nsighttc.analysis import merge
    from nsighttc.analysis.tensor_cores import classify_launches
    from nsighttc.parse import load
    from tests.conftest import RAW
    hw = classify_launches(load(RAW).kernels)
    tl = hw.copy()
    tl["name"] = tl["name"].str.replace(r"<(\d+), ", lambda m: f"<(int){m.group(1)}, ", regex=True)
    changed = tl["name"] != hw["name"]
    assert changed.any()
    for c in ("tc_ops_fp16", "tc_ops_bf16", "tc_ops_tf32", "tc_ops_fp8", "tc_ops_int8", "tc_ops_fp64",
              "inst_hmma", "inst_hfma2", "inst_imma", "inst_dmma", "inst_gmma"):
        tl[c] = float("nan")
    tl = classify_launches(tl)
    out, _ = merge.apply_hardware_evidence(tl, hw)
    assert (out["evidence"] == "hardware").all()
    assert (out["tensor_core"].to_numpy() == hw["tensor_core"].to_numpy()).all()
    assert (out["tc_state"] == hw["tc_state"]).all()


@given(st.lists(st.integers(0, 200), max_size=24, unique=True), st.lists(st.integers(-5, 205), max_size=30))
@settings(max_examples=300, deadline=None)
def test_idle_gaps_are_cut_at_every_inside_point(edges, cuts):
    """idle._cut_gaps places pieces by arithmetic instead of sorting them: against the definition (each gap
    split at the distinct cuts strictly inside it, pieces in time order)."""
    from nsighttc.analysis.timeline.idle import _cut_gaps
    pts = sorted(edges)[: len(edges) // 2 * 2]
    gs, ge = np.array(pts[0::2], dtype=float), np.array(pts[1::2], dtype=float)
    want = []
    for g, (s, e) in enumerate(zip(gs, ge)):
        inner = sorted({c for c in cuts if s < c < e})
        bounds = [s, *inner, e]
        want += [(lo, hi, g) for lo, hi in zip(bounds[:-1], bounds[1:])]
    a, b, g = _cut_gaps(gs, ge, np.array(cuts, dtype=float))
    assert list(zip(a.tolist(), b.tolist(), g.tolist())) == want


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 60)), max_size=40),
       st.lists(st.floats(-10, 400, allow_nan=False), max_size=40), st.integers(1, 7))
@settings(max_examples=300, deadline=None)
def test_union_and_membership_match_their_definitions(spans, times, slice_len):
    """intervals.union (running maximum in place) and idle.in_intervals (a slice at a time, ends padded with
    -inf): against a plain merge and a plain scan, with slices shorter than the input."""
    from nsighttc import allocator
    from nsighttc.analysis import intervals
    from nsighttc.analysis.timeline import idle
    s = np.array([a for a, _ in spans], dtype=float)
    e = s + np.array([w for _, w in spans], dtype=float)
    merged = []
    for a, b in sorted(zip(s.tolist(), e.tolist())):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    u = intervals.union(s, e)
    assert [[a, b] for a, b in zip(u.starts.tolist(), u.ends.tolist())] == merged
    assert u.cum.tolist() == [0.0] + np.cumsum([b - a for a, b in merged]).tolist()
    old, allocator.SLICE = allocator.SLICE, slice_len
    try:
        got = idle.in_intervals(np.array(times), u.starts, u.ends)
    finally:
        allocator.SLICE = old
    assert got.tolist() == [any(a <= t < b for a, b in merged) for t in times]


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.sampled_from(["x", "y"]), st.booleans(),
                          st.one_of(st.none(), st.integers(0, 9)), st.floats(0, 100)), min_size=1, max_size=60),
       st.booleans())
@settings(max_examples=200, deadline=None)
def test_packed_groups_match_pandas_groupby(rows, dropna):
    """tensor_cores.packed_groups (keys packed into one integer) groups exactly as pandas' group-by does, in
    order of first appearance, with missing keys dropped or kept; sums and minima per group agree."""
    import pandas as pd
    from nsighttc.analysis.tensor_cores import _min_by, _sum_by, packed_groups
    df = pd.DataFrame({"k1": pd.Categorical([r[0] for r in rows], categories=["a", "b", "c"]),
                       "k2": pd.Categorical([r[1] for r in rows]), "k3": [r[2] for r in rows],
                       "id": [np.nan if r[3] is None else float(r[3]) for r in rows], "v": [r[4] for r in rows]})
    gid, keys = packed_groups(df, ["k1", "k2", "k3"], dropna=dropna)
    g = df.groupby(["k1", "k2", "k3"], sort=False, observed=True, dropna=dropna)
    want = g.agg(v=("v", "sum"), id=("id", "min")).reset_index()
    assert keys.astype(object).where(keys.notna(), None).values.tolist() == \
        want[["k1", "k2", "k3"]].astype(object).where(want[["k1", "k2", "k3"]].notna(), None).values.tolist()
    assert np.allclose(_sum_by(gid, df["v"].to_numpy(), len(keys)), want["v"].to_numpy())
    assert np.allclose(_min_by(gid, df["id"].to_numpy(), len(keys)), want["id"].to_numpy(), equal_nan=True)
    dropped = df[["k1", "k2"]].isna().any(axis=1).to_numpy() if dropna else np.zeros(len(df), dtype=bool)
    assert ((gid < 0) == dropped).all()
