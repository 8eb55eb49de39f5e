"""A generation loop recorded without nsighttc (a torch.profiler trace the program made itself, a plain nsys run of
it: tests/fixtures/inference/README.md) gets its prefill/decode split from the kernels alone
(``analysis/timeline/steps/generation.py``). What the tests compare with is read from the raw files on their own:
greedy decoding launches one argmax per model call (`ArgMaxOps`), and `generate()` one cumsum (cub's
`DeviceScanInitKernel`) per request."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3

import numpy as np
import pytest

import nsighttc
from nsighttc.analysis.timeline.steps import generation
from nsighttc.render.markdown import inference_section
from tests.conftest import fixture_open

FIX = "tests/fixtures/inference/"
TORCH, NSYS = FIX + "llm_generate_user_torch.json.xz", FIX + "llm_generate_user_nsys.sqlite.xz"


def _kernels_torch(path: str) -> list[tuple[float, float, str]]:
    doc = json.load(fixture_open(path))
    return sorted((e["ts"] * 1e3, (e["ts"] + e["dur"]) * 1e3, e["name"]) for e in doc["traceEvents"]
                  if e.get("cat") == "kernel")


def _kernels_nsys(path: str, tmp_path) -> list[tuple[float, float, str]]:
    db = tmp_path / "k.sqlite"
    with fixture_open(path) as f, open(db, "wb") as g:
        shutil.copyfileobj(f, g)
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                         "JOIN StringIds s ON s.id = k.demangledName").fetchall()
    return sorted((float(a), float(b), n) for a, b, n in rows)


def _truth(kernels) -> dict:
    """Model calls, requests and each request's median argmax spacing, from the raw kernels."""
    argmax = np.array([s for s, _, n in kernels if "ArgMaxOps" in n])
    scans = np.array([s for s, _, n in kernels if "DeviceScanInitKernel" in n])
    req = np.searchsorted(scans, argmax, side="right") - 1
    spacing = [float(np.median(np.diff(argmax[req == r]))) for r in range(len(scans))]
    return {"calls": len(argmax), "requests": len(scans), "spacing": spacing}


@pytest.fixture(scope="module")
def torch_inf():
    return nsighttc.analyze([TORCH]).to_json()["timeline"]


@pytest.fixture(scope="module")
def nsys_inf():
    return nsighttc.analyze([NSYS]).to_json()["timeline"]


def test_a_torch_trace_made_elsewhere_splits_prefill_from_decode(torch_inf):
    truth = _truth(_kernels_torch(TORCH))
    inf = torch_inf["inference"]
    assert inf["request_source"] == "prefill calls found from the kernels" and inf["found_by"] == generation.FOUND_BY
    assert inf["model_calls"] == truth["calls"] == torch_inf["steps"]["count"]
    assert inf["requests_recorded"] == inf["requests"] == truth["requests"]  # no warm-up steps here: all steady
    assert inf["prefill"]["calls"] == truth["requests"]
    assert inf["decode"]["calls"] == truth["calls"] - truth["requests"]
    assert abs(inf["tpot_ns"] / np.median(truth["spacing"]) - 1) < 0.05
    # the prompt's GEMMs are heavier and other tiles: more GPU time per call, and more kernels (the request's set-up)
    assert inf["prefill"]["gpu_ns_per_call"] > inf["decode"]["gpu_ns_per_call"]
    assert inf["ttft_ns"] > inf["tpot_ns"]


def test_a_plain_nsys_run_splits_too_and_its_slow_first_request_is_warm_up(nsys_inf, tmp_path):
    truth = _truth(_kernels_nsys(NSYS, tmp_path))
    inf = nsys_inf["inference"]
    assert inf["model_calls"] == truth["calls"] and inf["requests_recorded"] == truth["requests"]
    # the first request ran every call ~7x slower (every new KV length a new shape): warm-up steps, left out
    assert truth["spacing"][0] > 5 * np.median(truth["spacing"][1:])
    assert nsys_inf["steps"]["warmup_steps"] > 0 and inf["requests"] == truth["requests"] - 1
    assert abs(inf["tpot_ns"] / np.median(truth["spacing"][1:]) - 1) < 0.05
    assert inf["decode"]["calls"] == (truth["calls"] - truth["requests"]) * (truth["requests"] - 1) // truth["requests"]


def test_ttft_over_tpot_is_the_ratio_the_hooks_measured_on_the_same_program(torch_inf, nsys_inf):
    """The hooks' default run of the same program (its marks) against the two recordings made without them: the
    profilers slow every call alike, so time to first token over time per output token should agree."""
    hooked = nsighttc.analyze([FIX + "llm_generate_default_torch.json.xz"]).to_json()["timeline"]["inference"]
    assert "found_by" not in hooked and hooked["request_source"] == "generate() calls"
    ratio = hooked["ttft_ns"] / hooked["tpot_ns"]
    for tl in (torch_inf, nsys_inf):
        r = tl["inference"]["ttft_ns"] / tl["inference"]["tpot_ns"]
        assert abs(r / ratio - 1) < 0.2, (r, ratio)


def test_one_request_recorded_alone_is_found_from_the_loop_s_tail(tmp_path):
    """The torch trace cut inside the host's gap before its second request (a recording of one generate() call):
    no prefill inside the loop to learn from, so the prefill before the loop is found by the same rule as a step,
    and the loop's short last step (the last call's sampling) says where calls start. Without the layer rule of
    ``period.MATCH_SLACK`` the decoder's layer loop (41 kernels) was taken as the step."""
    doc = json.load(fixture_open(TORCH))
    ks = _kernels_torch(TORCH)
    starts = np.array([s for s, _, _ in ks]) / 1e3
    second = sorted(s for s, _, n in ks if "DeviceScanInitKernel" in n)[1] / 1e3
    near = starts[(starts < second) & (starts > second - 30_000)]
    j = int(np.argmax(np.diff(near)))
    cut = (near[j] + near[j + 1]) / 2
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ts", 0) < cut]
    path = tmp_path / "one_request.json"
    path.write_text(json.dumps(doc))
    truth = _truth([k for k in ks if k[0] / 1e3 < cut])
    tl = nsighttc.analyze([path]).to_json()["timeline"]
    inf = tl["inference"]
    assert truth["requests"] == 1 and tl["steps"]["count"] == truth["calls"]  # one step per call, not per layer
    assert inf["model_calls"] == truth["calls"] and inf["requests"] == 1
    assert inf["prefill"]["calls"] == 1 and inf["decode"]["calls"] == truth["calls"] - 1
    assert abs(inf["tpot_ns"] / truth["spacing"][0] - 1) < 0.05


def test_loops_that_are_not_generation_get_no_inference_section():
    """An evaluation loop recorded with nsys (no marks): its steps come from the kernel period, no call runs other,
    heavier matrix tiles, so no prefill and no `inference`; a training loop's recording neither."""
    ev = nsighttc.analyze([FIX + "eval_loop_user_nsys.sqlite.xz"]).to_json()["timeline"]
    assert ev["steps"]["source"] == "kernel-period" and "inference" not in ev
    tr = nsighttc.analyze(["tests/fixtures/unmarked/trainer_nsys.sqlite.xz"]).to_json()["timeline"]
    assert "inference" not in tr


def test_the_report_says_how_the_calls_were_found(torch_inf):
    text = "\n".join(inference_section(torch_inf["inference"]))
    assert "No marks in the recording" in text and "prefill calls found from the kernels" in text


def test_no_kernel_of_a_generate_loop_is_taken_for_an_optimizer_s():
    """Nearly every PyTorch elementwise kernel's name holds `{lambda()#N}`: "lamb" (the LAMB optimizer) matched them
    all, so the period's anchor looked for the step's start after an "optimizer kernel", and a generation loop was
    taken for training."""
    from nsighttc.analysis.timeline.steps import period
    names = {n for _, _, n in _kernels_torch(TORCH)}
    lambdas = [n for n in names if "lambda" in n]
    assert len(lambdas) > 10 and not any(period.OPTIMIZER_KERNEL.search(n) for n in names)
    multi = nsighttc.analyze(["tests/fixtures/multi_phase_torch.json.xz"]).launches["name"].astype(str).unique()
    assert any(period.OPTIMIZER_KERNEL.search(n) for n in multi)  # torch's foreach optimizer kernels still are


STATIC, NESTED = FIX + "llm_static_graphs_nsys.sqlite.xz", FIX + "llm_nested_hook_marks_nsys.sqlite.xz"
STATIC_TORCH = FIX + "llm_static_graphs_torch.json.xz"  # the same program's own torch.profiler trace (--trace)
STATIC_PRINTED = FIX + "llm_static_h200_program.json"   # what it printed of its requests under each recording


@pytest.mark.parametrize("path,under", [(STATIC, "under_nsys"), (STATIC_TORCH, "under_its_own_torch_profiler_trace")])
def test_a_graphed_decode_loops_time_to_first_token_is_the_programs_own(path, under):
    """The static-cache loop on an H200, recorded by nsys and by its own torch.profiler trace: the program's streamer
    timed its first tokens 8.41 and 17.5 ms after each generate() began. The first decode call's replay starts later
    than the token is on the host (the compiled call's guards, its inputs copied into the graph's): the time to that
    call read 13.2 and 26.3 ms. The first token is on the host at the last device-to-host copy before it."""
    printed = json.loads(open(STATIC_PRINTED).read())["printed_by_the_program"][under]
    inf = nsighttc.analyze([path]).to_json()["timeline"]["inference"]
    assert inf["requests"] >= 2 and inf["found_by"] == generation.FOUND_BY
    assert inf["ttft_ns"] == pytest.approx(printed["ttft_ms"] * 1e6, rel=0.05)


def test_a_loop_replaying_its_decoding_step_as_a_cuda_graph_has_its_requests(tmp_path):
    """transformers' static KV cache under torch.compile (a plain nsys run, 4 requests of 24 calls): every decode
    call is a graph replay and the sampling launched after it, each request's prompt runs eagerly between two
    replays. The steps are the replays; the requests, TTFT and TPOT came from none of it before (91 steps, no
    requests). The first request's first decode call ran before any replay (the graph's capture), so its request is
    not in the replayed loop: three requests, every one of its calls found."""
    truth = _truth(_kernels_nsys(STATIC, tmp_path))
    assert truth["requests"] == 4 and truth["calls"] == 96
    tl = nsighttc.analyze([STATIC]).to_json()["timeline"]
    inf = tl["inference"]
    assert tl["steps"]["name"] == "CUDA graph replays" and inf["found_by"] == generation.FOUND_BY
    assert inf["requests_recorded"] == inf["requests"] == truth["requests"] - 1
    assert inf["prefill"]["calls"] == 3 and inf["decode"]["calls"] == 3 * (truth["calls"] // truth["requests"] - 1)
    assert abs(inf["tpot_ns"] / np.median(truth["spacing"][1:]) - 1) < 0.05
    assert inf["prefill"]["gpu_ns_per_call"] > inf["decode"]["gpu_ns_per_call"] and inf["ttft_ns"] > inf["tpot_ns"]


def test_model_calls_without_prefill_and_decode_marks_are_split_from_their_kernels(tmp_path):
    """A recording whose only marks are model calls named like the hooks' (an earlier nsighttc's, or a program's own
    NVTX ranges so named: 96 calls, dynamic KV cache): each step is one call, and its prompt call is found by the
    same rule as a kernel period's. Before, 96 model calls and no requests."""
    truth = _truth(_kernels_nsys(NESTED, tmp_path))
    tl = nsighttc.analyze([NESTED]).to_json()["timeline"]
    inf = tl["inference"]
    assert tl["steps"]["name"] == "model calls" and inf["model_calls"] == truth["calls"] == tl["steps"]["count"]
    assert inf["requests_recorded"] == truth["requests"] and inf["prefill"]["calls"] + 1 == truth["requests"]
    # the first request ran every call ~8x slower (each new KV length a new shape): warm-up, as in the plain run
    assert truth["spacing"][0] > 5 * np.median(truth["spacing"][1:]) and inf["requests"] == truth["requests"] - 1
    assert abs(inf["tpot_ns"] / np.median(truth["spacing"][1:]) - 1) < 0.05
