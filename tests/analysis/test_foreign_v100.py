"""Recordings made elsewhere: tb_plugin's public ResNet-50 samples (pytorch/kineto, BSD; tests/fixtures/foreign), one
training loop on a V100 recorded with a DataLoader of 0 workers and again with 4. What the first says of its fixes
is checked against what the second measured, and against what a V100 can do (fp16 Tensor Cores only)."""
from __future__ import annotations

from pathlib import Path

import pytest

import nsighttc
from nsighttc.experiment import auto

FOREIGN = Path(__file__).resolve().parents[1] / "fixtures" / "foreign"


@pytest.fixture(scope="module")
def workers0():
    return nsighttc.analyze([FOREIGN / "tbplugin_resnet50_workers0_v100.json.xz"]).to_json()


@pytest.fixture(scope="module")
def workers4():
    return nsighttc.analyze([FOREIGN / "tbplugin_resnet50_workers4_v100.json.xz"]).to_json()


def _finding(doc: dict, fid: str) -> dict:
    return next(f for f in doc["findings"] if f["id"] == fid)


def test_a_v100s_fp32_matrix_work_is_sent_to_fp16_not_to_bf16_or_tf32(workers0):
    """Volta's Tensor Cores do fp16 only: old main advised bf16 autocast or TF32 (neither runs on them) and priced
    the fix at H100's ratio ("this GPU not in the peak table: 14.8 assumed"), and `try --variant auto` would have
    run the TF32 and bf16 variants."""
    assert workers0["device"]["compute_capability"] == "7.0"
    f = _finding(workers0, "fp32-matmul-on-cuda-cores")
    assert "torch.float16" in f["advice"] and "bfloat16" not in f["advice"] and "allow_tf32" not in f["advice"]
    assert f["gain"]["dtype"] == "fp16" and "V100 SXM2: fp16 Tensor Core peak 125" in f["gain"]["basis"]
    chosen = [name for name, _ in auto.choose(workers0, None)]
    assert "fp16-autocast" in chosen and "tf32" not in chosen and "bf16-autocast" not in chosen


def test_the_data_loading_range_holds_what_four_workers_measured(workers0, workers4):
    """The loop without workers waits in its DataLoader each step (the first cause); the same loop with 4 workers
    measured its step 1.40x shorter. Old main's low end, 88% of the wait removed ("the fetch shared by 8 workers"),
    sat above it (1.398x): the workers took 85% of the wait and slowed the rest of the step."""
    assert "DataLoader" in workers0["timeline"]["headline_cause"]
    assert "DataLoader" not in (workers4["timeline"]["headline_cause"] or "")
    s0, s4 = workers0["timeline"]["steps"], workers4["timeline"]["steps"]
    assert s0["name"] == s4["name"] == "ProfilerStep" and s0["source"] == s4["source"] == "explicit"
    measured = s0["median_iteration_ns"] / s4["median_iteration_ns"]
    g = _finding(workers0, "gpu-starved-by-data-loading")["gain"]
    assert g["low"] <= measured <= g["high"] <= 3 * g["low"], (measured, g)
    assert "contending for the host's cores" in g["basis"]


def test_a_recording_that_names_no_gpu_gets_the_fix_its_kernels_architecture_runs():
    """The same samples recorded with the autograd profiler API (torch before 1.9: no ``deviceProperties``, no
    ProfilerStep). Main advised bf16 autocast or TF32 and priced it at H100's peaks ("this GPU not in the peak table");
    the kernels' names are Volta's (``volta_scudnn_...``), whose Tensor Cores do fp16 only: the verdict says the
    architecture is read from the names, advises fp16 and prices it at a V100's peaks. Its steps are the optimizer's
    ranges, and the 4-worker recording's step holds inside the data-loading range."""
    w0 = nsighttc.analyze([FOREIGN / "tbplugin_resnet50_autograd_workers0_v100.json.xz"]).to_json()
    w4 = nsighttc.analyze([FOREIGN / "tbplugin_resnet50_autograd_workers4_v100.json.xz"]).to_json()
    dev = w0["device"]
    assert dev["compute_capability"] is None and dev["from_kernel_names"]["architecture"] == "Volta"
    f = _finding(w0, "fp32-matmul-on-cuda-cores")
    assert "torch.float16" in f["advice"] and "does not name its GPU" in f["advice"]
    assert f["gain"]["dtype"] == "fp16" and "V100 SXM2" in f["gain"]["basis"] and "assumed" in f["gain"]["basis"]
    s0, s4 = w0["timeline"]["steps"], w4["timeline"]["steps"]
    assert s0["name"] == "Optimizer.step#" and s0["count"] == s4["count"] == 6
    measured = s0["median_iteration_ns"] / s4["median_iteration_ns"]
    g = _finding(w0, "gpu-starved-by-data-loading")["gain"]
    assert g["low"] <= measured <= g["high"], (measured, g)


def test_the_architecture_read_from_names_is_the_newest_any_kernel_was_built_for():
    import pandas as pd
    from nsighttc.analysis import kernel_arch
    names = pd.Series(["volta_sgemm_128x64_nn", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64>", "relu"])
    assert kernel_arch.newest(names)["compute_capability"] == "8.0"
    assert kernel_arch.newest(pd.Series(["nvjet_sm90_tst_128x256", "ampere_sgemm_64x64_nn"]))["architecture"] == "Hopper"
    assert kernel_arch.newest(pd.Series(["vectorized_elementwise_kernel", "xsm800_thing"])) is None
