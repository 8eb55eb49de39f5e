"""Issue 56 on recordings from the H100 (tests/fixtures/inference/README.md, call "repro"): same-name ranges nested in
each other are one step at their outermost level, advice knows the CUDA graphs a recording already replays, and
``try`` never presents a variant that changed nothing as a speed-up (tests/fixtures/try/h100_generate_unchanged).
Counts are taken from the raw files here, apart from the analysis."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from nsighttc.analysis import variant_gain
from nsighttc.analysis.timeline.launch_advice import launch_fix
from nsighttc.api import analyze
from nsighttc.experiment import measure
from nsighttc.experiment.auto import choose
from nsighttc.experiment.rows import apply_noise, row as make_row, unchanged_noise
from nsighttc.experiment.options import TryOptions
from nsighttc.runtime import variants
from tests.conftest import fixture_open

FIX = Path(__file__).resolve().parents[1] / "fixtures"
INF = FIX / "inference"
NESTED_HOOK = INF / "llm_nested_hook_marks_nsys.sqlite.xz"   # an NVTX `nsighttc.forward` around every module
NESTED_USER = INF / "llm_nested_forward_nsys.sqlite.xz"      # an NVTX `forward` around every module
GRAPHED = INF / "llm_static_graphs_nsys.sqlite.xz"           # a static cache: the decode replayed as CUDA graphs
DYNAMIC = INF / "llm_generate_user_nsys.sqlite.xz"           # the same loop with its dynamic cache (call49)
UNCHANGED = FIX / "try" / "h100_generate_unchanged"
# the recorded program: wrappers/llm_generate.py --requests 3 --warmup 1 --new-tokens 24 (README)
MODEL_CALLS = (3 + 1) * 24


def _sqlite(path: Path, tmp_path: Path) -> sqlite3.Connection:
    dest = tmp_path / path.name.removesuffix(".gz")
    with fixture_open(path) as src, dest.open("wb") as out:
        shutil.copyfileobj(src, out)
    return sqlite3.connect(dest)


def _outermost_by_stack(rows: list[tuple[int, int, int]]) -> int:
    """Ranges not inside another of the list on their thread, counted with a stack (the test's own way)."""
    kept = 0
    ends: dict[int, int] = {}
    for start, end, tid in sorted(rows, key=lambda r: (r[2], r[0], -r[1])):
        if start >= ends.get(tid, -1):
            kept += 1
            ends[tid] = end
        else:
            ends[tid] = max(ends[tid], end)
    return kept


@pytest.fixture(scope="module")
def nested_hook():
    return analyze([NESTED_HOOK], jobs=1).to_json()


def test_same_name_marks_nested_per_module_are_one_step_at_their_outermost_level(nested_hook, tmp_path):
    con = _sqlite(NESTED_HOOK, tmp_path)
    rows = con.execute("SELECT start, end, globalTid FROM NVTX_EVENTS WHERE text = 'nsighttc.forward'").fetchall()
    assert len(rows) > 20 * MODEL_CALLS  # nested a module deep each: 5,568 ranges for 96 calls
    assert _outermost_by_stack(rows) == MODEL_CALLS
    steps = nested_hook["timeline"]["steps"]
    assert steps["source"] == "hook" and steps["count"] == MODEL_CALLS  # was 5,568 steps of 126 µs (issue 56)


def test_nested_user_ranges_leave_the_model_calls_to_the_kernels():
    """A `forward` range per module (the program's own): no step marks, so the model calls come from the kernels,
    the same count as the hooks' outermost marks give."""
    steps = analyze([NESTED_USER], jobs=1).to_json()["timeline"]["steps"]
    assert steps["source"] == "kernel-period" and steps["count"] == MODEL_CALLS


@pytest.fixture(scope="module")
def graphed():
    return analyze([GRAPHED], jobs=1).to_json()


def test_a_decode_replayed_as_cuda_graphs_gets_no_advice_to_adopt_them(graphed, tmp_path):
    con = _sqlite(GRAPHED, tmp_path)
    launches = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON r.nameId = s.id "
                           "WHERE s.value LIKE 'cudaGraphLaunch%'").fetchone()[0]
    tl = graphed["timeline"]
    assert tl["in_use"]["cuda_graphs"]["launches"] == launches > 0
    assert "torch_compile" in tl["in_use"]  # transformers compiled the decoding step: Inductor's kernels
    text = " ".join(f"{f['title']} {f['advice']}" for f in graphed["findings"])
    for advice in ("Replay the decoding step as a CUDA graph", "cache_implementation=\"static\"",
                   "mode=\"reduce-overhead\"", "--variant compile-reduce-overhead", "--variant static-cache"):
        assert advice not in text
    launch = next(f for f in graphed["findings"] if f["id"] == "launch-bound")
    assert "already replays CUDA graphs" in launch["advice"] and "outside the graphs" in launch["advice"]
    top = tl["graphs"]["outside_top"][0]
    assert top["count"] > 0 and f"`{top['name']}`" in launch["advice"]  # what still launches one by one, named
    # try offers only what changes something, and predicts nothing for graphs the program already replays
    assert variant_gain.for_variant(graphed, "static-cache") is None and variant_gain.for_variant(graphed, "compile-reduce-overhead") is None
    picked = dict(choose(graphed, {}))
    assert "static-cache" not in picked and "compile-reduce-overhead" not in picked


def test_the_same_loop_without_graphs_is_still_told_to_replay_them():
    doc = analyze([DYNAMIC], jobs=1).to_json()
    assert "cuda_graphs" not in (doc["timeline"].get("in_use") or {})
    launch = next(f for f in doc["findings"] if f["id"] == "launch-bound")
    assert "Replay the decoding step as a CUDA graph" in launch["advice"]
    assert variant_gain.for_variant(doc, "static-cache") is not None


def test_the_training_fix_leaves_out_what_the_program_does_already():
    """The Trainer fine-tune steps AdamW with foreach kernels (multi_tensor_apply): its launch fix no longer tells it to
    adopt a foreach or fused optimizer."""
    doc = analyze([FIX / "unmarked" / "trainer_torch.json.xz"], jobs=1).to_json()
    in_use = doc["timeline"]["in_use"]
    assert "foreach_optimizer" in in_use and "cuda_graphs" not in in_use
    fix = launch_fix("training", in_use, {})
    assert "foreach optimizer" not in fix and "Already in use" in fix and "CUDA graphs" in fix
    assert "fused or foreach optimizer" in launch_fix("training", {}, {})


def _run(variant: str, name: str) -> dict:
    """One plain run of try as the runner makes it, from the H100's files (old records: their applied flag computed)."""
    d = UNCHANGED / variant
    record = json.loads((d / "applied.json").read_text())
    for item in record["variants"]:
        item["applied"], why = variants._applied(item, record["dataloaders"])
        if why:
            item["not_applied"] = why
    return {"name": name, "status": "ok", "error": None, "applied": record["variants"] or None, "metric": None,
            "seconds": 1.0, "run_dir": variant, "_record": record, "_steps": measure.read(d / "step_times.json")}


def test_variants_that_applied_nowhere_are_not_measured_as_speed_ups():
    """On the H100 the generate loop names its cache (static-cache changed 0 calls) and builds no DataLoader
    (workers=2): both runs were the program unchanged, reported as 1.33x and 1.76x ("faster"). Now: not applied,
    their ratio kept as run-to-run noise, which also bounds what one round of any other variant can claim."""
    before = {v["name"]: v for v in json.loads((UNCHANGED / "try_before.json").read_text())["variants"]}
    base = [_run("baseline", "baseline")]
    rows = [make_row("baseline", None, base, base, None, None, TryOptions())]
    for variant, name in (("static-cache", "static-cache"), ("workers_2", "workers=2")):
        r = make_row(name, None, base, [_run(variant, name)], None, {"low": 1.5, "high": 3.5, "basis": "x",
                                                                     "findings": []}, TryOptions())
        assert r["status"] == "not applied" and r["speedup"] is None and r["change"] is None
        assert r["predicted"] is None and r["prediction"] is None
        assert r["unchanged_run"]["speedup"] == pytest.approx(before[name]["speedup"])
        rows.append(r)
    assert "generate()" in rows[1]["not_applied"] and "DataLoader" in rows[2]["not_applied"]
    noise = unchanged_noise(rows)
    assert noise[1] == "workers=2" and noise[0] == pytest.approx(before["workers=2"]["speedup"])
    claimed = {"name": "tf32", "status": "ok", "speedup": 1.5, "change": "faster", "rounds": [{}], "prediction": "within"}
    apply_noise([claimed], noise)
    assert claimed["change"] == "no measurable change" and "run-to-run noise" in claimed["note"]
