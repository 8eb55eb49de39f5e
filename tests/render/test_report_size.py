"""Issue 31: the Markdown report fits a pull-request comment (<= 60,000 characters: GitHub refuses 65,536) whatever
the program, GitHub's Markdown (tables, <details>) parses it, and the Tensor Core headline says what is known."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from nsighttc.api import analyze
from nsighttc.render import markdown

FIX = Path(__file__).resolve().parents[1] / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
# the largest recordings: multi-phase (101 KB of report before), the Trainer, multi-rank jobs
LARGE = [[FIX / "multi_phase_torch.json.xz"], [FIX / "h100_multi_phase_torch_shapes.json.xz"],
         [FIX / "multi_phase_torch.json.xz", FIX / "h100_multi_phase_replay_ncu_raw.csv.gz"],
         [FIX / "unmarked" / "trainer_torch.json.xz"], [FIX / "unmarked" / "compile_torch.json.xz"],
         [FIX / "multi_phase_nsys_node.sqlite.xz"], [FIX / "ddp" / "straggler_torch"], [FIX / "ddp" / "straggler_nsys"],
         [FIX / "unmarked" / "ddp_uneven"], [FIX / "window" / "trainer_whole_torch.json.xz"]]


def _gfm() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def _check_renders(text: str) -> None:
    tokens = _gfm().parse(text)
    assert any(t.type == "table_open" for t in tokens)  # the tables are tables, not text
    assert text.count("<details>") == text.count("</details>")


@pytest.fixture(scope="module")
def docs():
    return {str(p[0].relative_to(FIX)) + ("+ncu" if len(p) > 1 else ""): analyze(p, jobs=1).to_json() for p in LARGE}


def test_every_large_verdict_renders_within_a_comment(docs, tmp_path):
    for name, doc in docs.items():
        full = markdown.render(doc, detail="full")
        beside = markdown.write_beside(doc, tmp_path)
        text = markdown.render(doc, beside=beside)
        assert len(text) <= markdown.LIMIT, (name, len(text))
        _check_renders(text)
        # what the summary leaves out is beside it, with every kernel's full name once
        if len(doc["kernels"]) > 15:
            assert "kernels.md" in text
            kernels = (tmp_path / "kernels.md").read_text()
            assert all(kernels.count(f"`{markdown._cell(k['name'])}`") >= 1 for k in doc["kernels"][:50])
            assert 'title="' not in text  # no demangled name repeated in hover attributes
        assert len(full) >= len(text)


def test_the_guard_cuts_a_report_that_would_still_be_too_long(docs):
    """A verdict with hundreds of findings and notes (a real one, its lists repeated) is cut at a line, says so,
    and still parses with its <details> closed."""
    doc = copy.deepcopy(docs["multi_phase_torch.json.xz"])
    doc["findings"] = doc["findings"] * 60
    doc["warnings"] = [w + f" ({i})" for i, w in enumerate(doc["warnings"] * 200)]
    text = markdown.render(doc)
    assert len(text) <= markdown.LIMIT and "cut at 60,000 characters" in text
    _check_renders(text)


def test_every_committed_report_fits():
    """Every report.md kept in reports/, plain or xz-compressed (``report.md.xz``: the larger ones, for a clone's room)."""
    import lzma
    reports = [p for p in (ROOT / "reports").rglob("*") if p.name in ("report.md", "report.md.xz")]
    assert len(reports) > 20

    def text(p):
        return lzma.decompress(p.read_bytes()).decode() if p.suffix == ".xz" else p.read_text()
    too_long = [str(p.relative_to(ROOT)) for p in reports if len(text(p)) > markdown.LIMIT]
    assert not too_long


def test_names_only_headline_states_the_known_part_first(docs, monkeypatch):
    """A Trainer fp32 fine-tune by kernel names alone: the headline used to read "UNKNOWN — 11% ... no signal" while
    most of the matrix work was fp32 GEMMs whose names say they ran on CUDA cores. With the known-kernel table its
    memory-efficient attention kernels are measured ones (Tensor Cores, 3xTF32) and the answer is PARTIAL; without the
    table (names only) the known part comes first, and the JSON's verdict is the headline's word (issue 47). Names
    alone now know those attention kernels too (the ``mem-efficient-attention-fp32`` rule): PARTIAL again; with that
    rule left out as well, they are the unknown part the headline states after the known one."""
    tc = docs["unmarked/trainer_torch.json.xz"]["tensor_cores"]
    assert tc["verdict"] == "partial" and tc["headline"].startswith("Tensor Cores: PARTIAL")
    assert tc["headline"] == markdown.tc_headline(tc)
    from nsighttc.analysis import known_kernels, name_rules
    monkeypatch.setattr(known_kernels, "table", lambda: {"archs": {}})
    doc = analyze([FIX / "unmarked" / "trainer_torch.json.xz"], jobs=1)
    assert doc.to_json()["tensor_cores"]["verdict"] == "partial"
    fmha = doc.kernels[doc.kernels["name"].str.startswith("fmha_cutlass")]
    assert len(fmha) and (fmha["name_rule"].astype(str) == "mem-efficient-attention-fp32").all()
    monkeypatch.setattr(name_rules, "RULES", tuple(r for r in name_rules.RULES
                                                   if r.id != "mem-efficient-attention-fp32"))
    tc = analyze([FIX / "unmarked" / "trainer_torch.json.xz"], jobs=1).to_json()["tensor_cores"]
    line = tc["headline"]
    assert tc["verdict"] == "no"
    assert line.startswith(f"Tensor Cores: NO for {markdown.pct(tc['matrix_off_tc_share'], 0)} of the matrix work")
    assert "fp32 on CUDA cores" in line and "unknown" in line
    assert tc["matrix_off_tc_share"] > 0.8 and tc["off_tc_dtypes"][0] == "fp32"
    assert {u["name"][:12] for u in tc["unknown_kernels"]} >= {"fmha_cutlass"}  # listed, with why
    assert all(u["why"] for u in tc["unknown_kernels"])


def test_ddp_headline_is_over_compute_time_with_nccl_apart(docs):
    """NCCL kernels that mostly wait for the other ranks are not in the Tensor Core share's denominator."""
    tc = docs["ddp/straggler_torch"]["tensor_cores"]
    den = tc["denominator"]
    assert den["kind"] == "compute kernel time" and den["communication_share"] > 0.2
    assert abs(den["compute_time_ns"] + den["communication_time_ns"] - tc["kernel_time_ns"]) < 1e-3 * tc["kernel_time_ns"]
    assert tc["tc_time_share"] == pytest.approx(tc["tc_time_ns"] / den["compute_time_ns"])
    line = markdown.tc_headline(tc)
    assert "of compute kernel time" in line and "; communication " in line and "not counted" in line


def test_analyze_o_writes_the_tables_beside_the_report_and_detail_full_keeps_one_file(run_cli, tmp_path):
    src = FIX / "multi_phase_torch.json.xz"
    out = tmp_path / "pr.md"
    code, _, err = run_cli("analyze", src, "-o", out)
    assert code == 0 and "Traceback" not in err
    text = out.read_text()
    assert len(text) <= markdown.LIMIT and "[pr.kernels.md](pr.kernels.md)" in text
    assert (tmp_path / "pr.kernels.md").read_text().startswith("# All ")
    full = tmp_path / "full.md"
    code, _, _ = run_cli("analyze", src, "--detail", "full", "-o", full)
    assert code == 0 and "<details><summary>All " in full.read_text()
    assert not (tmp_path / "full.kernels.md").exists()
