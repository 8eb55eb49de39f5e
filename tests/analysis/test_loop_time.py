"""Steps and time on programs whose time is not in a typical step: the unit the program repeats, and every second of
its loop accounted for.

The recordings are plain torch.profiler runs on one H200 (``benchmarks/gpu/gpu_steps_time.sh record``: torch 2.11,
``benchmarks/gpu/record_torch.py``, no nsighttc in the program), trimmed by ``benchmarks/strip_fixture.py``:

- ``graph_replay_torch``: ``wrappers/graph_replay.py`` (a whole training step captured with ``torch.cuda.graph`` after
  three eager steps, then replayed; kept to its first 0.8 s). Plain runs: 1.119 ms a replay, 3.893 ms the same step
  eager. Before: "3 steady steps" of the eager warm-up, "GPU busy 4-5%".
- ``varlen_infer_torch``: ``wrappers/varlen_infer.py --batches 60`` (BERT-base fp16, batches padded to their longest
  request, 28 new lengths in 60 batches). Its model calls take ~10 ms at a length seen before, 50 ms and more at a new
  one (the attention backend plans each shape). Before: "CPU-bound: launch overhead", first fix CUDA graphs.
- ``grad_accum_torch``: ``wrappers/grad_accum.py`` (4 micro-batches per optimizer step; kept to its first 2 s). Plain:
  242 ms per optimizer step.
- ``varlen_infer_nsys``: the variable-length program again, recorded by a plain ``nsys profile -t cuda,nvtx`` (no
  Python calls, no input shapes, no ranges: kernels and runtime calls only; 2026-11-29; kept to its first 3.5 s).
"""
from __future__ import annotations

import gzip
import json
import lzma
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nsighttc
from tests.conftest import FIXTURES, fixture_open

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "steps"
HTA = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "hta"
PLAIN_REPLAY_NS = 1.119e6        # plain run, wrappers/graph_replay.py --steps 2000 (H200)
PLAIN_ACCUM_STEP_NS = 242.1e6    # plain run, wrappers/grad_accum.py (H200)
PLAIN_SERVE_NS = 0.464e6         # plain runs, wrappers/graph_serve.py: 0.460 and 0.464 ms a batch (H200)
PLAIN_TWO_GRAPHS_NS = 1.126e6    # plain runs, wrappers/graph_replay.py --two-graphs: 1.126 and 1.127 ms a step (H200)
NSYS_ACCUM_NS = 1.574e6          # wrappers/graph_replay.py --accum 4 --layers 4 under nsys: 1.574 ms a step (H200)


@pytest.fixture(scope="module")
def graph():
    return nsighttc.analyze([FIX / "graph_replay_torch.json.xz"]).to_json()


@pytest.fixture(scope="module")
def varlen():
    return nsighttc.analyze([FIX / "varlen_infer_torch.json.xz"]).to_json()


@pytest.fixture(scope="module")
def accum():
    return nsighttc.analyze([FIX / "grad_accum_torch.json.xz"]).to_json()


def _parts(tl: dict) -> dict[str, float]:
    return {p["part"]: p["ns"] for p in tl["loop_time"]["parts"]}


def test_a_loop_replaying_its_cuda_graph_is_judged_on_the_replays(graph):
    tl = graph["timeline"]
    st = tl["steps"]
    assert st["source"] == "graph-replay", st["source"]
    assert st["count"] - st["warmup_steps"] >= 150
    # the replay as a plain run times it (the recording adds little to a graph launch)
    assert abs(st["median_iteration_ns"] / PLAIN_REPLAY_NS - 1) < 0.10, st["median_iteration_ns"]
    assert tl["verdict"] == "gpu-bound" and tl["gpu_busy_share"] > 0.75
    # the eager warm-up steps before the capture are the replayed loop's start-up, no family of their own (a family
    # of them held more time than the replays in a short window: ``test_graph_serve_*``)
    assert [f["source"] for f in tl["step_families"]] == ["graph-replay"]
    # ... in the loop's split too: all of it before the first replay, none of it a warm-up step of theirs
    assert _parts(graph["timeline"])["before the first step"] == pytest.approx(tl["startup"]["first_step_ns"])
    assert _parts(graph["timeline"])["before the first step"] >= 3 * 3.893e6  # (the three eager steps, plain)


def test_no_graph_advice_to_a_loop_that_already_replays_one(graph):
    for f in graph["findings"]:
        assert "reduce-overhead" not in f["advice"] or "already replays" in f["advice"], f["advice"]


def test_the_loop_time_adds_up_to_the_recording(graph, varlen, accum):
    for doc in (graph, varlen, accum):
        lt = doc["timeline"]["loop_time"]
        assert lt["total_ns"] > 0
        assert sum(p["ns"] for p in lt["parts"]) == pytest.approx(lt["total_ns"], rel=0.01)
        assert abs(sum(p["share"] for p in lt["parts"]) - 1) < 0.01


def test_gradient_accumulation_steps_are_optimizer_steps_timed_as_a_plain_run(accum):
    tl = accum["timeline"]
    st = tl["steps"]
    assert st["source"] == "profiler-op"
    assert abs(st["median_iteration_ns"] / PLAIN_ACCUM_STEP_NS - 1) < 0.10, st["median_iteration_ns"]
    parts = _parts(tl)
    steps = tl["loop_time"]["steady_steps"] + tl["loop_time"]["slow_steps"]
    loop = parts["steady steps"] + parts["slow steps"] + parts["GPU after the host's last step"]
    # every steady step's time accounted for: within 5% of what the plain run's steps took
    assert abs(loop / (steps * PLAIN_ACCUM_STEP_NS) - 1) < 0.05, loop / steps


def test_variable_length_inference_is_held_back_by_its_new_shapes(varlen):
    tl = varlen["timeline"]
    assert tl["headline_cause"].startswith("new input shapes")
    lt = tl["loop_time"]
    parts = _parts(tl)
    # the slow steps hold more of the loop than the typical ones, and most of them are at new shapes
    assert parts["slow steps"] > parts["steady steps"]
    assert lt["new_shape_steps"] >= 0.8 * lt["slow_steps"]
    first = varlen["findings"][0]
    assert first["id"] == "shape-churn"
    assert "pad" in first["advice"] and "dynamic=True" in first["advice"]
    # a batch's rows padded with rows of no tokens bring in an attention mask the unpadded batch had none of (H200,
    # dynamic batching bucketed to 16/32/64 rows: 2,292 requests/s against 3,448 with filler requests)
    assert "filler requests" in first["advice"] and "full attention mask" in first["advice"]
    # the matrix kernels first launched at the new shapes name what paid for them
    churn = next(f for f in tl["step_families"] if f.get("shape_churn"))["shape_churn"]
    assert any("nvjet" in k["name"] or "sdpa" in k["name"] for k in churn["new_shape_kernels"])


def test_new_shapes_are_found_from_kernels_alone_in_an_nsys_recording(varlen):
    """Nsight Systems records no operator and no input shape: a step is a repeating kernel sequence, one per batch,
    as many kernels as the torch recording's model call, and a new shape shows as kernel configurations launched
    for the first time. The same cause, finding and advice as from the torch recording; every second accounted for."""
    doc = nsighttc.analyze([FIX / "varlen_infer_nsys.sqlite.xz"]).to_json()
    tl, st = doc["timeline"], doc["timeline"]["steps"]
    assert st["source"] == "kernel-period" and st["name"] == varlen["timeline"]["steps"]["name"], st["name"]
    assert st["count"] >= 15
    assert tl["headline_cause"].startswith("new input shapes"), tl["headline_cause"]
    first = doc["findings"][0]
    assert first["id"] == "shape-churn" and "pad" in first["advice"]
    churn = next(f for f in tl["step_families"] if f.get("shape_churn"))["shape_churn"]
    assert any("nvjet" in k["name"] for k in churn["new_shape_kernels"])
    lt = tl["loop_time"]
    assert lt["new_shape_steps"] >= 0.8 * lt["slow_steps"] > 0
    assert sum(p["ns"] for p in lt["parts"]) == pytest.approx(lt["total_ns"], rel=0.01)
    assert not any('mode="reduce-overhead"' in f["advice"] or "Replay the" in f["advice"] for f in doc["findings"])


def test_no_cuda_graph_advice_to_a_loop_whose_shapes_change(varlen):
    for f in varlen["findings"]:
        fix = f["advice"]
        assert "mode=\"reduce-overhead\"" not in fix and "Replay the" not in fix, fix


def test_varlen_gain_range_is_actionable(varlen):
    g = varlen["findings"][0]["gain"]
    assert g["high"] / g["low"] <= 3.0
    assert g["low"] > 1.2  # a new shape's cost is real time: removing half of it is a gain


@pytest.mark.skipif(not (HTA / "nccl_parser_config" / "nccl_data.json.gz").exists(),
                    reason="the shared HTA traces are not beside this checkout")
def test_one_profiler_step_is_the_step(tmp_path):
    """A trace recorded elsewhere with one ``ProfilerStep#N`` (a single-step inference trace, one step per rank):
    the program's mark is its step, not a repeating kernel sequence inside it or its optimizer's ranges. The HTA test
    trace (three ProfilerSteps of a DDP job) with two of its marks taken out."""
    d = json.load(gzip.open(HTA / "nccl_parser_config" / "nccl_data.json.gz"))
    steps = [e for e in d["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    keep = steps[1]
    d["traceEvents"] = [e for e in d["traceEvents"] if e not in steps or e is keep]
    path = tmp_path / "one_step.json.gz"
    with gzip.open(path, "wt", compresslevel=1) as fh:
        fh.write(json.dumps(d))  # (dumps: the C encoder; dump streams through the Python one, 10x slower)
    st = nsighttc.analyze([path]).to_json()["timeline"]["steps"]
    assert st["source"] == "explicit" and st["count"] == 1
    assert st["median_iteration_ns"] == pytest.approx(keep["dur"] * 1e3, rel=0.02)


@pytest.mark.skipif(not (HTA / "ns_resolution_trace").exists(), reason="the shared HTA traces are not beside this checkout")
def test_the_window_holds_the_gpu_work_launched_in_it():
    """A trace recorded elsewhere (HTA's test data: a CNN rank, 5 ProfilerSteps) whose host closes its last step
    89 ms before its GPU finishes the work that step launched: the window ends where that work ends, and the loop's
    time says the GPU ran on after the host."""
    path = next((HTA / "ns_resolution_trace").glob("*.json.gz"))
    doc = json.load(gzip.open(path))
    gpu = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    steps = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    gpu_end_us = max(e["ts"] + e["dur"] for e in gpu)
    host_end_us = max(e["ts"] + e["dur"] for e in steps)
    assert gpu_end_us - host_end_us > 50e3  # (the case: the GPU ran on for longer than 50 ms)
    tl = nsighttc.analyze([path]).to_json()["timeline"]
    assert tl["window"]["end_ns"] / 1e3 == pytest.approx(gpu_end_us, abs=1.0)
    after = _parts(tl)["GPU after the host's last step"]
    assert after / 1e3 == pytest.approx(gpu_end_us - host_end_us, rel=0.05)


def test_steps_a_host_ran_ahead_of_are_accounted_on_the_gpus_clock():
    """The graph-replaying loop under nsighttc on the H200 (reports/steps_time/graph_sync): the host started a replay
    every 386 us while the GPU finished one every 1.11 ms, and "Where the recording's time went" read 37 "slow steps"
    (41%) and 35% "GPU after the host's last step". Where the GPU finished the steps slower than the host started
    them, each step runs from one step's work done on the GPU to the next's: the parts still add up to the span, the
    steps hold the GPU's time, and nothing is left "after the host's last step". (A family built here: the host's and
    the GPU's step times of that run.)"""
    import numpy as np
    from nsighttc.analysis.timeline.steps import slow
    n, host, gpu = 100, 0.386e6, 1.112e6
    s = 10e6 + host * np.arange(n)
    it_end = s + host
    done = 10e6 + gpu * np.arange(1, n + 1)
    fam = {"_iterations": (s, it_end), "_gpu_done": done, "first_step_start_ns": 9e6,
           "steady_window_ns": [float(s[0]), float(done[-1])], "median_iteration_ns": host,
           "median_effective_ns": gpu, "time_accounting": {"base_ns": host}}
    lt = slow.split(fam, 0.0, float(done[-1]) + 1e6)
    parts = {p["part"]: p["ns"] for p in lt["parts"]}
    assert lt["clock"] == "gpu" and lt["slow_steps"] == 0 and lt["steady_steps"] == n
    assert parts["steady steps"] == pytest.approx(n * gpu) and parts["GPU after the host's last step"] == 0
    assert sum(parts.values()) == pytest.approx(lt["total_ns"])
    assert lt["typical_step_ns"] == pytest.approx(gpu)
    host_only = slow.split({**fam, "median_effective_ns": host * 1.05}, 0.0, float(done[-1]) + 1e6)
    assert "clock" not in host_only and {p["part"]: p["ns"] for p in host_only["parts"]}[
        "GPU after the host's last step"] > 0  # (a host that waits for the GPU: as before)


@pytest.mark.parametrize("name", ["varlen_infer_torch.json.xz", "varlen_infer_nsys.sqlite.xz"])
def test_the_op_that_paid_for_the_new_shapes_is_the_one_the_host_paused_before(name):
    """The steps at new lengths first launched new GEMM tiles (`nvjet`), but the time went elsewhere: a plain
    torch.profiler recording of this program showed `aten::_cudnn_attention_forward` taking 50-107 ms at each new
    length (median 105 us), cuDNN building its attention plan. From the launch times alone (both recording kinds),
    the host's pauses before cuDNN's attention kernel hold most of the new shapes' cost; the headline names it, and
    the fix offers an attention backend with no plan per shape beside padding."""
    doc = nsighttc.analyze([FIX / name]).to_json()
    tl = doc["timeline"]
    churn = next(f for f in tl["step_families"] if f.get("shape_churn"))["shape_churn"]
    paid = churn["paid_before"]
    assert "sdpa" in paid[0]["name"] and paid[0]["ns"] > 0.8 * churn["new_shape_excess_ns"], paid
    assert all(p["ns"] < 0.05 * churn["new_shape_excess_ns"] for p in paid[1:])  # (the GEMMs' new tiles: cheap)
    assert paid[0]["launches"] >= churn["new_shape_steps"]  # (one attention a layer: a pause at each new shape)
    assert "the host's pauses before `cudnn_generated_fort_native_sdpa" in tl["headline_cause"]
    assert "cuDNN's attention" in tl["headline_cause"]
    first = doc["findings"][0]
    assert first["id"] == "shape-churn" and "SDPBackend.EFFICIENT_ATTENTION" in first["advice"]
    assert "builds a plan for each new shape" in first["evidence"]
    # the gain counts the warm-up steps after the first too, with what their new shapes cost: a loop meets most of its
    # new shapes first (plain bucketing: 2.3-2.5x on the whole run, 5.6-6.1x on a fresh machine's)
    # (only the first one, which sets the process up, is left out; where none other was a warm-up step, the basis
    # says the steps before the steady ones were left out)
    basis = first["gain"]["basis"]
    if tl["steps"]["warmup_steps"] > 1:
        assert "of warm-up steps after the first" in basis and "left out" not in basis, basis
    else:
        assert "a loop meets most of its new shapes first, so a whole run can gain more" in basis, basis


def test_a_live_run_of_the_loop_named_the_op_on_the_gpu_machine():
    """`nsighttc profile wrappers/varlen_infer.py`, cached run on the H200 (reports/steps_time/shape_costs): the
    launcher's hooks made the steps (model calls), the launch times the op: 92% of the new shapes' cost was the
    host's pause before cuDNN's attention kernel. The first run's report said 97% (its report.md.xz there)."""
    d = Path(__file__).resolve().parents[2] / "reports" / "steps_time" / "shape_costs"
    tl = json.loads(lzma.decompress((d / "varlen_cached_verdict.json.xz").read_bytes()))["timeline"]
    churn = tl["steps"]["shape_churn"]
    assert tl["steps"]["source"] == "hook" and "sdpa" in churn["paid_before"][0]["name"]
    assert churn["paid_before"][0]["ns"] > 0.8 * churn["new_shape_excess_ns"]
    assert tl["headline_cause"].startswith("new input shapes") and "cuDNN's attention" in tl["headline_cause"]
    first = lzma.decompress((d / "varlen_first_report.md.xz").read_bytes()).decode()
    assert "of it the host's pauses before `cudnn_generated_fort_native_sdpa" in first


def test_graphs_traced_whole_by_nsys_default_are_the_steps():
    """nsys's default records each CUDA graph launch as one operation (``--cuda-graph-trace=graph``): the
    graph-replaying loop on the H200 under `nsys profile -t cuda,nvtx` (300 replays; the program timed 1.133 ms a
    replay under it, plain runs 1.132). A kernel period found in the eager warm-up ran its last iteration over every
    replay after it and won the headline: "12 steps of kernel period (11 kernels), CPU-bound", a 312 ms step read as a
    new input shape. Now the replays are the steps, at the program's own speed, and the warm-up's period ends where
    they begin."""
    doc = nsighttc.analyze([FIX / "graph_replay_nsys_graphs.sqlite.xz"]).to_json()
    tl, st = doc["timeline"], doc["timeline"]["steps"]
    assert st["name"] == "CUDA graph replays" and st["count"] == 300
    assert abs(st["median_iteration_ns"] / 1.133e6 - 1) < 0.03 and tl["verdict"] == "gpu-bound"
    first_replay = st["first_step_start_ns"]
    for f in tl["step_families"][1:]:  # (its iterations end by the first replay; the GPU may finish their work after)
        assert f["first_step_start_ns"] + f["wall_ns"] <= first_replay + 1 and "shape_churn" not in f, f["name"]
        assert f["steady_wall_ns"] < 0.1 * st["steady_wall_ns"]
    assert not (tl.get("headline_cause") or "").startswith("new input shapes")
    # the warm-up family (5% of the steps' time) is no program's shape churn, and no gain is judged on it alone
    assert not any(f["id"] == "shape-churn" for f in doc["findings"])
    assert all((f.get("gain") or {}).get("high") is None or f["gain"]["high"] < 1.1 for f in doc["findings"])


# ``varlen_conv_nsys``: ``wrappers/varlen_conv.py --batches 80 --size-step 16`` (a ResNet-like convnet, fp16
# channels-last, cudnn.benchmark on, batches of 32 images at 13 sizes changing from batch to batch) under a plain
# ``nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none`` on one H200 (2026-11-29, ``gpu_steps_time.sh OUT final``;
# the program under nsys: 714.6 images/s). Plain runs of the same command in that call (reports/steps_time/final):
CONV_PLAIN = {"padded": (712.7,), "bucketed": (1449.0,), "benchmark_off": (4349.8,)}  # images/s
CONV_BATCHES = 80


@pytest.fixture(scope="module")
def conv():
    return nsighttc.analyze([FIX / "varlen_conv_nsys.sqlite.xz"]).to_json()


def test_a_loop_whose_kernels_change_with_every_size_is_cut_at_its_result_copies(conv):
    """Under cudnn.benchmark every new size launches cuDNN's trial kernels and another algorithm, so no kernel sequence
    repeats until the sizes do: main of the morning found "52 steady steps of 1.63 ms", the last 1% of the loop, and
    left 96% of it "before the first step". Each batch ends with one copy of its answers to the host; those copies
    are the steps, and the recording's time is the loop's, not start-up's."""
    tl = conv["timeline"]
    st = tl["steps"]
    assert st["source"] == "result-copy" and st["name"] == "result copies"
    assert st["count"] == CONV_BATCHES - 1  # (one 256-byte copy of the answers a batch)
    parts = {p["part"]: p for p in tl["loop_time"]["parts"]}
    assert parts["before the first step"]["share"] < 0.25  # (process start-up only; the program ends under nsys too)
    assert parts["warm-up steps"]["ns"] + parts["steady steps"]["ns"] + parts["slow steps"]["ns"] >= \
        0.7 * tl["loop_time"]["total_ns"]
    assert abs(sum(p["ns"] for p in tl["loop_time"]["parts"]) - tl["loop_time"]["total_ns"]) <= \
        0.01 * tl["loop_time"]["total_ns"]


def test_cudnn_timing_its_algorithms_per_size_is_the_cause_and_turning_it_off_the_fix(conv):
    """The host's pauses at new sizes spread over 40-odd of cuDNN's convolution kernels (the first of them 26%): the
    library, not one kernel, is named, and the new-size steps launching several times a known-size step's kernels say
    cuDNN tried algorithms there. The fix offers cudnn.benchmark = False beside padding, and never CUDA graphs."""
    tl = conv["timeline"]
    assert "new input shapes" in tl["headline_cause"]
    assert "kernels of cuDNN's convolution" in tl["headline_cause"] and "it tried kernels there" in tl["headline_cause"]
    churn = tl["steps"]["shape_churn"]
    assert churn["paid_by_library"][0]["who"] == "cuDNN's convolution"
    assert churn["paid_by_library"][0]["ns"] >= 0.9 * churn["new_shape_excess_ns"]
    assert churn["paid_before"][0]["ns"] < 0.5 * churn["new_shape_excess_ns"]  # (no one kernel holds it)
    assert churn["new_shape_launch_ratio"] >= 2
    first = conv["findings"][0]
    assert first["id"] == "shape-churn"
    assert "torch.backends.cudnn.benchmark = False" in first["advice"]
    assert not any(f["id"] in ("launch-bound", "cuda-graphs") and f["gain"].get("high") and
                   f["gain"]["high"] > first["gain"]["low"] for f in conv["findings"][1:])
    # the warm-up steps met the first sizes: counted; the range models the padded loop (from each step padded and
    # three shapes paid to no shape paid in the loop) and is at most 3x wide, with what its width comes from; no shape
    # paid at all (cudnn.benchmark off) is the bound the basis gives beside it: turning the timing off measured 6.1x,
    # inside the range (its high end was 4.85x while the fixed loop paid two more shapes at the median cost)
    gain = first["gain"]
    assert churn["warmup_new_shape_steps"] >= 3 and "of warm-up steps after the first" in gain["basis"]
    assert 1.0 < gain["low"] <= gain["high"] <= 3 * gain["low"], gain
    assert "padded to the longest known-shape step" in gain["basis"]
    assert "3 shapes paid at the costliest" in gain["basis"]
    off = CONV_PLAIN["benchmark_off"][0] / CONV_PLAIN["padded"][0]
    no_shape = float(gain["basis"].rsplit("up to ", 1)[1].rstrip("x"))
    assert no_shape >= gain["high"] >= off >= gain["low"], (no_shape, off, gain)
    # A known miss: bucketing measured 2.03x over this 80-batch run, under the low end (2.9x). The plain time holds
    # the first batch (cuDNN's set-up, ~0.5 s in each variant: benchmark off ran its 80 batches in 0.59 s at ~1.4 ms
    # a batch), which the loop's time leaves out, and the three padded sizes cost more each than the costliest size
    # this run met (the whole-run times give ~0.4 s each against 267 ms). The low end stays within 1.5x of it.
    bucketed = CONV_PLAIN["bucketed"][0] / CONV_PLAIN["padded"][0]
    assert gain["low"] <= 1.5 * bucketed, (gain, bucketed)


# ``varlen_compiled_torch``: ``wrappers/varlen_infer.py --batches 60 --compile reduce-overhead`` recorded by hand with
# torch.profiler (tests/fixtures/steps/README.md): BERT-base under torch.compile's CUDA graph trees at 28 lengths.
@pytest.fixture(scope="module")
def compiled():
    return nsighttc.analyze([FIX / "varlen_compiled_torch.json.xz"]).to_json()


def test_a_loop_that_replays_graphs_in_some_batches_is_judged_on_its_batches(compiled):
    """CUDA graph trees run a new length eagerly, record its graph at the second call and replay it from the third:
    31 of the 60 batches replayed a graph. The steps are the batches, cut at the copy of each batch's answer, not the
    replays (main: "27 steady steps of 6.13 ms ... from the program's CUDA graph replays", the eager batches between
    them left out)."""
    tl = compiled["timeline"]
    st = tl["steps"]
    assert st["source"] == "result-copy" and st["count"] == 59, (st["source"], st["count"])
    assert not any(f["source"] == "graph-replay" for f in tl["step_families"])
    assert sum(p["ns"] for p in tl["loop_time"]["parts"]) == pytest.approx(tl["loop_time"]["total_ns"], rel=0.01)


def test_steps_that_record_a_graph_for_a_shape_are_its_cost_too(compiled):
    """The step at a length's second call records its CUDA graph (13-19 ms against a replay's 3.3 ms): it is paid for
    the shape, as the first call's cuDNN plan is. Counted with the new shapes, said apart in the headline and the
    finding, and the fix speaks of the graphs the program already records, not of adopting them."""
    from nsighttc.analysis.timeline.steps import slow
    tl = compiled["timeline"]
    churn = tl["steps"]["shape_churn"]
    assert churn["capture_steps"] >= 8 and churn["capture_excess_ns"] > 0
    assert churn["known_slow_steps"] <= 1  # (main: the captures were 10 slow steps at known shapes, unexplained)
    assert "recording a CUDA graph for one" in tl["headline_cause"]
    assert "cuDNN's attention" in tl["headline_cause"]
    first = compiled["findings"][0]
    assert first["id"] == "shape-churn" and "recorded a CUDA graph for it" in first["evidence"]
    assert "records a CUDA graph for each shape" in first["advice"] and "max-autotune-no-cudagraphs" in first["advice"]
    assert "No CUDA graphs or `reduce-overhead` here" not in first["advice"]
    # bucketed, its rate after the recompile measured 8.0x (reports/steps_time/final4: 850.6 -> 6,779.5 requests/s),
    # no shape paid there: the high end pays none in the loop (two paid in it at the median cost gave 5.69x)
    assert first["gain"]["low"] <= 6779.5 / 850.6 <= first["gain"]["high"] <= 3 * first["gain"]["low"], first["gain"]
    assert len(slow.capture_times(pd.DataFrame({"name": ["cudaStreamBeginCapture", "cudaLaunchKernel"],
                                                "start_ns": [5.0, 1.0]}))) == 1


def test_a_servers_eager_warm_up_before_its_replays_is_its_start_up_and_no_graph_advice_comes_first():
    """``wrappers/graph_serve.py`` under ``nsighttc profile`` (a cached run: recorded from its window, which began at
    the sixth eager call; H200, ``gpu_steps_time.sh OUT novel2``): three graphs captured after three eager calls each,
    then a replay a batch and a read of its answer. The window held 6 eager calls (the warm-up's last and the
    captures, a model call each) and 104 replays. Before: the eager calls were a family of their own ("model calls",
    2 phases) and the first fix was "Launch-bound in `model calls` ... Replay the model's call as a CUDA graph:
    reduce-overhead" to a program that replays three (call 1's cached run judged the eager calls in its headline:
    "GPU busy 2% ... CPU-bound"). Now the eager calls before the replays are the loop's start-up."""
    doc = nsighttc.analyze([FIX / "graph_serve_cached_live.json.xz"]).to_json()
    tl = doc["timeline"]
    st = tl["steps"]
    assert st["source"] == "graph-replay" and [f["name"] for f in tl["step_families"]] == ["CUDA graph replays"]
    assert st["count"] - st["warmup_steps"] >= 100
    assert "replays_per_step" not in st  # (three graphs of one shape in the requests' order: one replay a batch)
    assert abs(st["median_iteration_ns"] / PLAIN_SERVE_NS - 1) < 0.25  # (the recording's own cost: 1.1-1.45x)
    for f in doc["findings"]:
        assert "reduce-overhead" not in f["advice"] or "already replays" in f["advice"], f["advice"]
        assert "model calls" not in f["title"]
    split = tl["loop_time"]
    assert sum(p["ns"] for p in split["parts"]) == pytest.approx(split["total_ns"], rel=0.01)
    before = next(p for p in split["parts"] if p["part"] == "before the first step")
    assert before["ns"] >= 5e6  # (the eager calls and the captures: start-up now)


def test_a_step_captured_as_two_graphs_is_one_step_of_both_replays():
    """``wrappers/graph_replay.py --two-graphs`` (the forward and backward in one graph, the optimizer's step in
    another, both replayed each step), 40 steps under a plain ``nsys profile`` with graphs traced whole (H200,
    ``gpu_steps_time.sh OUT twographs2``; the program timed 1.134 ms a step under nsys, 1.126 ms plain). Before: 80
    steps of 91 µs, the host's launch period, and 39.9 ms of "slow steps"; torch.profiler and nsys recordings of 300
    steps (``twographs``): 600 steps of 550 µs; live runs "49 slow steps ... 80%" of the loop. Now a step is one cycle
    of the graphs replayed in turn."""
    doc = nsighttc.analyze([FIX / "graph_two_nsys_graphs.sqlite.xz"]).to_json()
    tl = doc["timeline"]
    st = tl["steps"]
    assert st["source"] == "graph-replay" and st["replays_per_step"] == 2 and 38 <= st["count"] <= 40
    assert abs(st["median_effective_ns"] / PLAIN_TWO_GRAPHS_NS - 1) < 0.05, st["median_effective_ns"]
    parts = _parts(tl)
    assert parts["slow steps"] < 0.1 * parts["steady steps"]
    assert tl["verdict"] == "gpu-bound"


def test_gradient_accumulation_replaying_graphs_is_one_step_of_every_replay_in_the_cycle():
    """``wrappers/graph_replay.py --accum 4 --layers 4`` (the forward and backward graph replayed for 4 micro-batches,
    then the optimizer's graph: 5 replays an optimizer step), 12 steps under a plain ``nsys profile`` with graphs
    traced node by node (H200, ``gpu_steps_time.sh OUT novel5``; the program timed 1.574 ms a step under nsys). Before:
    at most 4 graphs made a cycle, so each replay was a step (the 12-layer program's recordings: 500 steps of 0.87-0.97
    ms for 100 optimizer steps of 3.92 ms plain; its live runs "98 steady steps of 1 ms")."""
    doc = nsighttc.analyze([FIX / "graph_accum_nsys_node.sqlite.xz"]).to_json()
    tl = doc["timeline"]
    st = tl["steps"]
    assert st["source"] == "graph-replay" and st["replays_per_step"] == 5 and 11 <= st["count"] <= 12, st["count"]
    assert abs(st["median_effective_ns"] / NSYS_ACCUM_NS - 1) < 0.05, st["median_effective_ns"]
    parts = _parts(tl)  # (the steps' time: the program's 12 steps under nsys, within 5%)
    loop = sum(parts.get(k, 0.0) for k in ("warm-up steps", "steady steps", "slow steps", "between steps",
                                           "GPU after the host's last step"))
    assert abs(loop / (12 * NSYS_ACCUM_NS) - 1) < 0.05, (loop, parts)


def test_a_cycle_of_replays_starts_after_its_odd_graph_out_wherever_the_recording_begins():
    """The same recording read from its third replay on (a window that opened mid-cycle): the steps still begin at a
    micro-batch's first replay, the one after the optimizer's graph, and hold the same replays as read whole; the
    two micro-batch replays before them are a partial cycle, left out."""
    from nsighttc.analysis.timeline.base import GRAPH_LAUNCH_CALLS
    from nsighttc.analysis.timeline.steps.replays import graph_replays
    from nsighttc.parse import load
    tl = load(FIX / "graph_accum_nsys_node.sqlite.xz").timeline
    launches = tl.api[tl.api["name"].isin(GRAPH_LAUNCH_CALLS).to_numpy()].sort_values("start_ns")
    whole = graph_replays(tl.api, GRAPH_LAUNCH_CALLS, tl.gpu_ops)[0]
    later = graph_replays(tl.api.drop(launches.index[:2]), GRAPH_LAUNCH_CALLS, tl.gpu_ops)[0]
    assert whole.per_step == later.per_step == 5
    assert len(later.starts) == len(whole.starts) - 1 and set(later.starts) <= set(whole.starts)
    assert float(later.starts[0]) == float(launches["start_ns"].iloc[5])


def test_the_launchers_syncs_after_the_window_are_not_the_programs():
    """nsighttc's own recording of ``wrappers/graph_serve.py`` (a cached run, H200): after the window's
    ``nsighttc.window`` mark ends, the launcher drains the GPU before it stops the recording and syncs to time the
    steps after it, two ``cudaDeviceSynchronize`` calls made inside the program's replay call. They are no call of the
    program's: the sync table keeps the program's 104 reads of its answers and the device syncs before the window's
    end (a loop replaying two graphs a step, whose host ran 40 ms ahead of its GPU, was judged "mixed: a synchronising
    call at `synchronize` emptied the GPU's queue" on that drain)."""
    from nsighttc.analysis.timeline import SYNC_CALLS
    from nsighttc.parse import load
    tl = load(FIX / "graph_serve_cached_live.json.xz").timeline
    end = float(tl.marks.loc[(tl.marks["name"] == "nsighttc.window").to_numpy(), "end_ns"].max())
    raw = tl.api[tl.api["name"].isin(SYNC_CALLS).to_numpy()]
    late = int((raw["start_ns"] >= end).sum())
    assert late == 2 and set(raw.loc[raw["start_ns"] >= end, "name"]) == {"cudaDeviceSynchronize"}
    sync = nsighttc.analyze([FIX / "graph_serve_cached_live.json.xz"]).to_json()["timeline"]["sync"]["by_name"]
    assert sync["cudaStreamSynchronize"]["calls"] == int((raw["name"] == "cudaStreamSynchronize").sum()) == 104
    assert sync["cudaDeviceSynchronize"]["calls"] == int((raw["name"] == "cudaDeviceSynchronize").sum()) - late


def _update_blocks(path: Path) -> list[float]:
    """The starts of the optimizer updates in a plain nsys recording, read with sqlite alone: runs of
    ``multi_tensor_apply`` kernels (the gradient clipping's and AdamW's), a new run where more than 100 other kernels
    came between two of them."""
    import lzma
    import sqlite3
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "r.sqlite"
        db.write_bytes(lzma.decompress(path.read_bytes()))
        con = sqlite3.connect(db)
        rows = con.execute("SELECT k.start, s.value LIKE '%multi_tensor_apply%' FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                           "JOIN StringIds s ON s.id = k.demangledName ORDER BY k.start").fetchall()
        con.close()
    starts, since = [], None
    for i, (start, update) in enumerate(rows):
        if update:
            if since is None or i - since > 100:
                starts.append(float(start))
            since = i
    return starts


def test_gradient_accumulation_in_a_plain_nsys_recording_is_one_step_per_optimizer_update():
    """transformers' Trainer with ``gradient_accumulation_steps=4`` (a tiny BERT, ``wrappers/trainer_finetune.py
    --grad-accum 4 --tiny --seq 32 --steps 10``) under a plain ``nsys profile -t cuda,nvtx`` (H200, 2026-11-30,
    ``gpu_steps_time.sh OUT trainer_accum_small``; kept to its first 1.36 s, 5 of its 10 optimizer steps). Each
    micro-batch's 222 kernels repeat exactly; the update comes every fourth. Before: "19 steady steps of 10.4 ms", the
    micro-batches (the whole recording: "128 steady steps of 1.31 ms", the copies of the loss's NaN check). The
    BERT-base run of the same (reports/steps_time/trainer_accum): "48 steps of 63.7 ms" where the program's optimizer
    steps took 254 ms; now 11 of 258 ms."""
    path = FIX / "trainer_accum_nsys.sqlite.xz"
    tl = nsighttc.analyze([path]).to_json()["timeline"]
    st = tl["steps"]
    updates = _update_blocks(path)
    assert len(updates) == 5  # (the recording's own count: the steps' truth)
    assert st["source"] == "kernel-period" and st["count"] == len(updates) - 1, st["count"]
    between = sorted(b - a for a, b in zip(updates, updates[1:]))
    truth = (between[1] + between[2]) / 2  # the median of the 4 intervals between updates
    assert abs(st["median_iteration_ns"] / truth - 1) < 0.05, (st["median_iteration_ns"], truth)
    assert "repeating kernel sequence" in st["found_by"]


def _unmarked_copy(src: Path, tmp_path: Path) -> Path:
    """``src`` as a recording made without marks: an nsys export without its NVTX ranges, or a torch.profiler trace of
    the CUDA activity alone (no operators, no ranges)."""
    import lzma
    import sqlite3
    if src.name.endswith(".sqlite.xz"):
        db = tmp_path / "plain.sqlite"
        db.write_bytes(lzma.decompress(src.read_bytes()))
        con = sqlite3.connect(db)
        con.execute("DELETE FROM NVTX_EVENTS")
        con.commit()
        con.close()
        return db
    doc = json.load(fixture_open(src))
    host = {"cpu_op", "user_annotation", "python_function", "cpu_instant_event"}
    out = tmp_path / "cuda_only.json.gz"
    with gzip.open(out, "wt", compresslevel=1) as fh:
        kept = [e for e in doc["traceEvents"] if e.get("cat") not in host]
        fh.write(json.dumps({**doc, "traceEvents": kept}))
    return out


@pytest.mark.parametrize("name", ["compile_nsys.sqlite.xz", "compile_torch.json.xz"])
def test_a_compiled_loop_recorded_without_marks_is_stepped_by_its_kernels_not_by_the_compilers_copies(name, tmp_path):
    """``wrappers/compile_loop.py`` (torch.compile, 12 steps; tests/fixtures/unmarked: recorded with nsighttc's step
    marks, which are taken out here). torch.compile copies results to the host while it compiles: without marks the
    steps were those copies, "14 steady steps of 289 us" and one "slow step" of 12 s holding the compilation and the
    whole loop, "GPU busy 1%", first fix "up to 153x". The steps are the loop's 13 ms iterations, as the marks say."""
    src = FIXTURES / "unmarked" / name
    marked = nsighttc.analyze([src]).to_json()["timeline"]["steps"]
    plain = nsighttc.analyze([_unmarked_copy(src, tmp_path)]).to_json()["timeline"]
    st = plain["steps"]
    assert marked["source"] == "hook" and st["source"] == "kernel-period", st["found_by"]
    steady = lambda s: s["count"] - s.get("warmup_steps", 0)  # noqa: E731
    assert abs(steady(st) - steady(marked)) <= 1, (steady(st), steady(marked))
    assert abs(st["median_iteration_ns"] / marked["median_iteration_ns"] - 1) < 0.1
    assert abs(st["steady_gpu_busy_share"] - marked["steady_gpu_busy_share"]) < 0.1
    assert plain["loop_time"]["slow_steps"] == 0


# wrappers/checkpoint_loop.py's defaults: 6 Linear(4096, 4096) layers and a Linear(4096, 10); AdamW keeps two fp32
# moments a parameter, so a checkpoint of the model and the optimizer brings 12 bytes a parameter to the host
CHECKPOINT_PARAMS = 6 * (4096 * 4096 + 4096) + 4096 * 10 + 10
PLAIN_STALL_NS = 0.762e9 / 5     # plain run (H200, gpu_steps_time.sh OUT slowsteps): 5 slow reads, 0.762 s beyond the step


def test_slow_steps_at_known_shapes_are_explained_a_checkpoint_and_a_data_stall():
    """``wrappers/checkpoint_loop.py`` recorded whole by torch.profiler by hand (H200, first 3.4 s: 22 steps), whose
    slow steps are not at new shapes: a ``torch.save`` checkpoint at step 15 and two slow reads of 150 ms. Before they
    were only counted ("3 slow steps ... 1.72 s beyond it"); now their excess is told by cause, and the causes add up
    to it: the slow reads' time in the DataLoader's fetch, the checkpoint's copies of the model's and the optimizer's
    state to the host (their bytes are the state's size) and the host blocked while they ran."""
    from nsighttc.render.markdown import headlines
    tl = nsighttc.analyze([FIX / "checkpoint_loop_torch.json.xz"]).to_json()["timeline"]
    lt = tl["loop_time"]
    sc = lt["slow_causes"]
    assert lt["slow_steps"] == sc["steps"] == 3 and not lt.get("new_shape_steps")
    assert sum(c["ns"] for c in sc["causes"]) == pytest.approx(sc["excess_ns"], rel=1e-9)
    assert sc["excess_ns"] == pytest.approx(lt["slow_beyond_median_ns"], rel=0.02)
    by = {c["kind"]: c for c in sc["causes"]}
    data = [c for c in sc["causes"] if c["kind"] == "host-range" and "DataLoader" in c["name"]]
    assert len(data) == 1 and abs(data[0]["ns"] / (2 * PLAIN_STALL_NS) - 1) < 0.2, data
    # the checkpoint: its copies, and the host between them (torch.save writing each tensor out, outside any range;
    # each copy's sync found the GPU idle, so that time is the host's, not the syncs': read as 709 ms of
    # "synchronising calls" before)
    from nsighttc.analysis.timeline.idle import NO_RANGE
    between = sum(c["ns"] for c in sc["causes"] if c["kind"] == "host-range" and c["name"] == NO_RANGE)
    checkpoint = by["copies-to-host"]["ns"] + by.get("sync", {"ns": 0.0})["ns"] + between
    assert checkpoint > 0.7 * (sc["excess_ns"] - data[0]["ns"])
    assert by.get("sync", {"ns": 0.0})["ns"] < 0.05 * checkpoint
    copies = sc["copies_to_host"]
    assert copies["typical_copies"] == 0 and abs(copies["bytes"] / (12 * CHECKPOINT_PARAMS) - 1) < 0.01
    line = headlines.loop_time_line(tl)
    assert "data loading (`enumerate(DataLoader)#" in line and "a checkpoint (`torch.save`)" in line


def test_a_checkpoint_is_a_finding_of_its_own_on_the_loops_time_and_the_per_step_findings_judge_the_other_steps():
    """The same recording: the checkpoint at step 15 (one step copying the model's and AdamW's state to the host,
    1.2 GB) held two thirds of the loop, and the report led with "Synchronising calls stall the launch queue, up to
    2.49x" on the 19.2 ms median step, then "data loading up to 2.49x", whose per-step idle time held the checkpoint's
    syncs and the slow reads over a step that holds neither. Now the checkpoint is the headline's cause and the first
    fix, its gain on the loop's whole time, and the other findings are of the other steps: data loading's gain at most
    what removing the DataLoader's whole fetch time from the loop gives."""
    from nsighttc.render.markdown import headlines
    doc = nsighttc.analyze([FIX / "checkpoint_loop_torch.json.xz"]).to_json()
    tl = doc["timeline"]
    fam = tl["step_families"][0]
    ck = tl["loop_time"]["slow_causes"]["checkpoint"]
    first = doc["findings"][0]
    assert first["id"] == "checkpoint-in-loop" and first["gain"]["of"] == "the loop", first["id"]
    assert ck["steps"] == fam["checkpoint_steps"] == 1 and abs(ck["bytes"] / (12 * CHECKPOINT_PARAMS) - 1) < 0.01
    # its cost: the checkpoint step's time beyond the typical step, which held no slow read
    it = np.asarray(fam["iteration_ns"][fam["warmup_steps"]:])
    longest = float(it.max()) - fam["time_accounting"]["base_ns"]
    assert ck["cost_ns"] == pytest.approx(longest, rel=0.01)
    loop = fam["time_accounting"]["loop_ns"]
    g = first["gain"]
    assert g["high"] == pytest.approx(loop / (loop - ck["cost_ns"]), rel=0.01) and g["low"] < g["high"] <= 3 * g["low"]
    assert "checkpoints (1 step copied the model's state" in tl["headline_cause"]
    assert "Checkpoints hold" in headlines.first_fix(doc) and "of the loop" in headlines.first_fix(doc)
    fetch = next(r for r in doc["ranges"] if r["name"].startswith("enumerate(DataLoader)"))
    data = next(f for f in doc["findings"] if f["id"] == "gpu-starved-by-data-loading")
    assert data["gain"]["high"] <= 1.01 * loop / (loop - fetch["wall_ns"]), (data["gain"], fetch["wall_ns"])
    sync = next(f for f in doc["findings"] if f["id"] == "synchronising-calls")
    assert not (sync["gain"] or {}).get("high") or sync["gain"]["high"] < g["high"]


def test_copies_to_the_host_that_saved_nothing_are_named_at_their_line_and_a_save_on_the_hosts_stacks_stays_one():
    """H200, ``wrappers/checkpoint_loop.py --save-mode copy``: the weights copied to the host every 15 steps and
    averaged there (403 MB a time, no ``torch.save``; plain, the loop took 3.3-4.8 s, 2.6 s copying half as often, 1.9 s
    never: reports/steps_time/readback). Its cached run read "checkpoints (1 step copied the model's state to the host
    ... as `torch.save` of a `state_dict()` does ...)" and "Checkpoints hold 45%", with the advice to save less often.
    The host's 63 stack samples in that step sat at the copying line, none in a save: copies to the host, named at the
    line, with their own finding and advice. The torch.save loop's first run (536 samples in its checkpoint steps, 98%
    in the save) stays a checkpoint, now said from its stacks; a recording without samples reads as before."""
    from nsighttc.render.markdown import headlines, render
    run = FIX / "host_copies"
    doc = nsighttc.analyze([run / "cp_cached" / "torch_trace.json.xz"]).to_json()
    tl = doc["timeline"]
    host = tl["loop_time"]["slow_causes"]["checkpoint"]["host"]
    assert host["saved"] is False and host["samples"] >= 10 and host["save_share"] == 0
    assert (host["program_frame"], host["program_line"]) == ("main", "wrappers/checkpoint_loop.py:124")  # (.cpu())
    assert tl["headline_cause"].startswith("copies to the host (1 step copied 402.9 MB in 14 copies to the host in "
                                           "`main` (wrappers/checkpoint_loop.py:124) and saved nothing"), \
        tl["headline_cause"]
    assert "torch.save" not in tl["headline_cause"]
    f = next(x for x in doc["findings"] if x["id"].endswith("-in-loop"))
    assert f["id"] == "host-copies-in-loop" and f["title"].startswith("Copies to the host hold 45%"), f["title"]
    assert f["advice"].startswith("Copy less often") and "Save less often" not in f["advice"]
    assert f["gain"]["of"] == "the loop" and 1 < f["gain"]["low"] < f["gain"]["high"] <= 3 * f["gain"]["low"]
    assert f["gain"]["basis"].startswith("`host-copies-in-loop`: 50% (copied half as often)")
    assert "no save on the host's stacks" in headlines.loop_time_line(tl) and "Copies to the host hold" in render(doc)
    saved = nsighttc.analyze([run / "ck_first" / "torch_trace.json.xz"]).to_json()
    ck = saved["timeline"]["loop_time"]["slow_causes"]["checkpoint"]
    assert ck["host"]["saved"] is True and ck["host"]["save_share"] > 0.9 and ck["host"]["samples"] > 100
    assert saved["findings"][0]["id"] == "checkpoint-in-loop" and "and saved it in `main`" in \
        saved["timeline"]["headline_cause"]
    by_hand = nsighttc.analyze([FIX / "checkpoint_loop_torch.json.xz"]).to_json()  # no samples: the bytes say it
    assert "host" not in by_hand["timeline"]["loop_time"]["slow_causes"]["checkpoint"]
    f = next(x for x in by_hand["findings"] if x["id"] == "checkpoint-in-loop")
    assert "samples the host's stacks, which tell them apart" in f["evidence"]


def test_a_trainers_own_save_is_named_at_the_trainers_line_not_at_the_batch_fetched_beside_it():
    """H200, ../shared/programs/hf_bert.py with the Trainer saving every 15 steps (``save_strategy="steps"``:
    safetensors of the model, torch.save of AdamW's state; plain 19.4-21.0 s against 17.6 s without saving), cached
    run: its checkpoint step's 305 stack samples were 46% in the save and most of the rest in the dataset's
    ``__getitem__`` fetching the next batch, and the headline said "saved it in `Synth.__getitem__`
    (hf_save.py:26)". The save's own samples name where: the Trainer's line that calls it (no line of the program's
    is under it)."""
    doc = nsighttc.analyze([FIX / "host_copies" / "hf_trainer_cached" / "torch_trace.json.xz"]).to_json()
    tl = doc["timeline"]
    host = tl["loop_time"]["slow_causes"]["checkpoint"]["host"]
    assert host["saved"] is True and 0.3 < host["save_share"] < 0.6 and host["samples"] > 100
    assert host["program_frame"] == "Trainer._run_epoch" and host["program_line"].startswith("transformers/trainer.py:")
    assert tl["headline_cause"].startswith("checkpoints (1 step copied the model's state to the host") and \
        "saved it in `Trainer._run_epoch`" in tl["headline_cause"] and "__getitem__" not in tl["headline_cause"]
    assert doc["findings"][0]["id"] == "checkpoint-in-loop"


def test_a_slow_step_whose_gpu_computes_beyond_a_typical_step_is_no_checkpoint(monkeypatch):
    """A checkpoint copies and writes; an evaluation that reads its outputs back computes too. The checkpoint step of
    the recording above computed nothing beyond a typical step (``COMPUTE_SHARE`` bounds that extra work by its share
    of the step's excess): with the bar set under its own extra work, the step is a slow step explained by cause, no
    checkpoint, and the per-step findings hold it again."""
    from nsighttc.analysis.timeline.steps import slow_causes
    monkeypatch.setattr(slow_causes, "COMPUTE_SHARE", -0.01)
    doc = nsighttc.analyze([FIX / "checkpoint_loop_torch.json.xz"]).to_json()
    tl = doc["timeline"]
    assert "checkpoint" not in tl["loop_time"]["slow_causes"] and "checkpoint_steps" not in tl["step_families"][0]
    assert not any(f["id"] == "checkpoint-in-loop" for f in doc["findings"])
    assert tl["loop_time"]["slow_causes"]["copies_to_host"]["bytes"] > slow_causes.STATE_BYTES
    from nsighttc.render.markdown import headlines
    assert "device-to-host copies" in headlines.loop_time_line(tl) and "checkpoint" not in headlines.loop_time_line(tl)


def test_a_save_in_every_step_recorded_without_host_samples_is_named_by_its_copies():
    """``wrappers/checkpoint_loop.py --dim 1024 --save-every 1`` recorded by hand with torch.profiler (H200; no host
    samples, so no Python call is named): each step saves the model and AdamW's state. No step is a checkpoint of its
    own (each copies the same 75 MB); the finding on the host's time outside any range read "overlap this host work
    with GPU work". It now says what each step copied, the model's state's size, and the advice to do it every N steps."""
    doc = nsighttc.analyze([FIX / "checkpoint_every_step_torch.json.xz"]).to_json()
    fam = doc["timeline"]["step_families"][0]
    params = 6 * (1024 * 1024 + 1024) + 1024 * 10 + 10
    assert abs(fam["host_copy_bytes_per_step"] / (12 * params) - 1) < 0.01, fam.get("host_copy_bytes_per_step")
    assert "checkpoint_steps" not in fam and not any(f["id"] == "checkpoint-in-loop" for f in doc["findings"])
    first = doc["findings"][0]
    assert first["id"] == "host-copies-every-step" and "75.7 MB to the host" in first["title"], first["title"]
    assert first["advice"].startswith("Do it every N steps") and first["gain"]["high"] > 1


CHECKPOINT_CALL = Path(__file__).resolve().parents[2] / "reports" / "steps_time" / "checkpoint"


def _plain_loops(summary: str) -> dict[str, list[float]]:
    """The plain runs' loop times in a GPU call's summary, by variant: 'plain ck15_1: rc=0 ... loop 14.247 s, ...'."""
    out: dict[str, list[float]] = {}
    for m in re.finditer(r"^plain (ck\w+?)(?:_\d)?: rc=0 .*?; loop ([\d.]+) s,", summary, re.M):
        out.setdefault(m.group(1), []).append(float(m.group(2)))
    return out


def test_the_checkpoint_gain_counts_the_unrecorded_steps_and_holds_saving_half_as_often():
    """A cached run of ``wrappers/checkpoint_loop.py`` (H200, reports/steps_time/checkpoint): its window recorded 12
    steps holding one checkpoint, then 43 steps ran unrecorded, 3 more checkpoints among them. The gain, recomputed
    from its verdict by this checkout, counts those steps and their checkpoints (the window alone holds one in 12, the
    program saves one in 15), and holds what the plain runs of the same call measured: saving every 30 steps instead
    of 15 within the range, saving none no further than its high end."""
    from nsighttc.analysis import gain
    doc = gain.attach(json.loads(lzma.decompress((CHECKPOINT_CALL / "ck_cached_verdict.json.xz").read_bytes())))
    g = next(f for f in doc["findings"] if f["id"] == "checkpoint-in-loop")["gain"]
    assert doc["findings"][0]["id"] == "checkpoint-in-loop" and "timed unrecorded after the window" in g["basis"]
    loops = _plain_loops(lzma.decompress((CHECKPOINT_CALL / "summary.txt.xz").read_bytes()).decode())
    assert len(loops["ck15"]) == 2 and loops["ck30"] and loops["ck0"], loops
    half = [t / loops["ck30"][0] for t in loops["ck15"]]
    none = [t / loops["ck0"][0] for t in loops["ck15"]]
    assert g["low"] <= min(half) and max(half) <= g["high"], (g, half)
    assert min(none) <= g["high"] <= 1.2 * max(none), (g, none)


def test_slow_steps_at_new_shapes_are_the_shapes_cost_and_not_told_again(varlen):
    """The variable-length loop's slow steps are all at new shapes: the shapes' account holds them
    (``new_shape_steps``), and no second account of the same steps is given."""
    lt = varlen["timeline"]["loop_time"]
    assert lt["new_shape_steps"] == lt["slow_steps"] > 0 and "slow_causes" not in lt


ENCODER_CALL = Path(__file__).resolve().parents[2] / "reports" / "steps_time" / "encoder"


def test_unrecorded_steps_no_faster_than_recorded_ones_leave_the_high_end_to_the_unmeasured_rule():
    """A variable-length loop not built like the wrappers (``benchmarks/gpu/probe_encoder_varlen.py``:
    ``nn.TransformerEncoder``, bf16 autocast, a padding mask; H200, ``gpu_steps_time.sh OUT encoder3``). Its cached
    run timed 4 steps unrecorded at lengths seen before, 5.93 ms against 5.08 ms recorded: the host's speed moved, the
    recording's cost went unmeasured. The high end took them as measured (no faster than recorded): 2.71-3.99x, where
    the plain pair run next measured 4.16x over the loop after its first batch (each batch at a length seen before
    3.3 ms plain). It now takes the rule for a loop nothing timed unrecorded, and says why. (The call's first plain
    pair, the machine's first cuDNN run, measured 12.4x: a cold machine's per-length cost, which no warm run shows.)"""
    from nsighttc.analysis import gain
    doc = json.loads(lzma.decompress((ENCODER_CALL / "call3_cached_verdict.json.xz").read_bytes()))
    saved = next(f for f in doc["findings"] if f["id"] == "shape-churn")["gain"]
    u = doc["timeline"]["steps"]["unrecorded"]
    assert u["median_ns"] > u["known_shape_ns"] and u["steps"] == 4
    g = next(f for f in gain.attach(doc)["findings"] if f["id"] == "shape-churn")["gain"]
    summary = lzma.decompress((ENCODER_CALL / "summary_call3.txt.xz").read_bytes()).decode()
    after = {m.group(1): float(m.group(2))  # each plain run's ms a batch after its first batch
             for m in re.finditer(r"^plain (enc_\w+): rc=0 .*?first batch \d+ ms, then ([\d.]+) ms/batch", summary, re.M)}
    warm = after["enc_pad_b"] / after["enc_bucket_b"]
    assert saved["high"] < warm, (saved, warm)  # (the range as the GPU made it missed the pair)
    assert g["low"] <= warm <= g["high"] <= 3.0 * g["low"], (g, warm)
    assert "were no faster: the host's own speed moved more than the recording cost" in g["basis"]


def test_a_training_loop_compiled_to_replay_graphs_is_told_of_its_optimizer_outside_them_not_of_logits_processors():
    """A training step compiled with ``torch.compile(model, mode="reduce-overhead")`` (H200, a cached run of
    ``benchmarks/gpu/user_programs/compiled_graphs.py``: plain 1.31-1.35 ms a step, 2.13 ms with mode="default"). Its
    steps are the optimizer's; its host-bound finding said that the program already replays CUDA graphs, as it should,
    then told a training loop to cut "Python logits processors, stopping criteria, streamers, `.item()` per token",
    generate()'s words. Now the words are a training loop's, and the optimizer's foreach kernels launched outside the
    graphs are named with their fix."""
    doc = nsighttc.analyze([FIX / "compiled_train_cached" / "torch_trace.json.xz"]).to_json()
    tl = doc["timeline"]
    assert tl["steps"]["source"] == "hook" and tl["steps"]["name"] == "optimizer steps" and tl["steps"]["count"] > 100
    assert sum(p["share"] for p in tl["loop_time"]["parts"] if p["part"] == "steady steps") > 0.9
    first = doc["findings"][0]
    assert first["id"] in ("host-bound-model-code", "launch-bound") and first["gain"]["high"] < 2.0
    graphed = [f for f in doc["findings"] if "already replays CUDA graphs" in (f.get("advice") or "")]
    assert graphed and first in graphed
    for f in graphed:
        assert "logits processors" not in f["advice"] and "per token" not in f["advice"]
        assert "`.item()` per step" in f["advice"] and "the optimizer's step among them" in f["advice"]
        assert "`fused=True`" in f["advice"] and "multi_tensor_apply" in f["advice"]
