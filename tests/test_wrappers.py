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
}


@pytest.mark.parametrize("case", list(CASES))
def test_wrapper_smoke(case):
    pytest.importorskip("torch")
    script = case.split()[0]
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
