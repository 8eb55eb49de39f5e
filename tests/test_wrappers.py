"""Every wrapper runs in --device cpu smoke mode (what CI can run) and prints its headline metric."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    "llm_generate.py": ([], r'"wrapper": "llm_generate".*"ttft_ms": [\d.]+, "tpot_ms": [\d.]+'),
    "llm_generate.py --cache static": (["--cache", "static"], r'"cache": "static"'),
    "eval_loop.py": ([], r'"wrapper": "eval_loop".*"images_per_s"'),
    "fsdp2_train.py": ([], r"fsdp2_train rank 0/1 fsdp2 cpu-gloo fp32 .* ms/step, [\d,]+ tokens/s total"),
    "fsdp2_train.py --fsdp 1": (["--fsdp", "1"], r"fsdp2_train rank 0/1 fsdp1 cpu-gloo fp32 .* ms/step"),
}
NEEDS = {"trainer_finetune.py": "transformers", "lightning_module.py": "lightning", "llm_generate.py": "transformers"}


@pytest.mark.parametrize("case", list(CASES))
def test_wrapper_smoke(case):
    pytest.importorskip("torch")
    script = case.split()[0]
    if script in NEEDS:
        pytest.importorskip(NEEDS[script])
    extra, pattern = CASES[case]
    proc = subprocess.run([sys.executable, str(WRAPPERS / script), "--device", "cpu", *extra],
                          capture_output=True, text=True, timeout=600, env=ENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(pattern, proc.stdout), proc.stdout


@pytest.mark.parametrize("script", sorted(p.name for p in WRAPPERS.glob("[a-z]*.py")))
def test_wrapper_help(script):
    proc = subprocess.run([sys.executable, str(WRAPPERS / script), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--device" in proc.stdout


def test_multi_phase_rejects_unknown_phases():
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(WRAPPERS / "multi_phase.py"), "--device", "cpu", "--phases", "nope"],
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 2 and "unknown phase(s) nope" in proc.stderr


# Programs that mark nothing, run through the launcher as every engine runs them: the step hooks must cut each into
# exactly its optimizer steps, whatever drives the loop (a Trainer, Lightning's closure, a compiled model).
UNMARKED = {"trainer_finetune.py": ([], 6, "transformers"), "lightning_module.py": ([], 6, "lightning"),
            "compile_loop.py": ([], 6, None), "dataloader_bound.py": (["--no-annotate"], 3, None),
            "ddp_train.py": (["--no-annotate"], 5, None), "fsdp2_train.py": ([], 8, None),
            "fsdp2_train.py --fsdp 1": (["--fsdp", "1"], 8, None)}


@pytest.mark.parametrize("script", list(UNMARKED))
def test_unmarked_programs_get_their_optimizer_steps(script, tmp_path):
    pytest.importorskip("torch")
    extra, steps, needs = UNMARKED[script]
    if needs:
        pytest.importorskip(needs)
    import nsighttc
    trace = tmp_path / "trace.json"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--torch-trace", str(trace), "--",
                           str(WRAPPERS / script.split()[0]), "--device", "cpu", *extra], capture_output=True,
                          text=True, timeout=600, env=ENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    tl = nsighttc.analyze([trace]).to_json()["timeline"]
    assert tl["steps"]["source"] == "hook" and tl["steps"]["count"] == steps
    assert tl["startup"]["first_step_ns"] > 0 and tl["startup"]["seconds"] * 1e9 >= tl["startup"]["first_step_ns"]


def test_the_generation_wrapper_through_the_launcher_gets_its_requests_prefills_and_decodes(tmp_path):
    """Issue 44: steps equal the model calls, requests the generate() calls, and the inference section is there."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import json as json_
    import nsighttc
    trace = tmp_path / "trace.json"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--torch-trace", str(trace), "--",
                           str(WRAPPERS / "llm_generate.py"), "--device", "cpu"], capture_output=True, text=True,
                          timeout=600, env=ENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = json_.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("{")))
    requests = said["requests"] + said["warmup_requests"]
    calls = requests * said["model_calls_per_request"]
    tl = nsighttc.analyze([trace]).to_json()["timeline"]
    assert tl["steps"]["source"] == "hook" and tl["steps"]["count"] == calls
    inf = tl["inference"]
    assert inf["requests_recorded"] == requests and inf["model_calls"] == calls
    assert inf["ttft_ns"] > 0 and inf["tpot_ns"] > 0 and inf["prefill"]["calls"] + inf["decode"]["calls"] <= calls
