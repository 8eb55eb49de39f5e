"""Recordings of serving engines made elsewhere (public traces of AMD's TraceLens tests, tests/fixtures/foreign): each
holds one engine iteration, marked by the engine's own annotation, its model replayed as one graph on an AMD GPU.

Main of 2026-11-29 read neither: no step mark it knew, so the step was a kernel period found inside the one graph
launch (every graph kernel timed at the graph's launch: "12 steps of 0 ns", "36 steps of 0 ns"), and the first finding
"new input shapes ... up to 757,177x" / "1,823,664x" on a step of no time."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import nsighttc
from nsighttc.analysis.timeline import steps as steps_mod
from nsighttc.analysis.timeline.base import GRAPH_LAUNCH_CALLS, SYNC_CALLS, with_hip
from nsighttc.parse import marks
from tests.conftest import fixture_bytes

FOREIGN = Path(__file__).resolve().parents[1] / "fixtures" / "foreign"


@pytest.fixture(scope="module")
def vllm():
    return nsighttc.analyze([FOREIGN / "tracelens_vllm_decode_graph_mi300.json.xz"]).to_json()


@pytest.fixture(scope="module")
def sglang():
    return nsighttc.analyze([FOREIGN / "tracelens_sglang_decode_mi300.json.xz"]).to_json()


@pytest.mark.parametrize("name, folded", [
    ("execute_context_2(14721)_generation_0(0)", "engine step (execute_context_*_generation_*)"),
    ("execute_64_context_0(sq0sk0sqsq0sqsk0)_generation_64(sq64sk131072sqsq64sqsk131072)",
     "engine step (execute_context_*_generation_*)"),
    ("step[DECODE bs=32]", "SGLang step[...]"),
    ("step[EXTEND bs=2 toks=14721 c_sq=14721 c_sqsq=108745533 c_sqsk=108745533 c_sk=14721]", "SGLang step[...]"),
    ("prefill[bs=2 tok=14721 ctx=[7803, 6918]]", "ATOM step (prefill[...], decode[...])"),
    ("decode[bs=117/128 tok=117 d=117]", "ATOM step (prefill[...], decode[...])"),
])
def test_a_serving_engines_iterations_are_folded_into_one_step_name(name, folded):
    ranges = pd.DataFrame({"pid": [1, 1, 1], "tid": [1, 1, 1], "start_ns": [0.0, 10.0, 20.0],
                           "end_ns": [9.0, 19.0, 29.0], "name": [name, "aten::mm", name]})
    kept, _ = marks.split(ranges)
    assert list(kept["name"]) == [folded, "aten::mm", folded]
    assert marks.STEP_PATTERN.match(folded)


def test_names_like_an_engines_are_left_as_they_are():
    ranges = pd.DataFrame({"pid": [1, 1], "tid": [1, 1], "start_ns": [0.0, 5.0], "end_ns": [4.0, 9.0],
                           "name": ["decode_tokens", "execute_model"]})
    assert list(marks.split(ranges)[0]["name"]) == ["decode_tokens", "execute_model"]


def test_one_engine_iteration_is_the_recordings_one_step(vllm, sglang):
    """The engine's annotation is the program's step, even once (as one ``ProfilerStep#``); SGLang's ``step[...]``
    inside the iteration annotation is part of it."""
    for doc in (vllm, sglang):
        st = doc["timeline"]["steps"]
        assert st["source"] == steps_mod.EXPLICIT and st["count"] == 1, st
        assert st["name"].startswith("engine step") and st["median_iteration_ns"] > 1e6
        assert all(f["name"] == st["name"] for f in doc["timeline"]["step_families"])
        assert not any(f["id"] == "shape-churn" for f in doc["findings"])
        assert all((f.get("gain") or {}).get("high") is None or f["gain"]["high"] < 100 for f in doc["findings"])
    # the graph's one launch, and the waits, by their ROCm names
    assert vllm["timeline"]["graphs"]["launches"] == 1 and vllm["timeline"]["graphs"]["kernels"] > 400
    assert "hipEventSynchronize" in vllm["timeline"]["sync"]["by_name"]
    assert sglang["timeline"]["sync"]["by_name"]["hipMemcpyWithStream"]["ns"] > 0.9 * \
        sglang["timeline"]["steps"]["median_iteration_ns"]


def test_a_blocking_copy_that_waits_on_an_idle_gpu_is_the_gpus_wait_not_a_sync(sglang):
    """SGLang's decode step: a 256-byte copy to the host, called 0.4 ms into the step by a blocking
    ``hipMemcpyWithStream``, ran 463 ms later on a GPU that ran nothing recorded meanwhile: the copy sat in the GPU's
    queue behind work the recording does not hold (from before it, or another process) or a dependency. Main of
    2026-12-01 read it "a synchronising call ... emptied the GPU's queue", first fix "Synchronising calls" up to 44x,
    though no fewer syncs would have started that copy sooner; the host waited for the GPU, the GPU for something
    else."""
    tl = sglang["timeline"]
    assert tl["sync"]["by_name"]["hipMemcpyWithStream"]["ns"] > 0.9 * tl["steps"]["median_iteration_ns"]
    waits = {c["kind"]: c["idle_ns"] for c in tl["causes"]}
    assert tl["causes"][0]["kind"] == "gpu-wait" and waits["gpu-wait"] > 0.95 * 463e6, tl["causes"]
    assert waits.get("sync", 0) < 1e6 and "GPU work the recording does not hold" in tl["headline_cause"]
    sync = next(f for f in sglang["findings"] if f["id"] == "synchronising-calls")
    assert (sync.get("gain") or {}).get("high") is None, sync["gain"]
    assert not any((f.get("gain") or {}).get("high") for f in sglang["findings"]), sglang["findings"]


def test_a_kernel_period_inside_one_graph_launch_is_no_step(tmp_path):
    """With the engine's annotation not recorded, the kernel period found among the graph's kernels (all timed at the
    one launch) is no step: iterations of no time have no host boundary between them."""
    import json
    doc = json.loads(fixture_bytes(FOREIGN / "tracelens_vllm_decode_graph_mi300.json.xz"))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "user_annotation"]
    path = tmp_path / "no_annotation.json"
    path.write_text(json.dumps(doc))
    got = nsighttc.analyze([path]).to_json()
    st = got["timeline"].get("steps") or {}
    assert st.get("source") != steps_mod.KERNEL_PERIOD and not (st.get("median_iteration_ns") == 0), st
    assert not any(f["id"] == "shape-churn" for f in got["findings"])


def test_rocm_runtime_calls_are_named_with_their_cuda_twins():
    assert {"hipGraphLaunch", "cudaGraphLaunch", "cuGraphLaunch"} <= GRAPH_LAUNCH_CALLS
    assert {"hipStreamSynchronize", "hipDeviceSynchronize", "hipMemcpyWithStream", "cudaMemcpy"} <= SYNC_CALLS
    assert "hipcuStreamSynchronize" not in SYNC_CALLS and with_hip({"cuLaunchKernel"}) == {"cuLaunchKernel"}


def test_a_gain_range_wider_than_3x_says_what_its_width_comes_from():
    """A generate() loop recorded by torch.profiler idles the GPU 5.79 ms of each 5.74 ms model call (506 us of GPU
    work): the launch-bound finding's range is 1.84x (half of that idle time removed) to 11.3x (all of it). It cannot
    be narrower from one recording; its basis says why, where a range within 3x (a graph-replaying loop's fp32 fix,
    1.02-2.28x) says nothing of it."""
    doc = nsighttc.analyze([FOREIGN.parent / "inference" / "llm_generate_default_torch.json.xz"]).to_json()
    g = doc["findings"][0]["gain"]
    assert g["high"] > 3 * g["low"], g
    assert re.search(r"wider than 3x: the GPU idle time it causes is \d+% of the steps of `model calls`", g["basis"]), \
        g["basis"]
    assert f"all of it: {g['high']:.3g}x" in g["basis"] and f"50% of it: {g['low']:.3g}x" in g["basis"]
    other = nsighttc.analyze([FOREIGN.parent / "steps" / "graph_replay_torch.json.xz"]).to_json()
    narrow = [f["gain"] for f in other["findings"] if (f.get("gain") or {}).get("high")]
    assert narrow and all(x["high"] <= 3 * x["low"] and "wider than" not in x["basis"] for x in narrow)


def test_the_window_holds_the_gpu_work_launched_in_it_and_the_wait_for_that_work_is_the_gpus(vllm):
    """vLLM's decode iteration: the host's annotation ends 2.41 ms in; the copies it launched 0.5 ms in began 8.37 ms
    in, and the graph after them ran to 19.1 ms (work from before the recording, or a dependency: the GPU's queue, not
    the host, held them). The profiled window had ended with the host's last range ("GPU busy (profiled window) 0.0% of
    2.41 ms" beside the step's 56%); with it to 19.1 ms the 7.8 ms after the copies' launch calls had returned were
    "host busy in `(no Python frame)`", a host whose recording had ended. The window holds the GPU work launched in
    it, and the idle time after a launch call returned is the GPU's wait."""
    tl = vllm["timeline"]
    assert tl["window"]["wall_ns"] == pytest.approx(19.11e6, rel=0.01)
    assert tl["window"]["gpu_busy_share"] == pytest.approx(tl["steps"]["steady_gpu_busy_share"], abs=0.005)
    waits = {c["kind"]: c["idle_ns"] for c in tl["causes"]}
    assert waits["gpu-wait"] > 7e6 and tl["headline_cause"].startswith("the GPU idled"), tl["headline_cause"]
    assert "no Python frame" not in tl["headline_cause"]


def test_a_gpu_waiting_on_launched_work_is_not_called_cpu_bound(vllm):
    """The same trace's 56% busy share is under the CPU-bound threshold, and its first cause, 94% of the idle time,
    is the GPU waiting on work already launched: the host was not what the GPU waited for. The headline read
    "CPU-bound: the GPU idled 7.85 ms with the next work already launched", the phases table "CPU-bound" beside it,
    and the host-frames table put 81% of the idle time at "(no Python frame)" with no kind of work."""
    import importlib
    causes = importlib.import_module("nsighttc.analysis.timeline.idle.causes")
    from nsighttc.render.markdown import headlines, render
    assert headlines.GPU_WAIT_WORDS == causes.GPU_WAIT_WORDS  # (render reads the words saved verdicts hold)
    tl = vllm["timeline"]
    assert tl["verdict"] == "cpu-bound" and tl["causes"][0]["kind"] == "gpu-wait"
    line = headlines.timeline_headline(tl)
    assert "not host-bound: the GPU idled" in line and "CPU-bound" not in line, line
    md = render(vllm)
    phase = next(r for r in md.splitlines() if r.startswith("| `engine step"))
    assert "| not host-bound | GPU waiting on launched work" in phase, phase
    frame = next(r for r in md.splitlines() if r.startswith("| `(no Python frame)`"))
    assert frame.endswith("| (the GPU waited on launched work) |"), frame
    # a host cause keeps its word; a rank waiting on others keeps its own
    assert headlines.verdict_word("cpu-bound", "host busy in `x.py:3` (80% of the GPU's idle time, 1 ms)") == "CPU-bound"
    assert headlines.verdict_word("mixed", headlines.COMMUNICATION_CAUSE + " (60%)") == "mixed, communication first"
