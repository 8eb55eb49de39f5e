"""The evidence ladder against the hardware truth of the H200 recordings (fixtures/README-h200.md)."""
import re

import pandas as pd
import pytest

from nsighttc.analysis import name_rules
from nsighttc.analysis.tensor_cores import aggregate_kernels, classify_launches, rollup
from nsighttc.parse import load
from tests.conftest import DETAILS, NCU_REP, RAW, VGG_BASIC

# The README's "what the hardware said" table: (NVTX range or None for "any", kernel regex, TC, dtype).
TRUTH = [
    ("mm_fp32", r"cutlass_80_simt_sgemm", False, None),
    ("mm_tf32", r"cutlass_80_simt_sgemm", False, None),
    (None, r"sm90_xmma_gemm_f32f32_tf32f32", True, "tf32"),  # the warm-up of mm_tf32
    ("mm_fp16", r"^nvjet_sm90_hsh", True, "fp16"),
    ("mm_bf16", r"^nvjet_sm90_tst", True, "bf16"),
    ("mm_fp16_odd", r"cutlass_75_tensorop_f16_s1688gemm", True, "fp16"),
    ("mm_fp64", r"sm90_xmma_gemm_f64f64", True, "fp64"),
    ("mm_int8", r"wmma_tensorop_i161616gemm_s8", True, "int8"),
    ("mm_fp8", r"^nvjet_sm90_qqtst", True, "fp8"),
    ("conv_fp32", r"sm80_xmma_fprop_implicit_gemm_f32f32.*_ffma_", False, None),
    ("conv_tf32", r"sm80_xmma_fprop_implicit_gemm_f32f32.*_ffma_", False, None),
    ("conv_fp16_nchw", r"nchwToNhwcKernel|nhwcToNchwKernel", False, None),
    ("conv_fp16_nchw", r"sm90_xmma_fprop_implicit_gemm_f16f16", True, "fp16"),
    ("conv_fp16_nhwc", r"sm90_xmma_fprop_implicit_gemm_f16f16_.*_nhwc_", True, "fp16"),
    ("sdpa_bf16", r"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", True, "bf16"),
    ("vgg16_fp16", r"implicit_convolve_sgemm<__half", False, None),
    ("vgg16_fp16", r"sm90_xmma_fprop_implicit_gemm_f16f16", True, "fp16"),
    ("vgg16_fp16", r"^nvjet_sm90_hsh_.*_splitK_bias_TNT", True, "fp16"),
    ("vgg16_fp32", r"sm80_xmma_fprop_.*_ffma_|internal::kernel<|gemv2T_kernel_val", False, None),
    (None, r"elementwise_kernel|max_pool|adaptive_average_pool|splitKreduce_kernel", False, None),
]


def _truth_rows(launches: pd.DataFrame):
    for rng, pattern, tc, dtype in TRUTH:
        rx = re.compile(pattern)
        sel = launches[launches["name"].map(lambda n: bool(rx.search(n)))]
        if rng is not None:
            sel = sel[sel["nvtx"] == rng]
        yield rng, pattern, tc, dtype, sel


@pytest.fixture(scope="module")
def raw():
    return classify_launches(load(RAW).kernels)


def test_every_truth_row_is_present_in_the_recording(raw):
    for rng, pattern, *_ , sel in _truth_rows(raw):
        assert not sel.empty, (rng, pattern)


def test_raw_counters_match_hardware_truth_per_kernel(raw):
    for rng, pattern, tc, dtype, sel in _truth_rows(raw):
        assert (sel["tensor_core"] == tc).all(), (rng, pattern, sel["tensor_core"].tolist())
        assert (sel["evidence"] == "hardware").all(), (rng, pattern)
        if tc:
            assert (sel["dtype"] == dtype).all(), (rng, pattern, sel["dtype"].tolist())


def test_hfma2_trap_elementwise_kernels_have_hmma_but_are_not_tensor_core(raw):
    ew = raw[raw["name"].str.contains("elementwise_kernel") & (raw["inst_hmma"] > 0)]
    assert not ew.empty, "the recording holds elementwise kernels with HFMA2.MMA moves"
    assert (ew["inst_hmma"] == ew["inst_hfma2"]).all()
    assert (ew["tensor_core"] == False).all()  # noqa: E712


def test_name_traps_are_decided_by_hardware_not_by_name(raw):
    ffma = raw[raw["name"].str.contains("sm80_xmma_fprop.*_ffma_")]
    assert not ffma.empty and (ffma["tensor_core"] == False).all()  # noqa: E712 "xmma" in the name
    nvjet = raw[raw["name"].str.startswith("nvjet_")]
    assert not nvjet.empty and (nvjet["tensor_core"] == True).all()  # noqa: E712 no "tensorop" in the name


def test_flops_equal_the_ops_counters_and_2mnk_for_the_fp16_gemm(raw):
    mm = raw[(raw["nvtx"] == "mm_fp16") & raw["name"].str.startswith("nvjet")]
    assert mm["tc_flop"].iloc[0] == 2 * 2048 ** 3  # 2048^3 fp16 GEMM in the probe


def test_instruction_ladder_without_hfma2_never_contradicts_truth():
    det = classify_launches(load(DETAILS).kernels)  # no ops_path and no hfma2 counters in this file
    for rng, pattern, tc, dtype, sel in _truth_rows(det):
        decided = sel[sel["tensor_core"].notna()]
        assert (decided["tensor_core"] == tc).all(), (rng, pattern)
        if tc:
            assert decided["dtype"].isin([dtype, None]).all(), (rng, pattern, decided["dtype"].tolist())
    # gmma > 0 is hardware proof on its own (wgmma is never a register move)
    sdpa = det[det["name"].str.contains("sdpa")]
    assert (sdpa["evidence"] == "hardware").all() and (sdpa["tensor_core"] == True).all()  # noqa: E712


def test_hmma_without_hfma2_is_not_taken_as_evidence():
    det = classify_launches(load(DETAILS).kernels)
    only_hmma = det[(det["inst_hmma"] > 0) & (det["inst_gmma"] == 0) & (det["inst_imma"] == 0)
                    & (det["inst_dmma"] == 0)]
    assert not only_hmma.empty
    assert (only_hmma["evidence"] != "hardware").all()


def test_names_only_never_confidently_wrong(raw):
    stripped = load(RAW).kernels.copy()
    for c in stripped.columns:
        if c.startswith(("tc_ops_", "inst_")) or c == "tensor_pipe_pct":
            stripped[c] = float("nan")
    names = classify_launches(stripped)
    assert (names["evidence"] != "hardware").all()
    said = names["tensor_core"].notna()
    assert said.any()
    wrong = names[said & (names["tensor_core"] != raw["tensor_core"])]
    assert wrong.empty, wrong["name"].tolist()
    both = said & (raw["tensor_core"] == True)  # noqa: E712
    dt = names.loc[both, "dtype"]
    assert (dt.isna() | (dt == raw.loc[both, "dtype"])).all()


@pytest.mark.parametrize("name", [
    "matmul_kernel",                      # Triton tutorial kernel, named after the user's function
    "triton_tem_fused_mm_0",              # Inductor mm template: fp16 tl.dot -> TC, ieee fp32 -> not
    "my_custom_gemm",
    "void flash::compute_attn_1rowblock<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, float>>",
])
def test_names_without_signal_are_unknown(name):
    tc, dtype, _ = name_rules.match(name)
    assert tc is None and dtype is None


def test_sdpa_name_does_not_claim_a_dtype():
    # the H200 ran a bf16 input through ..._wgmma_f16_...: the name's f16 is not the dtype
    tc, dtype, _ = name_rules.match("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0")
    assert tc is True and dtype is None


def test_rollup_per_range_and_overall(raw):
    overall = rollup(raw)
    assert overall["verdict"] == "partial"  # fp32 GEMMs/convs are in the same recording
    assert overall["evidence"] == "hardware"
    t = raw["time_ns"]
    assert overall["tc_time_share"] == pytest.approx(t[raw["tensor_core"] == True].sum() / t.sum())  # noqa: E712
    assert sum(overall["by_dtype"].values()) == pytest.approx(overall["tc_time_share"])
    fp32 = rollup(raw[raw["nvtx"] == "vgg16_fp32"])
    assert fp32["verdict"] == "no" and fp32["tc_time_share"] == 0
    fp16 = rollup(raw[raw["nvtx"] == "vgg16_fp16"])
    assert fp16["verdict"] == "yes" and set(fp16["by_dtype"]) == {"fp16"}
    assert fp16["flop"] > 0 and fp16["tflops"] > 0


def test_kernel_name_evidence_on_a_basic_section_set():
    k = classify_launches(load(VGG_BASIC).kernels)
    assert (k["evidence"] == "kernel-name").all()
    r = rollup(k)
    assert r["verdict"] == "yes" and r["evidence"] == "kernel-name"
    first = k[k["name"].str.contains("implicit_convolve_sgemm<__half")]
    assert (first["tensor_core"] == False).all()  # noqa: E712


def test_same_name_with_different_verdicts_stays_apart(raw):
    two = raw[raw["nvtx"].isin(["mm_fp16", "mm_fp32"])].copy()
    two["name"] = "matmul_kernel"  # what a Triton kernel specialised for fp16 and fp32 looks like
    agg = aggregate_kernels(two)
    assert len(agg) == 2
    assert sorted(agg["tensor_core"].tolist()) == [False, True]
    assert sorted(agg["variant"].tolist()) == [1, 2]


def test_ncu_rep_report_matches_csv_truth():
    k = classify_launches(load(NCU_REP).kernels)
    by = dict(zip(k["nvtx"], k["tensor_core"]))
    assert by == {"mm_fp16": True, "mm_fp32": False}
    assert (k["evidence"] == "hardware").all()


@pytest.mark.parametrize("recording", ["../../nsighttc/data/h200_loops_nsys.sqlite.xz",
                                       "kineto_trace_cases_loops.json.xz"])
def test_kernel_rows_list_the_ranges_their_launches_ran_in(recording):
    """Per-kernel rows carry the range paths of their launches (they were always empty for timeline inputs:
    a merge on key columns whose dtypes differed under pandas 3)."""
    from tests.conftest import FIXTURES
    launches = classify_launches(load(FIXTURES / recording).kernels)
    rows = aggregate_kernels(launches)
    assert rows["nvtx"].map(len).sum() > 0
    for r in rows.itertuples():
        mine = launches[(launches["name"].astype(str) == r.name).to_numpy()]
        expected = sorted(set(mine["nvtx"].astype(str)) - {""})
        if r.variant == 0:  # one row for the name: every range its launches ran in
            assert r.nvtx == expected, r.name


ONE_PASS_KEPT = ("inst_hmma", "inst_hfma2", "inst_imma", "inst_dmma")


def test_the_one_pass_instruction_set_decides_every_truth_row_like_the_flop_counters(raw):
    """The default run's ncu pass collects only hmma, hfma2, imma, dmma (one replay pass on Hopper): on the
    H200 recording those columns alone give every kernel the FLOP counters' yes/no, and a dtype that is
    the measured one (int8, fp64) or the name's word, never a wrong one."""
    cut = load(RAW).kernels.copy()
    for c in cut.columns:
        if (c.startswith(("tc_ops_", "inst_")) and c not in ONE_PASS_KEPT) or c in ("tensor_pipe_pct", "duration_ns"):
            cut[c] = float("nan")
    one = classify_launches(cut)
    assert (one["evidence"] == "hardware").all()
    assert (one["tensor_core"] == raw["tensor_core"]).all()
    for rng, pattern, tc, dtype, sel in _truth_rows(one):
        if tc:
            assert sel["dtype"].isin([dtype, None]).all(), (rng, pattern, sel["dtype"].tolist())
            measured = dtype in ("int8", "fp64")
            assert (sel["dtype_named"] != measured).all(), (rng, pattern)
            assert (sel["evidence_detail"] == ("tensor instruction counts" if measured else
                                              "tensor instruction counts; dtype from the kernel name")).all()
    assert not one.loc[one["tensor_core"] != True, "dtype_named"].any()  # noqa: E712
    summary = rollup(one)
    assert 0 < summary["dtype_from_names_share"] < 1  # fp64/int8 measured, the rest named
    assert rollup(raw)["dtype_from_names_share"] == 0.0  # FLOP counters name every dtype


def test_h100_one_pass_recording_answers_from_instruction_counts():
    """A real H100 ncu export with only the one-pass set (benchmarks/probes/gpu_ncu_passes_probe2.sh, program
    benchmarks/probes/_tc_dtype_kernels.py: fp16/bf16/TF32 GEMMs, an FFMA GEMM with TF32 off, an fp16 conv)."""
    from nsighttc.render.markdown import tc_headline
    from tests.conftest import H100_ONE_PASS
    k = classify_launches(load(H100_ONE_PASS).kernels)
    by = lambda pat: k[k["name"].str.contains(pat)]  # noqa: E731
    for pat in (r"^nvjet_sm90_hsh", r"^nvjet_sm90_tst", r"sm90_xmma_gemm_f32f32_tf32f32",
                r"sm80_xmma_fprop_implicit_gemm_f16f16"):
        sel = by(pat)
        assert not sel.empty and (sel["tensor_core"] == True).all() and (sel["evidence"] == "hardware").all(), pat  # noqa: E712
    ffma = by(r"sm80_xmma_gemm_f32f32_f32f32_f32")  # "xmma" in the name, FFMA on CUDA cores: hmma == hfma2
    assert not ffma.empty and (ffma["tensor_core"] == False).all() and (ffma["inst_hmma"] > 0).all()  # noqa: E712
    moves = k[k["name"].str.contains("distribution_elementwise|reduce_kernel") & (k["inst_hmma"] > 0)]
    assert not moves.empty and (moves["tensor_core"] == False).all()  # noqa: E712 the HFMA2.MMA trap, on H100
    assert by(r"^nvjet_sm90_hsh")["dtype"].eq("fp16").all()
    summary = rollup(k)
    assert summary["verdict"] in ("yes", "partial") and summary["dtype_from_names_share"] > 0.5
    assert "from kernel names" in tc_headline({**summary, "tc_time_share": summary["tc_time_share"]})


@pytest.mark.parametrize("fixture", ["NSYS_SQLITE_GZ", "KINETO", "MULTI_TORCH"])
def test_per_name_classification_of_timelines_equals_the_per_launch_ladder(fixture):
    """Timeline sources carry no counters: the per-name shortcut (used above 10,000 launches) must give every
    launch exactly what the per-launch ladder gives."""
    import tests.conftest as c
    from nsighttc.analysis.tensor_cores import _PER_NAME, _classify_per_name, _classify_rows
    k = load(getattr(c, fixture)).kernels
    a, b = _classify_rows(k), _classify_per_name(k)
    assert len(k) > 100
    for col in _PER_NAME + ["tc_flop", "time_ns"]:
        left = a[col].astype(object).where(a[col].notna(), None).tolist()
        right = b[col].astype(object).where(b[col].notna(), None).tolist()
        assert left == right, col


def test_the_report_marks_dtypes_that_are_the_names_word():
    import nsighttc
    from nsighttc.render.markdown import render
    from tests.conftest import H100_ONE_PASS
    one = render(nsighttc.analyze([H100_ONE_PASS]).to_json())
    assert "fp16 (by name)" in one and "(dtype from kernel names)" in one
    full = render(nsighttc.analyze([RAW]).to_json())  # FLOP counters: the dtypes are measured
    assert "(by name)" not in full and "from kernel names" not in full
