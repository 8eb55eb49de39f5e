"""Issue 44 on recordings from the H100 (tests/fixtures/inference/README.md): a generate() loop and an evaluation loop
profiled by the default run. Counts and times are computed here from the raw trace on their own and compared with
what the analysis says; the launch-bound finding's range is checked against what `try` measured on the same program."""
from __future__ import annotations

import gzip
import json
import sqlite3
import statistics
from pathlib import Path

import numpy as np
import pytest

from nsighttc.analysis import gain, variant_gain
from nsighttc.api import analyze
from nsighttc.render import markdown
from nsighttc.verdict import schema_problem
from tests.conftest import fixture_open, fixture_bytes

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "inference"
ROOT = Path(__file__).resolve().parents[2]
LLM = FIX / "llm_generate_default_torch.json.xz"
EVAL = FIX / "eval_loop_default_torch.json.xz"
EVAL_NSYS = FIX / "eval_loop_user_nsys.sqlite.xz"
TRY_SMALL = ROOT / "reports" / "inference" / "call51_try_small" / "try.json"


def _host_marks(path: Path) -> dict[str, list[tuple[float, float]]]:
    """The hooks' marks as torch.profiler wrote them (host side, ``user_annotation``), in µs, sorted."""
    out: dict[str, list] = {}
    for e in json.load(fixture_open(path))["traceEvents"]:
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("nsighttc."):
            out.setdefault(e["name"], []).append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    return {k: sorted(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def llm():
    return analyze([LLM], jobs=1).to_json()


@pytest.fixture(scope="module")
def evaluation():
    return analyze([EVAL], jobs=1).to_json()


def test_the_generation_loops_steps_are_its_model_calls_and_its_requests_its_generate_calls(llm):
    marks = _host_marks(LLM)
    calls = marks["nsighttc.forward"]
    # the window's stop came where the next request began: that request's mark holds no model call
    requests = [(s, e) for s, e in marks["nsighttc.request"] if any(s <= a and b <= e for a, b in calls)]
    assert len(requests) == len(marks["nsighttc.request"]) - 1
    tl = llm["timeline"]
    assert tl["steps"]["source"] == "hook" and tl["steps"]["count"] == len(calls)
    inf = tl["inference"]
    assert inf["model_calls"] == len(calls) and inf["requests_recorded"] == len(requests)
    assert len(marks["nsighttc.prefill"]) == len(requests)  # one prefill per generate() call
    assert len(marks["nsighttc.prefill"]) + len(marks["nsighttc.decode"]) == len(calls)
    # every call lies inside a request
    r = np.array(requests)
    inside = [any(a >= s and b <= e for s, e in r) for a, b in calls]
    assert all(inside)


def _copies_to_host(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Each device-to-host copy's launch (its runtime call, by correlation) and its end on the GPU, in µs, by launch."""
    ev = json.load(fixture_open(path))["traceEvents"]
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in ev
              if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})}
    copies = sorted((launch[e["args"]["correlation"]], float(e["ts"]) + float(e["dur"])) for e in ev
                    if e.get("cat") == "gpu_memcpy" and str(e.get("name")).startswith("Memcpy DtoH")
                    and e["args"].get("correlation") in launch)
    return np.array([a for a, _ in copies]), np.array([b for _, b in copies])


def test_time_to_first_token_and_per_output_token_from_the_marks_on_their_own(llm):
    """TTFT: a request's start to its first token on the host, the end of the last device-to-host copy launched
    before its first decode call (the token read for the streamer and the stopping check)."""
    marks = _host_marks(LLM)
    win = marks["nsighttc.window"][0][0]
    dec = np.array([a for a, _ in marks["nsighttc.decode"]])
    copy_t, copy_end = _copies_to_host(LLM)
    ttft, tpot, before_call = [], [], []
    first_calls = np.array([a for a, _ in marks["nsighttc.forward"]])
    for s, e in marks["nsighttc.request"]:
        inside = first_calls[(first_calls >= s) & (first_calls <= e)]
        if not len(inside) or inside[0] < win:
            continue  # before the window (warm-up), or cut by the window's stop at its start
        d = dec[(dec >= s) & (dec <= e)]
        if not len(d):
            continue  # cut by the window's stop at its start
        copied = copy_end[(copy_t >= s) & (copy_t < d[0])]
        assert len(copied)  # (generate() reads each token on the host)
        ttft.append(min(copied[-1], d[0]) - s)
        before_call.append(d[0] - copied[-1])
        tpot.append(statistics.median(np.diff(np.r_[d, e])))
    inf = llm["timeline"]["inference"]
    assert inf["requests"] == len(ttft) >= 3  # the window held whole requests
    assert inf["ttft_ns"] == pytest.approx(statistics.median(ttft) * 1e3, rel=0.01)
    assert min(before_call) > 0  # the token was on the host before the first decode call began
    assert inf["tpot_ns"] == pytest.approx(statistics.median(tpot) * 1e3, rel=0.01)
    for phase in ("prefill", "decode"):
        p = inf[phase]
        assert p["calls"] > 0 and 0 < p["gpu_busy_share"] < 1 and p["verdict"] == "cpu-bound"
        assert p["tc_time_share"] > 0.2  # bf16 GEMMs (nvjet) on the Tensor Cores
    assert "launch overhead" in inf["decode"]["headline_cause"]
    assert schema_problem(llm) is None
    text = markdown.render(llm)
    assert "## Inference" in text and markdown.ns(inf["ttft_ns"]) in text


def test_the_launch_bound_finding_names_the_generation_fix_and_its_range_holds_what_try_measured(llm):
    f = llm["findings"][0]
    assert f["id"] == "launch-bound" and "cache_implementation" in f["advice"] and "larger batch" in f["advice"]
    assert "model's own calls" in f["evidence"]  # the host time inside the model's calls is the launch cost too
    assert not any(x["id"] == "gpu-idle-during-host-range" and "nsighttc.forward" in x["title"] for x in llm["findings"])
    # `nsighttc try --variant static-cache` on the same program and arguments (H100, call51): the plain runs' steps
    measured = json.loads(TRY_SMALL.read_text())
    base = next(v for v in measured["variants"] if v["name"] == "baseline")
    static = next(v for v in measured["variants"] if v["name"] == "static-cache")
    g = gain.estimate(f, llm, gain.scopes(llm, {"nsighttc.step": {"step_ns": base["step_ns"], "steps": 100}}))
    assert g["low"] <= static["speedup"] <= g["high"], (g, static["speedup"])
    assert variant_gain.VARIANT_FINDING["static-cache"] == [("launch-bound", None)]
    # a range wider than 3x says what its ends assume, where a reader looks first (the first fix's line)
    from nsighttc.render.markdown.headlines import WIDE_GAIN, first_fix
    line = first_fix(llm)
    wide = f["gain"]["high"] / f["gain"]["low"]
    assert (wide > WIDE_GAIN) == ("x wide: the ends are " in line), (line, f["gain"])
    if wide > WIDE_GAIN:
        assert f["gain"]["basis"] in line and "`nsighttc try` measures it" in line


def test_the_evaluation_loop_gets_a_window_of_dataloader_iterations(evaluation):
    tl = evaluation["timeline"]
    assert tl["steps"]["source"] == "hook" and tl["steps"]["name"] == "DataLoader iterations"
    marks = _host_marks(EVAL)
    assert "nsighttc.window" in marks and tl["steps"]["count"] == len(marks["nsighttc.data"]) - 1
    assert "inference" not in tl  # no token ids: no generation section


def _nsys_busy_share(path: Path) -> float:
    """GPU busy over the loop's steady part of a plain nsys recording, computed here from the raw tables: the union
    of kernel and copy intervals from the 6th batch's first kernel (batches: kernel gaps over 2 ms) to the last."""
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".sqlite") as tmp:
        tmp.write(fixture_bytes(path))
        tmp.flush()
        con = sqlite3.connect(tmp.name)
        iv = np.array(con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
                                  "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start").fetchall(), float)
        k = np.array(con.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start").fetchall(), float)[:, 0]
        con.close()
    merged = [list(iv[0])]
    for a, b in iv[1:]:
        if a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    m = np.array(merged)
    batches = k[np.r_[0, np.flatnonzero(np.diff(k) > 2e6) + 1]]
    lo, hi = batches[5], m[-1, 1]
    return float((np.clip(m[:, 1], lo, hi) - np.clip(m[:, 0], lo, hi)).sum() / (hi - lo))


def test_the_evaluation_loops_steady_busy_share_agrees_with_an_nsys_recording_computed_independently(evaluation):
    fam = evaluation["timeline"]["step_families"][0]
    nsys = _nsys_busy_share(EVAL_NSYS)
    assert 0 < nsys < 0.5
    assert abs(fam["steady_gpu_busy_share"] - nsys) <= 0.05, (fam["steady_gpu_busy_share"], nsys)


def _sqlite_kernel_names(path: Path) -> list[str]:
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".sqlite") as tmp:
        tmp.write(fixture_bytes(path))
        tmp.flush()
        con = sqlite3.connect(tmp.name)
        names = [r[0] for r in con.execute("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                                           "ON s.id = k.demangledName")]
        con.close()
    return names


def test_a_plain_nsys_recording_of_a_generation_loop_holds_all_its_requests_in_one_loop():
    """Each request's prefill breaks the exact period; its slow first request held the most time alone, so it was the
    loop (24 steps of 82 ms). Joined across the prefills, the loop is every call, the slow request its warm-up."""
    path = FIX / "llm_generate_user_nsys.sqlite.xz"
    calls = sum(1 for n in _sqlite_kernel_names(path) if "cos_kernel" in n)
    tl = analyze([path], jobs=1).to_json()["timeline"]
    st = tl["steps"]
    assert st["source"] == "kernel-period" and st["count"] == calls
    assert st["warmup_steps"] >= calls // 4 - 1 and st["median_iteration_ns"] < 20e6  # the fast requests' rate


def test_a_generation_loop_recorded_elsewhere_gets_one_step_per_model_call():
    """A torch.profiler trace the program made itself (no hooks): the steps come from the kernel period. Names launched
    every other decode call made the loop two calls long (446 kernels); the exact period (one call, 223 kernels) now
    holds over the loop's whole stretch. Model calls counted here: the rotary embedding's cos kernel, once per call."""
    path = FIX / "llm_generate_user_torch.json.xz"
    kernels = [e["name"] for e in json.load(fixture_open(path))["traceEvents"] if e.get("cat") == "kernel"]
    calls = sum(1 for n in kernels if "cos_kernel" in n)
    tl = analyze([path], jobs=1).to_json()["timeline"]
    assert tl["steps"]["source"] == "kernel-period" and tl["steps"]["count"] == calls
    assert "223 kernels" in tl["steps"]["name"] and calls * 223 <= len(kernels)


def test_the_launch_bound_fix_follows_the_workload():
    """A generation loop with the hooks' marks gets the static cache; the same loop recorded elsewhere (no marks, no
    optimizer or backward kernels) CUDA graphs for inference; a training program torch.compile, less the foreach
    optimizer it steps already (issue 56), and no graph advice taken back for the phase that does not replay any."""
    def advice(path):
        v = analyze([path], jobs=1).to_json()
        return next(f["advice"] for f in v["findings"] if f["id"] == "launch-bound")
    assert "cache_implementation" in advice(LLM)
    elsewhere = advice(FIX / "llm_generate_user_torch.json.xz")
    assert "reduce-overhead" in elsewhere and "optimizer" not in elsewhere
    training = advice(FIX.parent / "multi_phase_torch.json.xz")
    assert "torch.compile(model)" in training and "fused=True" not in training
    assert "Already in use" in training and "multi_tensor_apply_kernel" in training
    assert "already replays CUDA graphs" not in training  # its graphs are another phase's
