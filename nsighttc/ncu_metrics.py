"""Which ncu metrics mean what, per GPU architecture.

Two users: the parser maps whatever metric columns an export has onto the kernel table's normalised
columns (``tc_ops_<dtype>``, ``inst_<kind>``, ``tensor_pipe_pct``), and the ncu engine picks the smallest
set that decides the Tensor Core question on the chip at hand (ncu refuses a whole run that names a
metric the chip lacks, so the set must be right per architecture).

Facts and where they were seen:
- Hopper (gh100, CC 9.0), measured on an H200 with ncu 2025.3.1 (shared/fixtures/h200): generic
  ``sm__ops_path_tensor_src_{fp16,bf16_dst_fp32,fp8,int8,fp64}`` exist; TF32 only as per-op forms
  ``sm__ops_path_tensor_op_{hmma,hgmma}_src_tf32_dst_fp32``. A 2048^3 fp16 GEMM reads 2*M*N*K exactly.
- ``sm__inst_executed_pipe_tensor_op_hmma`` counts HFMA2.MMA register moves in elementwise kernels;
  ``..._hmma_type_hfma2`` counts exactly those (H200: hmma == hfma2 in every non-tensor kernel).
  On Hopper warpgroup MMA (``_op_gmma``) is also counted inside hmma.
- Ada (8.9) uses ``_v2`` forms; Blackwell (10.x/12.x) ``tensor_subpipe`` and ``tc`` (tcgen05) forms:
  from Nsight Compute's ComputeWorkloadAnalysis section file, not measured by us.
- Replay passes per profiled kernel (H100, ncu 2025.3.1, driver 580.159.04;
  benchmarks/probes/gpu_ncu_passes_probe.sh and _probe2.sh, reports/profile_overhead/ncu_passes.txt): one pass for
  ``gpu__time_duration``, for the pipe utilisation alone, and for {hmma, hmma_type_hfma2, imma, dmma};
  3 passes for ``sm__ops_path_tensor_src_fp16`` alone, 4 with bf16, 7 for the seven ops counters, 3 as soon
  as the pipe utilisation joins instruction counts, 3 with ``_op_gmma`` beside hmma. One pass needs no
  save/restore of device memory between passes: on ResNet-50 AMP 94 profiles cost 0.087 s each with the
  one-pass set against 0.25 s with the seven-pass FLOP set.
- {hmma - hfma2, imma, dmma} decides exactly what the FLOP counters decide: on 404 H200 kernels
  (shared/fixtures/h200) ``(hmma - hfma2) + imma + dmma > 0`` iff some ``sm__ops_path_tensor_*`` > 0, and
  ``sm__inst_executed_pipe_tensor`` == hmma + imma + dmma (gmma is inside hmma).
"""
from __future__ import annotations

import re

# --- ops path (FLOP) counters -------------------------------------------------------------------
_OPS = re.compile(
    r"^sm__ops_path_tensor_(?:op_(?P<op>[a-z0-9]+)_)?src_(?P<src>[a-z0-9]+?)"
    r"(?:_dst_(?P<dst>[a-z0-9]+?))?(?:_sparsity_(?P<sparsity>on|off))?\.sum$"
)
# ncu source-type token -> our dtype name
_SRC_DTYPE = {"fp16": "fp16", "f16": "fp16", "bf16": "bf16", "tf32": "tf32", "fp8": "fp8", "fp6": "fp6",
              "fp4": "fp4", "int8": "int8", "s8": "int8", "int4": "int4", "int1": "int1", "b1": "int1",
              "fp64": "fp64", "f64": "fp64"}


def parse_ops_metric(name: str) -> dict | None:
    """``sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum`` -> {op, dtype, dst, sparsity}; else None."""
    m = _OPS.match(name)
    if not m or m["src"] not in _SRC_DTYPE:
        return None
    return {"op": m["op"], "dtype": _SRC_DTYPE[m["src"]], "dst": m["dst"], "sparsity": m["sparsity"]}


def choose_ops_columns(names: list[str]) -> dict[str, list[str]]:
    """Per dtype, the ops columns to add up without double counting.

    ncu offers the same FLOPs at several granularities (generic ``src_fp16``, per destination type,
    per op, per sparsity). For each dtype we keep the coarsest granularity present: its columns
    partition the work, so their sum is the FLOP count; mixing granularities would count twice.
    """
    by_dtype: dict[str, dict[frozenset, list[str]]] = {}
    for n in names:
        info = parse_ops_metric(n)
        if info is None:
            continue
        quals = frozenset(k for k in ("op", "dst", "sparsity") if info[k])
        by_dtype.setdefault(info["dtype"], {}).setdefault(quals, []).append(n)
    order = [frozenset(), frozenset({"dst"}), frozenset({"sparsity"}), frozenset({"op"}),
             frozenset({"dst", "sparsity"}), frozenset({"op", "dst"}), frozenset({"op", "sparsity"}),
             frozenset({"op", "dst", "sparsity"})]
    chosen = {}
    for dtype, groups in by_dtype.items():
        key = next(q for q in order if q in groups)
        chosen[dtype] = sorted(groups[key])
    return chosen


# --- instruction counters -----------------------------------------------------------------------
# normalised kind -> ncu names, first present wins (Hopper/Ampere/Turing, Ada _v2, Blackwell subpipe).
INST_ALIASES: dict[str, tuple[str, ...]] = {
    "hmma": ("sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_hmma_v2.sum",
             "sm__inst_executed_pipe_tensor_subpipe_hmma.sum"),
    "hfma2": ("sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum",
              "sm__inst_executed_pipe_tensor_op_hmma_type_hfma2_v2.sum"),
    "imma": ("sm__inst_executed_pipe_tensor_op_imma.sum", "sm__inst_executed_pipe_tensor_op_imma_v2.sum",
             "sm__inst_executed_pipe_tensor_subpipe_imma.sum"),
    "dmma": ("sm__inst_executed_pipe_tensor_op_dmma.sum", "sm__inst_executed_pipe_tensor_op_dmma_v2.sum",
             "sm__inst_executed_pipe_tensor_subpipe_dmma.sum"),
    "gmma": ("sm__inst_executed_pipe_tensor_op_gmma.sum",),
    "tc": ("sm__inst_executed_pipe_tc.sum",),  # Blackwell tcgen05: never a register-move idiom
}
PIPE_PCT_ALIASES = (
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_subpipe_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active",
)
DURATION_ALIASES = ("gpu__time_duration.sum", "gpu__time_duration.avg", "Duration")

# Section-page display names (``--page details`` of the default set) -> raw names.
DISPLAY_NAMES = {"Duration": "gpu__time_duration.sum"}


# --- what the ncu engine asks for, per architecture ---------------------------------------------
def one_pass_metrics_for_cc(cc: str | float | None) -> list[str]:
    """The default run's hardware pass: instruction counts that decide yes/no (and int8/fp64) in one replay
    pass on Hopper (measured, see the module docstring), without FLOPs per dtype, the pipe utilisation or
    ncu's duration (the timeline has the real run's). On other chips: the same counters where they exist,
    minus what is known to add passes (utilisation, duration); their pass counts are not measured by us."""
    if _major(cc) == 9:
        return ["sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum",
                "sm__inst_executed_pipe_tensor_op_imma.sum", "sm__inst_executed_pipe_tensor_op_dmma.sum"]
    return [m for m in metrics_for_cc(cc) if m.startswith("sm__inst_executed")]


def _major(cc) -> int:
    try:
        return int(str(cc).split(".")[0])
    except (TypeError, ValueError):
        return 0


def metrics_for_cc(cc: str | float | None) -> list[str]:
    """The minimal metric list that decides the Tensor Core question on a chip of compute capability cc.

    Only names known to exist on that architecture: a single unknown name makes ncu refuse the run.
    """
    try:
        major, minor = (int(x) for x in str(cc).split(".")[:2])
    except (TypeError, ValueError):
        major, minor = 0, 0
    base = ["gpu__time_duration.sum"]
    if major == 9:  # Hopper, measured on H200 (ncu 2025.3.1)
        return base + [
            "sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
            "sm__ops_path_tensor_src_fp8.sum", "sm__ops_path_tensor_src_int8.sum",
            "sm__ops_path_tensor_src_fp64.sum",
            "sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum",
            "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum",
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        ]
    if major == 8 and minor == 9:  # Ada: _v2 names (ComputeWorkloadAnalysis section file)
        return base + [
            "sm__inst_executed_pipe_tensor_op_hmma_v2.sum", "sm__inst_executed_pipe_tensor_op_imma_v2.sum",
            "sm__inst_executed_pipe_tensor_op_dmma_v2.sum",
            "sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_active",
        ]
    if major >= 10:  # Blackwell (section file): tcgen05 + legacy subpipes
        return base + [
            "sm__inst_executed_pipe_tc.sum", "sm__inst_executed_pipe_tensor_subpipe_hmma.sum",
            "sm__inst_executed_pipe_tensor_subpipe_imma.sum", "sm__inst_executed_pipe_tensor_subpipe_dmma.sum",
            "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active",
        ]
    # Turing / Ampere (7.5, 8.0, 8.6, 8.7) and unknown: the classic instruction counters.
    return base + [
        "sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum",
        "sm__inst_executed_pipe_tensor_op_imma.sum", "sm__inst_executed_pipe_tensor_op_dmma.sum",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    ]
