"""Steps of recordings without step marks (nsighttc/analysis/timeline/steps/): the real H100 multi-phase recordings
(tests/fixtures/multi_phase_*) have each phase's steps marked; with the marks taken out, torch.profiler's own
optimizer/DataLoader ranges and the repeating kernel sequence must find the same steps. What is expected is read
independently from the original recording: the step count from its `step` ranges, the steady GPU-busy share from
its raw GPU intervals (merged here in plain Python), never from numbers typed in."""
from __future__ import annotations

import json
import shutil
import sqlite3

import numpy as np
import pytest

import nsighttc
from nsighttc.analysis.timeline import steps as steps_mod
from nsighttc.analysis.timeline.steps import period, steady

from ..conftest import MULTI_NODE, MULTI_TORCH
from tests.conftest import FIXTURES, fixture_open

P = "multi_phase.py/"


def _busy_share(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """GPU busy share of [lo, hi]: the intervals merged by a plain sweep (not nsighttc's code)."""
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if cur_e is None or s > cur_e:
            busy += (cur_e - cur_s) if cur_e is not None else 0.0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += (cur_e - cur_s) if cur_e is not None else 0.0
    return busy / (hi - lo)


@pytest.fixture(scope="module")
def torch_doc():
    return json.load(fixture_open(MULTI_TORCH))


def _gpu_intervals(doc) -> list[tuple[float, float]]:
    return [(e["ts"] * 1e3, (e["ts"] + e["dur"]) * 1e3) for e in doc["traceEvents"]
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X"]


def _explicit_steps(doc, phase: str) -> list[tuple[float, float]]:
    """The phase's `step` ranges, from the raw events: inside the phase's own range."""
    ev = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    ph = next(e for e in ev if e["name"] == phase)
    lo, hi = ph["ts"], ph["ts"] + ph["dur"]
    return sorted((e["ts"] * 1e3, (e["ts"] + e["dur"]) * 1e3) for e in ev
                  if e["name"] == "step" and lo <= e["ts"] <= hi)


def _without(doc, tmp_path, keep):
    f = tmp_path / "t.json"
    f.write_text(json.dumps({**doc, "traceEvents": [e for e in doc["traceEvents"] if keep(e)]}))
    return nsighttc.analyze([f]).to_json()["timeline"]


def _check(fam: dict, doc, phase: str):
    """The family found without marks against the recording's own marks: same steps, same steady busy share."""
    explicit = _explicit_steps(doc, phase)
    assert fam["count"] == len(explicit)
    lo, hi = fam["steady_window_ns"]
    independent = _busy_share(_gpu_intervals(doc), lo, hi)
    assert fam["steady_gpu_busy_share"] == pytest.approx(independent, abs=0.05)
    # the steady iterations' median is the loop's: the marked steps' start-to-start median, warm-up aside
    starts = np.array([s for s, _ in explicit])
    marked = float(np.median(np.diff(starts)[fam["warmup_steps"]:]))
    assert fam["median_iteration_ns"] == pytest.approx(marked, rel=0.05)


def test_optimizer_ranges_give_each_phase_its_steps(torch_doc, tmp_path):
    """torch.profiler's Optimizer.step# ranges (profiler-op), the `step` ranges removed."""
    tl = _without(torch_doc, tmp_path, lambda e: not (e.get("cat") == "user_annotation" and e.get("name") == "step"))
    fams = {f["phase"]: f for f in tl["step_families"] if f["source"] != "graph-replay"}
    assert set(fams) == {P + "host_preprocess", P + "train_bf16", P + "item_sync"}  # the phases with an optimizer
    assert {f["source"] for f in fams.values()} == {"profiler-op"} and tl["steps"]["source"] == "profiler-op"
    for phase, f in fams.items():
        _check(f, torch_doc, phase.split("/")[-1])
    # the graph_replay phase steps no optimizer outside its graph: its replays are its steps
    (graphed,) = [f for f in tl["step_families"] if f["source"] == "graph-replay"]
    _check(graphed, torch_doc, "graph_replay")
    assert tl["startup"]["seconds"] > 1.0 and tl["startup"]["first_step_ns"] < tl["startup"]["seconds"] * 1e9


def test_the_kernel_period_finds_the_loop_that_holds_the_most_time(torch_doc, tmp_path):
    """No ranges at all: the GPU's repeating kernel sequence (kernel-period) finds the host_preprocess loop, the
    phase that holds the most time, with its steps."""
    tl = _without(torch_doc, tmp_path, lambda e: e.get("cat") != "user_annotation")
    fam, graphed = tl["step_families"]
    assert fam["source"] == "kernel-period" and "23 kernels per iteration" in fam["found_by"]
    _check(fam, torch_doc, "host_preprocess")
    assert graphed["source"] == "graph-replay"  # the graph_replay phase, beside it
    _check(graphed, torch_doc, "graph_replay")
    assert tl["verdict"] == "cpu-bound"


def test_the_kernel_period_of_an_nsys_recording_without_nvtx(tmp_path):
    db = tmp_path / "node.sqlite"
    with fixture_open(MULTI_NODE, "rb") as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(db)
    name = "COALESCE(text, (SELECT value FROM StringIds WHERE id = textId))"
    phase = con.execute(f"SELECT start, end FROM NVTX_EVENTS WHERE {name} = 'host_preprocess'").fetchone()
    marked = [r[0] for r in con.execute(f"SELECT start FROM NVTX_EVENTS WHERE {name} = 'step' AND start BETWEEN ? "
                                        "AND ? ORDER BY start", tuple(phase))]
    gpu = [tuple(r) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
           for r in con.execute(f"SELECT start, end FROM {t}")]
    con.execute("DELETE FROM NVTX_EVENTS")
    con.commit()
    con.close()
    tl = nsighttc.analyze([db]).to_json()["timeline"]
    fam, graphed = tl["step_families"]
    assert graphed["source"] == "graph-replay"  # the program's graph_replay phase
    assert fam["source"] == "kernel-period" and fam["count"] == len(marked)
    lo, hi = fam["steady_window_ns"]
    assert fam["steady_gpu_busy_share"] == pytest.approx(_busy_share(gpu, lo, hi), abs=0.05)
    assert fam["median_iteration_ns"] == pytest.approx(float(np.median(np.diff(marked)[fam["warmup_steps"]:])), rel=0.05)


def test_explicit_marks_win_and_say_so():
    tl = nsighttc.analyze([MULTI_TORCH]).to_json()["timeline"]
    assert {f["source"] for f in tl["step_families"]} == {"explicit"} and tl["steps"]["source"] == "explicit"
    assert tl["steps"]["rule"] == steps_mod.RULE and "startup" in tl


def test_the_period_finder_on_sequences_built_to_test_it():
    """Two loops (periods 5 and 3, the second much longer in time), a warm-up iteration with extra kernels
    before the first, and start-up kernels: the longer loop wins, its warm-up iteration counts, nothing else."""
    names = [f"k{i}" for i in range(12)]
    startup = [9, 10, 11]
    loop_a = [0, 1, 2, 3, 4]
    loop_b = [5, 6, 7]
    seq = startup + [0, 8, 1, 2, 3, 4] + loop_a * 6 + loop_b * 10
    t = np.cumsum([1.0] * (len(startup) + 6 + 30) + [10.0] * 30)  # loop b's kernels are 10x further apart
    found = period.find(np.array(seq), names, t)
    assert found["period"] == 3 and found["warmup"] == 0 and len(found["launches"]) == 10
    only_a = startup + [0, 8, 1, 2, 3, 4] + loop_a * 6
    found = period.find(np.array(only_a), names, np.arange(len(only_a), dtype=float))
    # seven iterations, the first (with an extra kernel) included, after start-up; without optimizer kernels any
    # once-per-iteration kernel may start them
    launches = found["launches"]
    assert found["period"] == 5 and len(launches) == 7 and launches[0] >= 3 and (np.diff(launches[1:]) == 5).all()
    assert period.find(np.array([1, 2, 3, 4, 5, 6, 7, 8]), names) is None  # nothing repeats


def test_the_warm_up_rule():
    from nsighttc.analysis import intervals
    none = intervals.union(np.array([]), np.array([]))
    wall = np.array([5.0, 1.3, 1.0, 1.0, 1.0, 1.0])
    s = np.concatenate([[0.0], np.cumsum(wall)[:-1]])
    e = s + wall
    # a slow first step is warm-up; the second (1.3x, no one-time cause) is not
    assert steady.warmup(s, e, wall, 3.0, 1.2, none, np.array([])) == (1, [["5.0x the median step", "first step"]])
    # the second grew the allocator: warm-up too
    n, why = steady.warmup(s, e, wall, 3.0, 1.2, none, np.array([s[1] + 0.1]))
    assert n == 2 and why[1] == ["1.3x the median step", "allocator growth"]
    # a first step as fast as the others (a recording that starts mid-run) is steady
    flat = np.ones(6)
    assert steady.warmup(s, s + flat, flat, 3.0, 1.2, none, np.array([])) == (0, [])
    # a compiling step is warm-up whatever its length
    comp = intervals.union(np.array([s[0] + 0.1, s[1] + 0.1]), np.array([s[0] + 0.2, s[1] + 0.2]))
    assert steady.warmup(s, s + flat, flat, 3.0, 1.2, comp, np.array([]))[0] == 2

    # where nsighttc chose a window of steady steps (its mark starts between steps 3 and 4), every step before it is
    # warm-up, a long one amid fast ones too (a rank that waited while another changed its profiler's sessions);
    # without the mark, the prefix of long steps ends at the first fast one
    wall = np.array([1.0, 1.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    s = np.concatenate([[0.0], np.cumsum(wall)[:-1]])
    assert steady.warmup(s, s + wall, wall, 3.0, 1.2, none, np.array([])) == (0, [])
    n, why = steady.warmup(s, s + wall, wall, 3.0, 1.2, none, np.array([]), windows=np.array([s[4] - 0.01]))
    assert n == 4 and why[2] == ["9.0x the median step", steady.BEFORE_WINDOW] and why[0] == [steady.BEFORE_WINDOW]
    # a recording that begins with its window (the mark before its first step) has no step before it; a mark of an
    # earlier phase's window, or one after the family's last step, says nothing of this family
    for marks in ([s[0] - 0.5], [s[-1] + 0.5], []):
        assert steady.warmup(s, s + wall, wall, 3.0, 1.2, none, np.array([]), windows=np.array(marks)) == (0, [])


def test_a_restarted_window_starts_its_steady_steps_there_only_after_a_plateau():
    """The launcher starts a window's mark again where it extends the window at a new rate (``runtime.window``); the
    steady steps start there only where the steps before ran at a plateau. Step times of two runs of a transformers
    pipeline on an H200 (their verdicts: ``reports/steps_time/users6``): a first run whose window began on 33 steps
    of 48-56 ms, then 10-14 ms (extended at its 43rd and 52nd program steps), and a cached run, 20-55 ms throughout,
    extended by three steps of 14-18 ms. Judged whole, the first read a 22.2 ms median step and "52 slow steps"; the
    cached one, moved to its extension, left 73 of its 144 steps out as warm-up."""
    from nsighttc.analysis import intervals
    none = intervals.union(np.array([]), np.array([]))
    with fixture_open(FIXTURES / "steps" / "pipeline_window_steps.json.gz") as fh:
        runs = json.load(fh)
    for key, first_index, expect in (("first_run_plateau_users6b", 0, 52 - 7), ("cached_run_noisy_final6", 1, 1)):
        run = runs[key]
        wall = np.asarray(run["iteration_ns"], dtype="float64")
        s = np.concatenate([[0.0], np.cumsum(wall)[:-1]])
        at = lambda step: s[step - run["window_start_step"] + first_index] - 1.0  # noqa: E731 (a mark just before)
        windows = np.array([at(run["window_start_step"])]) if first_index else np.array([])
        restarts = np.array([at(x) for x in run["extend_steps"]])
        n, why = steady.warmup(s, s + wall, wall, 3.0, 1.2, none, np.array([]), windows=windows, restarts=restarts)
        assert n == expect, (key, n)
        assert steady.BEFORE_WINDOW in why[-1]
        if key.startswith("first"):  # the steps kept ran at under half the plateau's median (sizes vary after it)
            assert np.median(wall[n:]) < 0.5 * np.median(wall[1:n])


def _strip_nvtx(src_dir, dest):
    """A DDP job's per-rank nsys recordings with every NVTX range deleted: a job that marks nothing."""
    for r in ("rank0", "rank1"):
        (dest / r).mkdir(parents=True)
        db = dest / r / "nsys.sqlite"
        with fixture_open(next((src_dir / r).glob("*")), "rb") as a, db.open("wb") as b:
            shutil.copyfileobj(a, b)
        con = sqlite3.connect(db)
        con.execute("DELETE FROM NVTX_EVENTS WHERE eventType IN (59, 60)")
        con.commit()
        con.close()
    return dest


def test_an_unmarked_ddp_job_gets_per_rank_steps_and_its_straggler(tmp_path):
    """The 2-rank DDP recordings (H200 x2, tests/fixtures/ddp) without their ranges: each rank's steps come from its
    repeating kernel sequence, although its steps launch 798-807 kernels (NCCL and cuDNN vary), and the straggler
    (rank 1 sleeps 30 ms on its host per step) is still named, its host time now outside any range; the balanced
    job still gets no straggler."""
    from ..conftest import FIXTURES
    ddp = FIXTURES / "ddp"
    v = nsighttc.analyze([_strip_nvtx(ddp / "straggler_nsys", tmp_path / "s")], jobs=1).to_json()
    marked = nsighttc.analyze([ddp / "straggler_nsys"], jobs=1).to_json()
    assert v["timeline"]["steps"]["source"] == "kernel-period"
    assert [r["median_step_ns"] is not None for r in v["ranks"]] == [True, True]
    for r, m in zip(v["ranks"], marked["ranks"]):  # the same loop: within 10% of the marked steps
        assert r["median_step_ns"] == pytest.approx(m["median_step_ns"], rel=0.10)
    s = v["distributed"]["straggler"]
    assert s["rank"] == 1 and s["cause"].startswith("host busy outside any range")
    b = nsighttc.analyze([_strip_nvtx(ddp / "balanced_nsys_uneven", tmp_path / "b")], jobs=1).to_json()
    assert b["distributed"]["straggler"] is None
