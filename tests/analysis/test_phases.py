"""Several phases, CUDA graphs and the cause of idle time per range, on wrappers/multi_phase.py recorded
on an H100 three ways (nsys whole-graph trace, nsys node trace, torch.profiler). Each phase was built for
one reason to be slow or fast (see the wrapper's docstring); every recording must find that reason."""
import gzip
import shutil
import sqlite3

import pytest

import nsighttc
from tests.conftest import MULTI_GRAPH, MULTI_NODE, MULTI_TORCH, fixture_open

P = "multi_phase.py/"
# phase -> (verdict, kind of the first cause, name of the first cause or None)
EXPECTED = {
    "train_bf16": ("gpu-bound", None, None),
    "graph_replay": ("gpu-bound", None, None),
    "item_sync": ("cpu-bound", "sync", "cudaStreamSynchronize"),
    "host_preprocess": ("cpu-bound", "host-range", P + "host_preprocess/preprocess"),
    "tiny_kernels": ("cpu-bound", "launch-overhead", None),
}


def _sqlite(tmp_path_factory, gz):
    db = tmp_path_factory.mktemp("mp") / gz.name.replace(".gz", "")
    with fixture_open(gz) as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return db


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    return {"graph": _sqlite(tmp_path_factory, MULTI_GRAPH), "node": _sqlite(tmp_path_factory, MULTI_NODE)}


@pytest.fixture(scope="module")
def docs(dbs):
    return {"graph": nsighttc.analyze([dbs["graph"]]).to_json(), "node": nsighttc.analyze([dbs["node"]]).to_json(),
            "torch": nsighttc.analyze([MULTI_TORCH]).to_json()}


def _fams(doc):
    return {f["name"][len(P):].rsplit("/", 1)[0]: f for f in doc["timeline"]["step_families"]}


@pytest.mark.parametrize("which", ["graph", "node", "torch"])
def test_every_phase_gets_its_own_verdict_and_cause(docs, which):
    fams = _fams(docs[which])
    assert set(fams) == set(EXPECTED)  # torch.optim's `Optimizer.step#...` labels are not step families
    for phase, (verdict, kind, name) in EXPECTED.items():
        f = fams[phase]
        assert f["verdict"] == verdict, (phase, f["verdict"], f["causes"][:2])
        assert f["warmup_steps"] <= 2
        if kind:
            assert f["causes"][0]["kind"] == kind, (phase, f["causes"][:2])
            if name:
                assert f["causes"][0]["name"] == name
            assert f["headline_cause"]


def test_both_input_kinds_agree(docs):
    for a in ("graph", "torch"):
        fa, fb = _fams(docs["node"]), _fams(docs[a])
        for phase in EXPECTED:
            assert fa[phase]["verdict"] == fb[phase]["verdict"], (a, phase)
            assert fa[phase]["causes"][0]["kind"] == fb[phase]["causes"][0]["kind"] or EXPECTED[phase][1] is None


def test_headline_names_the_dominant_phase(docs, run_cli, dbs):
    tl = docs["node"]["timeline"]
    fams = tl["step_families"]
    # the family whose steady state holds the most wall time speaks for `steps` and the headline
    assert tl["steps"]["name"] == max(fams, key=lambda f: f["steady_wall_ns"])["name"] == P + "host_preprocess/step"
    assert tl["verdict"] == "cpu-bound" and "preprocess" in tl["headline_cause"]
    code, out, _ = run_cli("analyze", dbs["node"])
    assert code == 0
    head = [line for line in out.splitlines() if line.startswith("**GPU busy")][0]
    assert "phase `multi_phase.py/host_preprocess`" in head and "5 phases" in head
    assert "## Phases" in out and "| `multi_phase.py/item_sync/step` | 30 |" in out
    assert "60 graph launches" in out


def test_whole_graph_executions_count_as_busy_and_are_attributed(docs, dbs):
    """nsys's default trace writes graphs to CUPTI_ACTIVITY_KIND_GRAPH_TRACE, not as kernels."""
    con = sqlite3.connect(dbs["graph"])
    n, gpu_ns = con.execute("SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchone()
    assert n == 60 and con.execute("SELECT count(graphNodeId) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] == 0
    doc = docs["graph"]
    g = doc["timeline"]["graphs"]
    assert g["launches"] == 60 and g["trace"] == "graph" and g["gpu_busy_ns"] == pytest.approx(gpu_ns)
    r = {x["name"]: x for x in doc["ranges"]}
    step = r[P + "graph_replay/step"]
    assert step["launches"] == 60 and step["kernel_time_ns"] == pytest.approx(gpu_ns)  # via the launch's correlation id
    assert _fams(doc)["graph_replay"]["median_gpu_busy_share"] > 0.95
    graph_rows = [k for k in doc["kernels"] if k["name"].startswith("CUDA graph #")]
    assert graph_rows and all(k["tensor_core"] is None and k["name_rule"] == "cuda-graph-whole" for k in graph_rows)
    assert "cuda-graphs-traced-whole" in {f["id"] for f in doc["findings"]}


@pytest.mark.parametrize("which", ["node", "torch"])
def test_graph_kernels_are_named_and_attributed(docs, dbs, which):
    doc = docs[which]
    g = doc["timeline"]["graphs"]
    assert g["launches"] == 60 and g["trace"] == "node" and g["kernels"] == 420  # 7 kernels x 60 replays
    if which == "node":
        con = sqlite3.connect(dbs["node"])
        assert con.execute("SELECT count(graphNodeId) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] == 420
    r = {x["name"]: x for x in doc["ranges"]}
    step = r[P + "graph_replay/step"]
    assert step["launches"] == 420 and step["tc_time_share"] > 0.8 and step["by_dtype"].get("fp16", 0) > 0.8
    assert 0.05 < g["share_of_gpu_busy"] < 0.2


def test_syncs_are_counted_over_the_run_and_attributed_to_their_range(docs, dbs):
    con = sqlite3.connect(dbs["node"])
    s, e = con.execute("""SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds t ON t.id = n.textId
                          WHERE COALESCE(n.text, t.value) = 'item_sync'""").fetchone()
    from nsighttc.analysis.timeline import SYNC_CALLS
    names = con.execute("""SELECT t.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds t ON t.id = r.nameId
                           WHERE r.start >= ? AND r.end <= ?""", (s, e)).fetchall()
    n_sync = sum(1 for (v,) in names if v.rsplit("_v", 1)[0] in SYNC_CALLS)
    n_dtoh = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 2").fetchone()[0]
    sync = docs["node"]["timeline"]["sync"]
    assert n_sync >= 30 and sync["dtoh_copies"] == n_dtoh == 30  # one .item() per step
    assert sync["dtoh_by_range"] == {P + "item_sync/step": 30}
    in_phase = sum(v["calls"] for k, v in sync["by_range"].items() if k.startswith(P + "item_sync"))
    assert in_phase == n_sync
    r = {x["name"]: x for x in docs["node"]["ranges"]}
    c = r[P + "item_sync/step"]["causes"][0]
    assert c["kind"] == "sync" and "30 device-to-host copies" in c["detail"]
    sync_finding = next(f for f in docs["node"]["findings"] if f["id"] == "synchronising-calls")
    assert sync_finding["severity"] == "high" and "item_sync/step" in sync_finding["evidence"]


def test_every_timeline_range_carries_its_causes(docs):
    for r in docs["node"]["ranges"]:
        if r.get("verdict"):
            assert isinstance(r["causes"], list)
            assert [c["idle_ns"] for c in r["causes"]] == sorted((c["idle_ns"] for c in r["causes"]), reverse=True)
    r = {x["name"]: x for x in docs["node"]["ranges"]}
    assert r[P + "host_preprocess"]["causes"][0]["name"] == P + "host_preprocess/preprocess"
    assert r[P + "tiny_kernels/step"]["causes"][0]["kind"] == "launch-overhead"


def test_idle_causes_add_up_to_the_idle_time(docs):
    """Each idle moment gets exactly one cause: a range is judged on its time within the steady steps (warm-up
    iterations and start-up left out, as for the verdict), and its causes sum to its idle time there."""
    r = {x["name"]: x for x in docs["node"]["ranges"]}
    fams = _fams(docs["node"])
    assert fams["tiny_kernels"]["warmup_steps"] == 1 and fams["tiny_kernels"]["warmup_reasons"][0][-1] == "first step"
    for phase in ("tiny_kernels", "item_sync", "host_preprocess"):
        x = r[P + phase]
        assert x["scope"] == "steady steps" and fams[phase]["warmup_steps"] >= 1
        idle = x["wall_ns"] * (1 - x["gpu_busy_share"])
        assert sum(c["idle_ns"] for c in x["causes"]) == pytest.approx(idle, rel=0.02), phase
        # the warm-up is left out: the range's steady wall time is its iterations after warm-up (plus whatever of
        # the range lies between them and after them), never the first iteration
        assert x["wall_ns"] < sum(fams[phase]["iteration_ns"]) - fams[phase]["iteration_ns"][0] * 0.5


def test_plots_show_the_dominant_phase_and_each_kernel_once(docs, tmp_path):
    from nsighttc.render.plots import self_ranges, write_plots
    doc = docs["node"]
    act = doc["timeline"]["activity"]
    assert act["phase"] == P + "host_preprocess" and "host_preprocess/step" in act["scope"]
    own = self_ranges([r for r in doc["ranges"] if r["kernel_time_ns"] > 0])
    # each kernel once: the drawn ranges add up to all kernel time launched inside ranges
    in_ranges = sum(r["kernel_time_ns"] for r in doc["ranges"] if "/" not in r["name"])
    assert sum(r["kernel_time_ns"] for r in own) == pytest.approx(in_ranges, rel=1e-9)
    made = write_plots(doc, tmp_path)
    assert set(made.values()) == {"timeline.png", "kernel_time.png"}


def test_traces_without_ranges_or_api_calls_still_get_causes(tmp_path):
    """No NVTX/record_function ranges, or no CUDA API events: causes degrade, they do not break (without ranges
    the steps come from the repeating kernel sequence: tests/analysis/test_steps.py)."""
    import json as _json
    d = _json.load(fixture_open(MULTI_TORCH))
    for drop in ({"user_annotation"}, {"cuda_runtime", "cuda_driver"}):
        f = tmp_path / "t.json"
        f.write_text(_json.dumps({**d, "traceEvents": [e for e in d["traceEvents"] if e.get("cat") not in drop]}))
        tl = nsighttc.analyze([f]).to_json()["timeline"]
        assert tl["causes"] and all(c["idle_ns"] >= 0 for c in tl["causes"])
        if "user_annotation" in drop:
            # the loop that holds the most time from the kernel sequence, and the program's graph_replay phase (its
            # cudaGraphLaunch calls) beside it
            assert [f["source"] for f in tl["step_families"]] == ["kernel-period", "graph-replay"]
            assert tl["causes"][0]["name"] in ("(no range)", "kernel launches")
        else:  # no launch calls: nothing can be called launch overhead or a graph launch
            assert "launch-overhead" not in {c["kind"] for c in tl["causes"]} and tl["graphs"]["launches"] == 0


def test_verdict_shows_itself_in_notebooks_and_the_repl():
    v = nsighttc.analyze([MULTI_TORCH])
    md = v._repr_markdown_()
    assert md.startswith("# nsighttc verdict") and "## Phases" in md
    assert repr(v).startswith("<nsighttc.Verdict: Tensor Cores partial") and "timeline cpu-bound" in repr(v)


def test_impossible_records_are_dropped_with_a_note_and_open_ranges_truncated(dbs, tmp_path):
    """A crashed/killed run leaves NVTX ranges open (end NULL); a broken export can hold kernels that end
    before they start. Neither is used silently (issue 14)."""
    db = tmp_path / "broken.sqlite"
    shutil.copy(dbs["node"], db)
    con = sqlite3.connect(db)
    phase_id = con.execute("SELECT id FROM StringIds WHERE value = 'tiny_kernels'").fetchone()[0]
    con.execute("UPDATE NVTX_EVENTS SET end = NULL WHERE textId = ? OR text = 'tiny_kernels'", (phase_id,))
    n_bad = con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1000 WHERE rowid % 100 = 0").rowcount
    con.commit()
    con.close()
    v = nsighttc.analyze([db])
    doc = v.to_json()
    assert any(f"{n_bad:,} GPU activity records" in w for w in doc["warnings"])
    assert any("never closed" in w and "tiny_kernels" in w for w in doc["warnings"])
    r = {x["name"]: x for x in doc["ranges"]}
    assert r[P + "tiny_kernels"]["truncated"] is True and r[P + "item_sync"]["truncated"] is False
    assert P + "tiny_kernels/step" in r  # the steps inside the open range keep their path
    assert v.tensor_cores["kernel_time_ns"] > 0 and all(k["total_time_ns"] >= 0 for k in doc["kernels"])
    assert v.tensor_cores["launches"] == 16557 - n_bad


def test_a_trace_whose_gpu_events_have_no_times_is_no_gpu_work(tmp_path):
    import json as _json
    d = _json.load(fixture_open(MULTI_TORCH))
    ev = [e for e in d["traceEvents"] if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    k = next(e for e in d["traceEvents"] if e.get("cat") == "kernel")
    ev.append({key: val for key, val in k.items() if key not in ("ts", "dur")})
    f = tmp_path / "t.json"
    f.write_text(_json.dumps({**d, "traceEvents": ev}))
    doc = nsighttc.analyze([f]).to_json()
    assert doc["timeline"]["verdict"] == "no-gpu-work" and doc["timeline"]["gpu_busy_share"] == 0
    assert any("1 GPU activity records" in w for w in doc["warnings"])


def test_step_time_as_the_gpu_finished_it_when_the_host_runs_ahead():
    """graph_replay launches a CUDA graph per step and never waits: host iterations are ~0.05 ms, the GPU
    needs ~0.65 ms per step. The effective step follows the GPU; where the host waits each step, it is the
    host iteration."""
    from nsighttc import analyze
    from tests.conftest import MULTI_TORCH
    fams = {f["name"].rsplit("/", 2)[-2]: f for f in analyze([MULTI_TORCH]).timeline["step_families"]}
    g = fams["graph_replay"]
    per_step = g["steady_wall_ns"] / (g["count"] - g["warmup_steps"])
    assert g["median_iteration_ns"] < 0.2 * per_step
    assert abs(g["median_effective_ns"] - per_step) < 0.1 * per_step
    s = fams["item_sync"]
    assert s["median_effective_ns"] == s["median_iteration_ns"]
