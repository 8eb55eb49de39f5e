"""A report says each number once, however many places print it: the headline, the summary table, the phase table,
the findings and the ranks section read back from the rendered Markdown agree, on real recordings of ours and of
other projects. (Seen before: "GPU busy 18% (compute 19%)", the headline's communication 85% against the ranks
section's 81.1%, an fp32 finding's 23.4% against the headline's 56%.)"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from nsighttc.api import analyze
from nsighttc.render import markdown

FIX = Path(__file__).resolve().parents[1] / "fixtures"
HTA = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "hta"
RECORDINGS = [FIX / "unmarked" / "trainer_torch.json.xz", FIX / "multi_phase_nsys_node.sqlite.xz",
              FIX / "window" / "trainer_window_torch.json.xz", FIX / "ddp" / "straggler_torch",
              FIX / "kineto_trace_cases_loops.json.xz"]
FOREIGN = [HTA / "nccl_parser_config" / "nccl_data.json.gz", HTA / "trace_filter",
           HTA / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
           HTA / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"]


def _pcts(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", text)]


def _row(report: str, label: str) -> str:
    line = next((ln for ln in report.splitlines() if ln.startswith(f"| {label} |")), "")
    return line.split("|")[2] if line else ""


def _agree(a: float, b: float, places: int = 0) -> bool:
    """A number said rounded to ``places`` and again with one more decimal: the same number."""
    return abs(a - b) <= 0.5 * 10 ** -places + 0.051


def check(report: str, doc: dict) -> None:
    tc = doc["tensor_cores"]
    head = next(ln for ln in report.splitlines() if ln.startswith("**Tensor Cores:"))
    on_row, matrix_row = _row(report, "On Tensor Cores"), _row(report, "Matrix work on Tensor Cores")
    if tc["verdict"] in ("yes", "partial"):
        m = re.search(r"(\d+)% of the matrix work (?:ran on them )?\((\d+)% of (?:GPU|compute) kernel time", head)
        assert m, head
        assert _agree(float(m.group(1)), _pcts(matrix_row)[0]), (head, matrix_row)
        assert _agree(float(m.group(2)), _pcts(on_row)[0]), (head, on_row)
    if tc["verdict"] == "no" and "the matrix work (" in head:
        share = float(re.search(r"the matrix work \((\d+)%", head).group(1))
        assert _agree(share, _pcts(matrix_row)[1]), (head, matrix_row)
        fp32 = next((f for f in doc["findings"] if f["id"] == "fp32-matmul-on-cuda-cores"), None)
        if fp32 is not None and tc.get("off_tc_dtypes") == ["fp32"]:  # every matrix kernel there says fp32
            assert _agree(share, _pcts(fp32["evidence"])[0]), (head, fp32["evidence"])
    tl = doc.get("timeline")
    if tl and tl.get("steps", {}).get("count"):
        line = next(ln for ln in report.splitlines() if ln.startswith("**GPU busy"))
        busy = _pcts(line)[0]
        steps_row = _row(report, "Steps")
        assert _agree(busy, float(re.search(r"GPU busy (\d+(?:\.\d+)?)% of the steady steps", steps_row).group(1))), \
            (line, steps_row)
        if "(compute " in line:  # the compute share is of the same steady steps: never more than all the GPU's work
            assert _pcts(line)[1] <= busy + 0.5, line
    comm = re.search(r"; communication (\d+)% of kernel time", head)
    if comm and doc.get("ranks"):
        ranks = re.search(r"Communication kernels \(NCCL and other collectives\) are (\d+)%", report)
        assert ranks and ranks.group(1) == comm.group(1), (head, ranks and ranks.group(0))


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_every_number_a_report_says_twice_is_the_same_on_our_recordings(path):
    doc = analyze([path]).to_json()
    check(markdown.render(doc, detail="full"), doc)


@pytest.mark.skipif(not HTA.is_dir(), reason="the shared HTA traces are not beside this checkout")
@pytest.mark.parametrize("path", FOREIGN, ids=lambda p: p.name)
def test_every_number_a_report_says_twice_is_the_same_on_other_projects_traces(path):
    doc = analyze([path]).to_json()
    check(markdown.render(doc, detail="full"), doc)


def test_the_check_catches_a_headline_that_disagrees_with_its_table():
    doc = analyze([FIX / "kineto_trace_cases_loops.json.xz"]).to_json()
    report = markdown.render(doc, detail="full")
    share = re.search(r"(\d+)% of the matrix work", report).group(1)
    wrong = report.replace(f"{share}% of the matrix work", f"{int(share) - 9}% of the matrix work", 1)
    with pytest.raises(AssertionError):
        check(wrong, doc)
