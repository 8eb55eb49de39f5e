"""Command construction: argument lists, metrics per compute capability, filters."""
import sys

import pytest

from nsighttc import ncu_metrics
from nsighttc.collect import engines


@pytest.mark.parametrize("cc, must, must_not", [
    ("9.0", ["sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum"],
     ["sm__inst_executed_pipe_tensor_op_hmma_v2.sum"]),
    ("8.9", ["sm__inst_executed_pipe_tensor_op_hmma_v2.sum", "sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_active"],
     ["sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__ops_path_tensor_src_fp16.sum"]),
    ("8.0", ["sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum"], ["sm__ops_path_tensor_src_fp8.sum"]),
    ("7.5", ["sm__inst_executed_pipe_tensor_op_hmma.sum"], ["sm__inst_executed_pipe_tc.sum"]),
    ("10.0", ["sm__inst_executed_pipe_tc.sum"], ["sm__inst_executed_pipe_tensor_op_hmma.sum"]),
])
def test_metric_set_per_compute_capability(cc, must, must_not):
    m = ncu_metrics.metrics_for_cc(cc)
    assert m[0] == "gpu__time_duration.sum"
    assert all(x in m for x in must) and not any(x in m for x in must_not)
    assert len(m) == len(set(m))


def test_metrics_we_ask_for_on_hopper_are_ones_the_parser_understands():
    m = ncu_metrics.metrics_for_cc("9.0")
    chosen = ncu_metrics.choose_ops_columns(m)
    assert set(chosen) == {"fp16", "bf16", "fp8", "int8", "fp64", "tf32"}  # every dtype of the H200 truth table


def test_ncu_argv_is_a_list_with_the_sampling_filters(tmp_path):
    inner = engines.launcher_argv(["train.py", "--epochs", "1"])
    argv = engines.ncu_argv("/usr/bin/ncu", tmp_path / "ncu", inner, "9.0", nvtx_range="train")
    assert argv[0] == "/usr/bin/ncu" and all(isinstance(a, str) for a in argv)
    for flag, value in (("--clock-control", "none"), ("--cache-control", "none"), ("--filter-mode", "per-launch-config"),
                        ("--launch-count", "1"), ("--nvtx-include", "train/"), ("-o", str(tmp_path / "ncu"))):
        assert argv[argv.index(flag) + 1] == value
    assert "--nvtx" in argv
    kn = argv[argv.index("--kernel-name") + 1]
    assert kn.startswith("regex:^(?!") and "elementwise" in kn
    assert argv[-len(inner):] == inner
    full = engines.ncu_argv("ncu", tmp_path / "n", inner, "9.0", every_launch=True, all_kernels=True)
    assert "--filter-mode" not in full and "--kernel-name" not in full


def test_kernel_filter_regex_keeps_matrix_kernels_and_drops_settled_families():
    import re
    from nsighttc.analysis.name_rules import ncu_kernel_filter
    rx = re.compile(ncu_kernel_filter()[len("regex:"):])
    for keep in ("nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT", "implicit_convolve_sgemm", "matmul_kernel",
                 "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize32x32x8_stage3_warpsize1x2x1_g1_ffma"):
        assert rx.match(keep), keep
    # (cuDNN's channel padding of a 3-channel first layer: profiled 4 times in each DDP ResNet-50 replay on H200,
    # zero tensor-pipe instructions, reports/profile_overhead/torchrun_cost call 27)
    for drop in ("vectorized_elementwise_kernel", "nchwToNhwcKernel", "max_pool_forward_nchw", "splitKreduce_kernel",
                 "void nhwcAddPaddingKernel<__half, __half, float, true, (cudnnKernelDataType_t)0>(int, int, int, "
                 "int, int, int, int, int, __half const*, __half*, int, int, int, int, float, float, "
                 "cudnn::reduced_divisor, cudnn::reduced_divisor, cudnn::reduced_divisor)"):
        assert not rx.match(drop), drop


def test_nsys_and_launcher_argv(tmp_path):
    inner = engines.launcher_argv(["mypkg.train", "--epochs", "1"], module=True, annotate="modules",
                                  torch_trace=tmp_path / "t.json")
    assert inner[:3] == [sys.executable, "-m", "nsighttc.runtime.launch"]
    assert inner[inner.index("--annotate") + 1] == "modules" and inner[inner.index("-m", 3) + 1] == "mypkg.train"
    assert inner[-3:] == ["--", "--epochs", "1"]
    argv = engines.nsys_argv("nsys", tmp_path / "r", inner, capture_range="step")
    assert argv[:2] == ["nsys", "profile"] and argv[argv.index("-t") + 1] == "cuda,nvtx,osrt"
    assert argv[argv.index("-s") + 1] == "none" and "--cpuctxsw=none" in argv
    assert "--cuda-graph-trace=node" in argv  # graph kernels get names and Tensor Core verdicts
    assert "--nvtx-capture=step" in argv and argv[-len(inner):] == inner


@pytest.mark.parametrize("cc", ["9.0", "8.0", "8.9", "10.0", "7.5", None])
def test_the_one_pass_set_is_instruction_counts_the_parser_reads_without_the_pass_adding_metrics(cc):
    """Pass counts measured on H100 (reports/profile_overhead/ncu_passes.txt): the pipe utilisation and the
    FLOP counters add replay passes; the instruction counts of the full set stay."""
    m = ncu_metrics.one_pass_metrics_for_cc(cc)
    known = {n for names in ncu_metrics.INST_ALIASES.values() for n in names}
    assert m and set(m) <= known
    assert not any("pct_of_peak" in x or x.startswith(("gpu__time", "sm__ops_path")) for x in m)
    if cc == "9.0":  # measured: one pass; gmma beside hmma made it three
        assert m == ["sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum",
                     "sm__inst_executed_pipe_tensor_op_imma.sum", "sm__inst_executed_pipe_tensor_op_dmma.sum"]
    else:
        assert set(m) <= set(ncu_metrics.metrics_for_cc(cc))  # only names known to exist on that chip


def test_ncu_argv_without_nvtx_tracking_unless_a_range_needs_it(tmp_path):
    inner = ["python3", "x.py"]
    assert "--nvtx" not in engines.ncu_argv("ncu", tmp_path / "n", inner, "9.0", nvtx=False)
    ranged = engines.ncu_argv("ncu", tmp_path / "n", inner, "9.0", nvtx=False, nvtx_range="train")
    assert "--nvtx" in ranged and ranged[ranged.index("--nvtx-include") + 1] == "train/"


def test_the_program_starts_before_pandas_is_imported(tmp_path):
    """Everything the default run does before starting the program (its cache record, the timeline's and the
    replay's command lines, ncu's filter) imports no pandas or analysis module: those load while it runs
    (the H100 machine spent 1.0 s from the run directory to the program's start importing them)."""
    import subprocess
    import sys
    code = ("import sys\n"
            "from pathlib import Path\n"
            "from nsighttc.profile import default, replay_pass, Options\n"
            "from nsighttc.collect.evidence_cache import EvidenceCache, program_key\n"
            "c = EvidenceCache('gpu', 'driver', root=Path(sys.argv[1]))\n"
            "c.program(program_key(['x.py']))\n"
            "replay_pass.replay_pass('ncu', Path(sys.argv[1]), '9.0', Options(), Path(sys.argv[1]) / 'gate')\n"
            "heavy = [m for m in ('pandas', 'numpy', 'nsighttc.analysis.name_rules', 'nsighttc.api') if m in sys.modules]\n"
            "print(heavy)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_step_marks_can_be_switched_off(tmp_path):
    from nsighttc.collect.engines import launcher_argv
    from nsighttc.profile import Options, plan, resolve_target
    assert "--step-marks" not in launcher_argv(["t.py"])
    assert launcher_argv(["t.py"], step_marks=False)[3:5] == ["--annotate", "script"] and \
        launcher_argv(["t.py"], step_marks=False)[5:7] == ["--step-marks", "off"]
    script = tmp_path / "t.py"
    script.write_text("pass\n")
    (p,), _ = plan(Options(engine="torch", step_marks=False), resolve_target(str(script), [], None), None, tmp_path)
    assert p.argv[p.argv.index("--step-marks") + 1] == "off"


def test_the_default_timeline_records_operators_only_where_something_reads_them(tmp_path):
    """The replay reads their arguments; without the step hooks, torch.compile's compilation spans are cpu_op events
    (parse.marks): both keep every operator. Otherwise the ranges and GPU work only (runtime.recording)."""
    from nsighttc.profile.passes import Options
    from nsighttc.profile.planning import timeline_pass
    from nsighttc.profile.target import resolve_target
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    target = resolve_target(str(script), [], None)

    def argv(**kw):
        return timeline_pass(Options(timeline_engine="torch", **kw), target, tmp_path).argv
    assert "--no-operators" in argv()
    assert "--no-operators" not in argv(record_shapes=True) and "--record-shapes" in argv(record_shapes=True)
    assert "--no-operators" not in argv(step_marks=False)


def test_a_first_run_with_a_window_records_the_operators_apart_until_the_window(tmp_path):
    """With the replay's arguments and a window of steady steps, the operators are recorded until the window and
    written apart (``--ops-trace``); without a window (``--whole-program``), or from the window on (a second run),
    there is no such trace."""
    from nsighttc.profile.passes import OPS_TRACE_FILE, Options
    from nsighttc.profile.planning import timeline_pass
    from nsighttc.profile.target import resolve_target
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    target = resolve_target(str(script), [], None)
    p = timeline_pass(Options(timeline_engine="torch", record_shapes=True), target, tmp_path)
    assert p.argv[p.argv.index("--ops-trace") + 1] == str(tmp_path / OPS_TRACE_FILE) == str(p.ops_trace)
    assert "--window" in p.argv and "--record-shapes" in p.argv
    for p in (timeline_pass(Options(timeline_engine="torch", record_shapes=True, window=False), target, tmp_path),
              timeline_pass(Options(timeline_engine="torch"), target, tmp_path),
              timeline_pass(Options(timeline_engine="torch"), target, tmp_path, from_window=True)):
        assert "--ops-trace" not in p.argv and p.ops_trace is None
