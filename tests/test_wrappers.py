"""Every wrapper runs in --device cpu smoke mode (what CI can run) and prints its headline metric."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.forked_runs import ForkServer

ROOT = Path(__file__).resolve().parents[1]
WRAPPERS = ROOT / "wrappers"
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
CASES = {
    "vgg16.py": ([], r"s/image"),
    "vgg16.py --torchscript": (["--torchscript"], r"torchscript .* s/image"),
    "gemm_tflops.py": ([], r"gemm 64\^3 fp32: [\d.]+ TFLOP/s"),
    "mnist_mlp.py": (["--net", "large", "--dtype", "amp"], r"s/epoch .* accuracy [\d.]+"),
    "resnet_amp.py": ([], r"images/s"),
    "dataloader_bound.py": (["--fp16-preprocess"], r"it/s"),
    "reduced_precision.py": ([], r"max relative error"),
    "multi_phase.py": ([], r"(?s)phase train_bf16: .*phase graph_replay: .*phase item_sync: .*phase host_preprocess: "
                           r".*phase tiny_kernels: [\d.]+ steps/s"),
    "trainer_finetune.py": ([], r"samples/s \(Trainer\), [\d.]+ samples/s steady"),
    "compile_loop.py": ([], r"steady [\d.]+ ms/step, \d+ tokens/s"),
    "lightning_module.py": ([], r"steps=6: \d+ images/s steady"),
    "dataloader_bound.py --no-annotate": (["--no-annotate"], r"it/s"),
    "ddp_train.py --no-annotate": (["--no-annotate"], r"ddp_train rank 0/1 cpu-gloo .* ms/step, [\d.]+ images/s total.*warm-up [\d.]+ s"),
    "llm_generate.py": (["--batch", "2"], r'"wrapper": "llm_generate".*"ttft_ms": [\d.]+, "tpot_ms": [\d.]+'),
    "llm_generate.py --cache static": (["--cache", "static"], r'"cache": "static"'),
    "eval_loop.py": ([], r'"wrapper": "eval_loop".*"images_per_s"'),
    "checkpoint_loop.py": (["--stall-every", "2", "--stall-ms", "20"],
                           r"steps=8 save=sync/4: typical step [\d.]+ ms; 2 checkpoints [\d.-]+ s beyond it; 3 "
                           r"stalled reads"),
    "checkpoint_loop.py --save-mode thread": (["--save-mode", "thread", "--stall-every", "0"],
                                              r"steps=8 save=thread/4: typical step [\d.]+ ms; 2 checkpoints"),
    "checkpoint_loop.py --save-mode copy": (["--save-mode", "copy", "--stall-every", "0"],
                                            r"steps=8 save=copy/4: typical step [\d.]+ ms; 2 host copies"),
    "fsdp2_train.py": ([], r"fsdp2_train rank 0/1 fsdp2 cpu-gloo fp32 .* ms/step, [\d,]+ tokens/s total"),
    "fsdp2_train.py --fsdp 1": (["--fsdp", "1"], r"fsdp2_train rank 0/1 fsdp1 cpu-gloo fp32 .* ms/step"),
    "graph_replay.py": (["--steps", "20", "--width", "64", "--layers", "2"], r"steps/s, [\d.]+ ms/step \(eager\)"),
    "graph_replay.py --accum 2": (["--steps", "3", "--width", "64", "--layers", "2", "--accum", "2"],
                                  r"steps/s, [\d.]+ ms/step \(eager, 2 micro-batches a step\)"),
    "varlen_infer.py": (["--batches", "3", "--batch", "2", "--layers", "1", "--max-len", "32"],
                        r"requests/s over 6 requests \(padded to each batch"),
    "varlen_infer.py --model gpt2": (["--batches", "2", "--batch", "2", "--layers", "1", "--max-len", "32", "--model",
                                      "gpt2"], r"requests/s over 4 requests \(padded to each batch, \d batch lengths, gpt2"),
    "varlen_infer.py --vary batch --bucket": (["--batches", "2", "--layers", "1", "--vary", "batch", "--bucket"],
                                              r"requests/s over \d+ requests \(buckets, \d batch sizes, bert"),
    "graph_serve.py": (["--batches", "5", "--batch", "2", "--width", "64", "--layers", "1", "--heads", "4"],
                       r"requests/s, [\d.]+ ms/batch over 5 batches \(eager\)"),
    "grad_accum.py": (["--steps", "1", "--accum", "2", "--batch", "2", "--size", "32"],
                      r"ms per optimizer step \(2 micro-batches\)"),
    "graph_partial.py": (["--steps", "3", "--width", "64", "--layers", "2"], r"steps/s, [\d.]+ ms/step \(eager\)"),
    "varlen_train.py": (["--steps", "3", "--batch", "2", "--layers", "1", "--max-len", "32"],
                        r"samples/s over 3 steps \(padded to each batch, \d batch lengths\), [\d.]+ ms/step"),
    "graph_loader.py": (["--steps", "4", "--batch", "4", "--size", "16", "--channels", "4", "--workers", "1",
                         "--log-every", "2"], r"images/s, [\d.]+ ms/step \(eager, 1 workers, loader\)"),
    "varlen_conv.py": (["--batches", "3", "--batch", "2", "--size-step", "64"],
                       r"images/s over 6 images \(each batch its size, \d sizes, cudnn.benchmark on\)"),
}
NEEDS = {"trainer_finetune.py": "transformers", "lightning_module.py": "lightning", "llm_generate.py": "transformers",
         "varlen_infer.py": "transformers", "varlen_train.py": "transformers"}


# Programs that mark nothing, run through the launcher as every engine runs them: the step hooks must cut each into
# exactly its optimizer steps, whatever drives the loop (a Trainer, Lightning's closure, a compiled model). Their smoke
# run is that launcher run: one process proves both that the wrapper runs and prints its metric, and that its steps
# are found (a plain run beside it cost as much again: issue 54).
UNMARKED_STEPS = {"trainer_finetune.py": 6, "lightning_module.py": 6, "compile_loop.py": 6,
                  "dataloader_bound.py --no-annotate": 3, "ddp_train.py --no-annotate": 5, "fsdp2_train.py": 8,
                  "fsdp2_train.py --fsdp 1": 8}


def _launched(script: str, extra: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, Path]:
    trace = tmp_path / "trace.json"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--torch-trace", str(trace),
                           "--step-times", str(tmp_path / "step_times.json"), "--",
                           str(WRAPPERS / script), "--device", "cpu", *extra], capture_output=True, text=True,
                          timeout=600, env=ENV)
    return proc, trace


@pytest.fixture(scope="module")
def forked():
    """The plain runs are forked from one process that imported torch once (tests/forked_runs.py): on two cores they
    spent two thirds of their time importing it, each."""
    server = ForkServer(env=ENV)
    yield server
    server.close()


@pytest.mark.parametrize("case", list(CASES))
def test_wrapper_smoke(case, tmp_path, forked):
    pytest.importorskip("torch")
    script = case.split()[0]
    if script in NEEDS:
        pytest.importorskip(NEEDS[script])
    extra, pattern = CASES[case]
    if case in UNMARKED_STEPS or case == "llm_generate.py":
        proc, trace = _launched(script, extra, tmp_path)
    else:
        proc = forked.run([str(WRAPPERS / script), "--device", "cpu", *extra], env=ENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(pattern, proc.stdout), proc.stdout
    if case in UNMARKED_STEPS:
        _assert_optimizer_steps(trace, UNMARKED_STEPS[case])
    elif case == "llm_generate.py":
        _assert_requests_prefills_and_decodes(proc, trace)


def _assert_optimizer_steps(trace: Path, steps: int) -> None:
    import nsighttc
    tl = nsighttc.analyze([trace]).to_json()["timeline"]
    assert tl["steps"]["source"] == "hook" and tl["steps"]["count"] == steps
    # (compared as the analysis computes them, ns / 1e9: seconds * 1e9 fell 0.2 ns short of an equal first step in CI)
    assert tl["startup"]["first_step_ns"] > 0 and tl["startup"]["seconds"] >= tl["startup"]["first_step_ns"] / 1e9


def _assert_requests_prefills_and_decodes(proc: subprocess.CompletedProcess, trace: Path) -> None:
    """Issue 44: the generation wrapper through the launcher: steps equal the model calls, requests the generate()
    calls, and the inference section is there."""
    import json as json_
    import nsighttc
    said = json_.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("{")))
    requests = said["requests"] + said["warmup_requests"]
    calls = requests * said["model_calls_per_request"]
    tl = nsighttc.analyze([trace]).to_json()["timeline"]
    assert tl["steps"]["source"] == "hook" and tl["steps"]["count"] == calls
    inf = tl["inference"]
    assert inf["requests_recorded"] == requests and inf["model_calls"] == calls
    assert inf["ttft_ns"] > 0 and inf["tpot_ns"] > 0 and inf["prefill"]["calls"] + inf["decode"]["calls"] <= calls
    # the step timer (try's plain runs) knows each step's kind and sequences: try's tokens/s, TTFT and TPOT (issue 56)
    from nsighttc.experiment import measure
    ph = json_.loads((trace.parent / "step_times.json").read_text())["phases"]["nsighttc.step"]
    kinds, times = ph["kinds"], ph["gpu_ns"] or ph["host_ns"]
    # the first model call opens the first step, which the timer sees end at the second, and the last call's step has
    # no boundary after it: every call between is a timed step
    assert len(times) == calls - 2 and kinds.count("prefill") == requests - 1
    assert kinds.count("decode") == len(times) - (requests - 1) and set(ph["batch"]) == {said["batch"]}
    gen = measure.generation(times, kinds, ph["batch"])
    assert gen["requests"] == requests - 1 and gen["calls"] == len(times)
    assert gen["tokens_per_s"] == pytest.approx(said["batch"] * len(times) / sum(times) * 1e9)


@pytest.mark.parametrize("script", sorted(p.name for p in WRAPPERS.glob("[a-z]*.py")))
def test_wrapper_help(script):
    proc = subprocess.run([sys.executable, str(WRAPPERS / script), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--device" in proc.stdout


def test_multi_phase_rejects_unknown_phases(forked):
    pytest.importorskip("torch")
    proc = forked.run([str(WRAPPERS / "multi_phase.py"), "--device", "cpu", "--phases", "nope"], env=ENV, timeout=120)
    assert proc.returncode == 2 and "unknown phase(s) nope" in proc.stderr
