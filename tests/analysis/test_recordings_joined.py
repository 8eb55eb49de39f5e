"""A program profiling itself as PyTorch's profiler recipe shows (``schedule(wait=1, warmup=1, active=3)`` with
``tensorboard_trace_handler``: one trace per cycle), its log folder given to ``nsighttc analyze``
(benchmarks/gpu/user_programs/sched_cycles.py, H200, tests/fixtures/steps/README.md). The cycles' files were read as
one recording: the last step of each cycle reached across the unrecorded stretch to the next cycle's first. The eager
step (16.3 ms plain, ~24.7 ms under its own profiler) read "1 slow step ... 0.35 s: host work outside any range" with
the GPU busy 5%; the graph replay (4.19 ms plain) read "12 steady steps of 28.7 ms", CPU-bound at 22%."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import nsighttc
from nsighttc.analysis.timeline import RANGE_CAUSES
from nsighttc.parse import segments

CYCLES = Path(__file__).resolve().parents[1] / "fixtures" / "steps" / "sched_cycles"
GRAPH_PLAIN_MS = 4.19          # the graph replay's step, plain (no profiler)
EAGER_PLAIN_MS = (16.3, 16.6)  # the eager step, plain, two runs


def _extents_ns(folder: Path) -> list[tuple[float, float]]:
    from nsighttc.api import _load_all
    return sorted(segments._extent(p) for p in _load_all(sorted(folder.iterdir())))


def test_a_graph_loops_cycles_are_its_replays_at_the_gpus_pace_not_the_gap_between_cycles():
    doc = nsighttc.analyze([CYCLES / "graph4"]).to_json()
    tl = doc["timeline"]
    steps = tl["steps"]
    assert steps["source"] == "explicit" and steps["count"] == 12
    typical = max(steps["median_iteration_ns"], steps["median_effective_ns"]) / 1e6
    # the replay under the profiler (CUPTI records each of the graph's kernels) is slower than plain, never 2x
    assert GRAPH_PLAIN_MS <= typical <= 1.5 * GRAPH_PLAIN_MS, typical
    assert tl["verdict"] == "gpu-bound" and tl["gpu_busy_share"] > 0.85
    rec = tl["recordings"]
    assert rec["recordings"] == 4 and len(rec["gaps_ns"]) == 3
    ext = _extents_ns(CYCLES / "graph4")
    between = sum(b[0] - a[1] for a, b in zip(ext, ext[1:]))
    assert rec["unrecorded_ns"] == pytest.approx(between, rel=1e-6)
    # every second of the recordings themselves accounted for, and nothing of the stretches between them
    own = sum(hi - lo for lo, hi in ext)
    assert tl["loop_time"]["total_ns"] == pytest.approx(own, rel=0.05)
    from nsighttc.render.markdown import render
    md = render(doc)
    assert "4 recordings one after another" in md and "each recording's 3" in md
    import json
    import jsonschema
    schema = json.loads((Path(nsighttc.__file__).parent / "schema" / "verdict-1.json").read_text())
    rec_schema = schema["properties"]["timeline"]["properties"]["recordings"]
    jsonschema.validate(json.loads(json.dumps(doc, default=str)), schema)
    jsonschema.validate(rec, rec_schema)
    assert "DataLoader workers" not in md


def test_an_eager_loops_two_cycles_eight_steps_apart_have_no_slow_step_and_no_host_work_between_them():
    doc = nsighttc.analyze([CYCLES / "eager_rep"]).to_json()
    tl = doc["timeline"]
    steps = tl["steps"]
    assert steps["source"] == "explicit" and steps["count"] == 6
    # the step as the program's own profiler saw it: its ProfilerStep ranges (the cost of that profiler on top of
    # the plain 16.3-16.6 ms), the iteration no longer than the range plus the profiler's own work between steps
    assert steps["median_iteration_ns"] <= 1.1 * steps["median_ns"]
    assert min(EAGER_PLAIN_MS) <= steps["median_iteration_ns"] / 1e6 <= 2 * max(EAGER_PLAIN_MS)
    parts = {p["part"]: p for p in tl["loop_time"]["parts"]}
    assert "slow steps" not in parts or parts["slow steps"]["share"] < 0.05, parts
    assert "outside any range" not in (tl.get("headline_cause") or "")
    assert tl["recordings"]["recordings"] == 2 and tl["recordings"]["unrecorded_ns"] > 0.25e9
    assert any(re.search(r"2 recordings made one after another .* not recorded", w) for w in doc["warnings"])


def test_recordings_that_overlap_in_time_are_not_joined():
    """Simultaneous processes' timelines (or one recording given twice, by its parsed copies) stay as they are."""
    from nsighttc.api import _load_all
    files = sorted((CYCLES / "eager_rep").iterdir())
    parsed = _load_all([files[0], files[0]])
    out, joined = segments.join(parsed)
    assert joined is None and out is parsed
    # one after another: joined, the later moved back by the gap, its kernels with it
    parsed = _load_all(files)
    out, joined = segments.join(parsed)
    assert joined is not None and joined["recordings"] == 2
    later = max(range(2), key=lambda i: segments._extent(parsed[i])[0])
    gap = joined["gaps_ns"][0]
    assert (parsed[later].kernels["start_ns"] - out[later].kernels["start_ns"]).round().eq(round(gap)).all()
    assert (parsed[later].timeline.api["start_ns"] - out[later].timeline.api["start_ns"]).round().eq(round(gap)).all()


def test_profiler_steps_whose_paths_grew_by_ranges_crossing_them_are_one_family():
    """Lightning's ``Trainer(profiler="pytorch")`` (benchmarks/gpu/user_programs/lit_profiler.py, its launcher trace on
    this project's CPU machine): Lightning opens ``run_training_epoch`` inside the first ``ProfilerStep`` and steps its
    profiler inside ``Optimizer.step``, so each step's path holds the ones before; the recording read "1 steady step"
    of the first one's 14.9 ms, the other 60 dropped as nested inside it."""
    doc = nsighttc.analyze([CYCLES.parent / "lightning_profiler_cpu_torch.json.xz"]).to_json()
    tl = doc["timeline"]
    steps = tl["steps"]
    # nested by start alone, its ranges' paths grew a step's ranges each step: 1,943 ranges, paths 245 levels and 7 KB
    # deep, each listing up to 1,912 host ranges as causes (a 2.4 GB verdict, 27 s of analysis; 102 MB with the
    # ranges' causes cut to RANGE_CAUSES). Nested by containment, each range is listed once, with its 60 instances; the
    # ranges holding many others still show the first RANGE_CAUSES of them
    assert max(len(r.get("causes") or []) for r in doc["ranges"]) == RANGE_CAUSES
    assert max(r["name"].count("/") for r in doc["ranges"]) < 10 and len(doc["ranges"]) < 100
    assert len(json.dumps(doc)) < 2e6
    batch = next(r for r in doc["ranges"] if r["name"].endswith("/[pl][profile]run_training_batch"))
    assert batch["count"] == 60
    assert steps["source"] == "explicit" and steps["name"].endswith("/ProfilerStep") and steps["count"] == 61
    assert steps["name"].count("ProfilerStep") == 1 and steps["median_iteration_ns"] < 5e6
