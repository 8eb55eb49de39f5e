"""The headlines read as what they say, on real recordings: a YES names the share of matrix work that decided it, a
PARTIAL leads with what ran on Tensor Cores and names what did not and what cannot be told apart, a dtype partly
unknown is said as a part of the known one, and a step held back by one cause is not called mostly GPU-bound."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

import nsighttc
from nsighttc.render.markdown.headlines import dtype_words, tc_headline, timeline_headline

FIX = Path(__file__).resolve().parents[1] / "fixtures"
HTA = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "hta"


def _tc(path: Path) -> dict:
    return nsighttc.analyze([path], executor="local").to_json()["tensor_cores"]


def _pcts(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"(\d+)%", text)]


def test_a_yes_names_the_matrix_work_that_decided_it_and_a_partly_unknown_dtype_as_a_part():
    """FSDP2 bf16 on two H200s: ~99% of the matrix work on Tensor Cores, 8-9% of kernel time in Tensor Core kernels
    whose dtype no name tells (before: "YES — 52% of compute kernel time, bf16, dtype unknown")."""
    tc = _tc(FIX / "fsdp" / "even_first" / "rank0" / "torch_trace.json.xz")
    line = tc_headline(tc)
    assert tc["verdict"] == "yes" and "bf16" in tc["by_dtype"] and "unknown" in tc["by_dtype"]
    assert line.startswith(f"Tensor Cores: YES — {round(100 * tc['matrix_on_tc_share'])}% of the matrix work (")
    assert f"({round(100 * tc['tc_time_share'])}% of compute kernel time)" in line  # (NCCL apart)
    unknown = tc["by_dtype"]["unknown"] / sum(tc["by_dtype"].values())
    assert f"bf16 ({round(100 * unknown)}% of it of unknown dtype)" in line
    assert ", dtype unknown" not in line


def test_a_partial_leads_with_what_ran_on_them_and_says_where_the_rest_ran():
    """A Trainer fine-tune in fp32 (H100, kernel names): 7% of its matrix work on Tensor Cores, 93% on CUDA cores
    (before: "PARTIAL — 6% of GPU kernel time (dtype unknown); 93% of matrix work did not use them", read as a NO)."""
    tc = _tc(FIX / "unmarked" / "trainer_torch.json.xz")
    line = tc_headline(tc)
    assert tc["verdict"] == "partial"
    assert line.startswith("Tensor Cores: PARTIAL — 7% of the matrix work ran on them (6% of GPU kernel time")
    assert "93% ran on CUDA cores (fp32)" in line and "did not use them" not in line


@pytest.mark.skipif(not HTA.is_dir(), reason="the shared HTA traces are not beside this checkout")
def test_a_partial_says_unknown_apart_from_cuda_cores_and_the_three_parts_add_up(tmp_path):
    """An A100 DDP trace from another project (HolisticTraceAnalysis' test data): tf32 GEMMs on Tensor Cores, fp32
    ones on CUDA cores, and kernels no rule knows: unknown is never reported as "did not use them". Every kernel of
    the trace is known by now, so cuDNN's own CUTLASS convolutions are given a library name no rule knows (as a
    library nsighttc has not met spells them), their times as recorded."""
    doc = json.load(gzip.open(HTA / "nccl_parser_config" / "nccl_data.json.gz"))
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"].startswith("void cutlass_cudnn_infer::Kernel<"):
            e["name"] = e["name"].replace("cutlass_cudnn_infer::Kernel<cutlass_tensorop_", "acme_private::conv_kernel<")
    path = tmp_path / "renamed.json.gz"
    with gzip.open(path, "wt", compresslevel=1) as fh:
        fh.write(json.dumps(doc))  # (dumps: the C encoder; dump streams through the Python one, 10x slower)
    tc = _tc(path)
    line = tc_headline(tc)
    assert tc["verdict"] == "partial" and tc["matrix_unknown_share"] > 0.05 and tc["matrix_off_tc_share"] > 0.01
    on, off, unknown = re.search(r"(\d+)% of the matrix work ran on them.*?(\d+)% ran on CUDA cores.*?(\d+)% unknown \(",
                                 line).groups()
    assert abs(int(on) + int(off) + int(unknown) - 100) <= 2


def test_dtype_words_say_a_dtype_known_for_none_of_it_as_unknown():
    assert dtype_words({"by_dtype": {"unknown": 0.3}, "evidence": "kernel-name"}) == "dtype unknown"
    assert dtype_words({"by_dtype": {"fp16": 0.6, "bf16": 0.2}, "evidence": "kernel-name"}) == "fp16, bf16"
    assert dtype_words({"by_dtype": {}, "evidence": "none"}) == ""


def test_a_busy_step_held_back_by_one_cause_is_said_to_be_held_back_not_mostly_gpu_bound():
    """The Trainer's window, 77% busy (the GPU-bound mark is 75%) with its data work holding 1.14x: mixed, and the
    headline says why it is not GPU-bound."""
    tl = nsighttc.analyze([FIX / "window" / "trainer_window_torch.json.xz"]).to_json()["timeline"]
    line = timeline_headline(tl)
    assert tl["verdict"] == "mixed" and tl["steps"]["held_back_by"]["busy_verdict"] == "gpu-bound"
    assert "— mixed (the median step is GPU-bound, but one cause holds the steps back: up to 1.14x)" in line
    assert "mostly GPU-bound" not in line and _pcts(line)[0] >= 75
