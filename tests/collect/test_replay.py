"""The replay pass (nsighttc/runtime/replay.py, profile/replay_pass.py, parse/kineto_ops.py) on what it recorded on
an H100: multi_phase's timeline with operator arguments, the operator list, ncu's page of the replay."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from nsighttc.collect import engines
from nsighttc.collect.hardware_pass import needs_hardware
from nsighttc.analysis.tensor_cores import classify_launches
from nsighttc.parse import kineto_ops
from nsighttc.profile import Options, evidence, replay_pass, replay_plan, trace_reader
from tests.conftest import (KINETO, MULTI_REPLAY_NCU, MULTI_REPLAY_OPS, MULTI_SHAPES, MULTI_TORCH, RESNET_REPLAY_NCU,
                            RESNET_REPLAY_OPS, RESNET_REPLAY_WARM_NCU, fixture_bytes)


@pytest.fixture(scope="module")
def planned():
    parsed: dict = {}
    need = evidence.planned_needs([MULTI_SHAPES], parsed)
    return need, parsed[MULTI_SHAPES]


def _key(call: dict) -> str:
    return json.dumps(call, sort_keys=True)


# Kernels of the multi-phase trace that need hardware evidence: the 19 the H100 run's replay measured, less cuBLAS's
# scal_kernel, whose parameter type (cublasTransposeParams) had made it "matrix work" until names were judged by their
# function (issue 52: a BLAS-1 kernel, measured with no tensor math on H100, rule blas-level1).
NEEDED = 18


def _recorded_ops_needed() -> list[dict]:
    """The H100 run's operator list, less the calls of kernels no longer needing evidence."""
    out = []
    for c in json.loads(MULTI_REPLAY_OPS.read_text()):
        kernels = [k for k in c["kernels"] if not k.startswith("void scal_kernel")]
        if kernels:
            out.append({**c, "kernels": kernels})
    return out


def test_every_kernel_needing_evidence_has_its_operator(planned, tmp_path):
    need, _ = planned
    names = list(dict.fromkeys(need["name"]))
    assert len(names) == NEEDED and not [n for n in names if "scal_kernel" in n]
    found = replay_plan.write_ops(tmp_path / "ops.json", need.attrs["first"], names)
    assert found["kernels_with_operator"] == len(names) and found["kernels_without_operator"] == 0
    written = json.loads((tmp_path / "ops.json").read_text())
    # the list the H100 run wrote from the same trace (and replayed: every kernel measured)
    assert sorted(map(_key, written)) == sorted(map(_key, _recorded_ops_needed()))
    assert {c["name"] for c in written} == {"aten::mm", "aten::addmm", "aten::cudnn_convolution",
                                            "aten::convolution_backward"}
    for c in written:
        assert len(c["types"]) == len(c["dims"]) == len(c["strides"]) == len(c["concrete"])


def test_launches_map_to_the_innermost_operator(planned):
    _, parsed = planned
    k = parsed.kernels
    first = k.sort_values("start_ns").drop_duplicates("name")
    ops = kineto_ops.launching_ops(MULTI_SHAPES, first["launch_id"].dropna().astype(int))
    names = first.set_index(first["launch_id"].astype("Int64"))["name"].astype(str)
    for corr, call in ops.items():
        kernel = names[corr]
        if "softmax_warp_forward" in kernel:
            assert call.name == "aten::_log_softmax"
        if kernel.startswith("nvjet_"):  # cuBLAS GEMMs come from matmul operators
            assert call.name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
    assert len(ops) == len(first)  # every kernel's first launch was eager, inside an operator
    # multi_phase replays a CUDA graph: its kernels' later launches have no operator around them
    graph = k[k["name"].astype(str).str.contains("coopA_bias")]
    assert len(graph) > 100
    assert kineto_ops.launching_ops(MULTI_SHAPES, [int(graph["launch_id"].max())]) == {}


def test_a_trace_without_record_shapes_gives_no_operators():
    from nsighttc.parse import kineto
    k = kineto.read(MULTI_TORCH).kernels
    assert kineto_ops.launching_ops(MULTI_TORCH, k["launch_id"].dropna().astype(int).head(200)) == {}


def test_replayed_calls_rebuild_on_meta_tensors():
    torch = pytest.importorskip("torch")
    from nsighttc.runtime import replay_args
    for fixture in (MULTI_REPLAY_OPS, RESNET_REPLAY_OPS):
        calls = json.loads(fixture.read_text())
        for call in calls:
            args = replay_args.rebuild(torch, call, torch.device("meta"))
            for a, t, d, s in zip(args, call["types"], call["dims"], call["strides"]):
                if t in replay_args.DTYPE_NAMES:
                    assert list(a.shape) == d and (not s or list(a.stride()) == s)
                    assert str(a.dtype) == "torch." + replay_args.DTYPE_NAMES[t]
            if call["name"] in ("aten::mm", "aten::addmm", "aten::bmm", "aten::convolution_backward"):
                assert replay_args.call_op(torch, call, torch.device("meta")) in ("default",)


def test_recorded_values_and_scalar_types():
    torch = pytest.importorskip("torch")
    from nsighttc.runtime import replay_args
    assert replay_args._concrete("[2, 2]") == [2, 2] and replay_args._concrete("0.") == 0.0
    assert replay_args._concrete("True") is True and replay_args._concrete("") is None
    with pytest.raises(replay_args.CannotRebuild):
        replay_args.rebuild(torch, {"name": "aten::cat", "types": ["TensorList"], "dims": [[[2], [2]]], "strides": [[]],
                               "concrete": [""]}, torch.device("meta"))
    # aten::_to_copy records dtype=float16 as "5" (torch 2.13 trace): the enum becomes the dtype again
    call = {"name": "aten::_to_copy", "types": ["float", "Scalar", "", "", "", "Scalar", ""], "dims": [[2], [], [], [], [], [], []],
            "strides": [[1], [], [], [], [], [], []], "concrete": ["", "5", "", "", "", "False", ""]}
    assert replay_args.call_op(torch, call, torch.device("meta")) == "default"
    # an overlapping view (stride 0) gets storage of the right size
    t = replay_args.make_tensor(torch, "c10::Half", [4, 3], [0, 1], torch.device("cpu"))
    assert t.shape == (4, 3) and t.stride() == (0, 1) and t.untyped_storage().nbytes() == 3 * 2


def test_the_replay_measured_every_kernel_it_was_asked_for():
    """ncu's raw page of the H100 replay gives hardware evidence to all 19 kernels of the operator list."""
    names = [k for c in json.loads(MULTI_REPLAY_OPS.read_text()) for k in c["kernels"]]
    keys = replay_pass.measured_keys([MULTI_REPLAY_NCU])
    assert replay_pass.still_missing(names, keys) == []
    assert replay_pass.still_missing(names + ["void never_replayed_kernel<int>(int)"], keys) == \
        ["void never_replayed_kernel<int>(int)"]


def test_resnet_replay_left_exactly_the_kernels_it_did_not_launch():
    """ResNet-50 AMP on H100: cuDNN ran cutlass `..._nn_align2` kernels for two 1x1 convolutions in the
    program but others when the same calls were replayed; those two are left for the program's ncu pass."""
    names = [k for c in json.loads(RESNET_REPLAY_OPS.read_text()) for k in c["kernels"]]
    rest = replay_pass.still_missing(names, replay_pass.measured_keys([RESNET_REPLAY_NCU]))
    assert len(rest) == 3
    assert sum("nn_align2" in n for n in rest) == 2 and sum("init_device_workspace_kernel" in n for n in rest) == 1


def test_settled_families_are_never_waited_for():
    """cuDNN's init_device_workspace_kernel<...implicit_gemm...> looks like matrix work by its template
    arguments; ncu's filter leaves it out, so the plan must not wait for it. CUTLASS GEMMs stay."""
    from nsighttc.model import conform
    names = [k for c in json.loads(RESNET_REPLAY_OPS.read_text()) for k in c["kernels"]]  # the timeline's names
    launches = classify_launches(conform(pd.DataFrame({"name": pd.array(names, dtype="string")})))
    # judged by its function name, it is no matrix work at all (it was by its template arguments until issue 52)
    assert not launches["matrix_work"][[("init_device_workspace_kernel" in n) for n in names]].any()
    need = needs_hardware(launches)
    settled = "init_device_workspace_kernel|bn_fw_|bn_bw_|reduce_wgrad_nchw_helper|amp_update_scale_cuda_kernel"
    assert not need["name"].str.contains(settled).any()
    assert need["name"].str.contains("cutlass").any() and need["name"].str.contains("xmma").any()
    # measured on H100 with no tensor math, so settled by name now: the workspace kernel, the wgrad reduce
    # helper and GradScaler's update (the batch-norm kernels were settled before this list was recorded)
    assert len(need) == len(names) - sum(bool(__import__("re").search(settled, n)) for n in names) == len(names) - 3


def test_replay_pass_command(tmp_path):
    opts = Options()
    p = replay_pass.replay_pass("/opt/ncu", tmp_path, "9.0", opts, tmp_path / ".replay-gate")
    argv = p.argv
    assert argv[0] == "/opt/ncu" and p.stem == "ncu_replay" and p.mode == "replay"
    assert argv[argv.index("--nvtx-include") + 1] == "nsighttc-replay/" and "--nvtx" in argv
    # and the warm-up's range (its one profile pays ncu's set-up before the gate): ncu ORs the includes
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--nvtx-include"] == ["nsighttc-replay/", "nsighttc-warm/"]
    inner = argv[argv.index("-m"):]
    assert inner[:2] == ["-m", "nsighttc.runtime.replay"]
    assert inner[inner.index("--gate-at") + 1] == "warm" and inner[inner.index("--wait-for") + 1].endswith(".replay-gate")
    assert argv[argv.index("-o") + 1] == str(tmp_path / "ncu_replay")
    assert "--filter-mode" not in argv  # every launch in the range: per-config would merge Kernel2<...> instances


def test_the_timeline_records_shapes_only_when_asked():
    on = engines.launcher_argv(["train.py"], torch_trace=Path("t.json"), record_shapes=True)
    off = engines.launcher_argv(["train.py"], torch_trace=Path("t.json"))
    assert "--record-shapes" in on and "--record-shapes" not in off
    assert "--record-shapes" not in engines.launcher_argv(["train.py"], record_shapes=True)  # no trace, no shapes
    from nsighttc.runtime import launch
    assert launch._parse(["--torch-trace", "t.json", "--record-shapes", "--", "x.py"]).record_shapes


# --- the early plan: the launcher's kernel list (nsighttc/runtime/kernel_ops.py) starts the replay before the trace ---

def _early_list(parsed) -> list[dict]:
    """The kernel list the launcher writes (one entry per distinct kernel: its first launch's operator call,
    total time), made from the H100 multi_phase trace the list stands in for."""
    k = parsed.kernels.assign(name=parsed.kernels["name"].astype(str))
    first = k.sort_values("start_ns", kind="stable").drop_duplicates("name")
    ops = kineto_ops.launching_ops(MULTI_SHAPES, first["launch_id"].dropna().astype(int))
    total = k.groupby("name")["duration_ns"].sum()
    count = k.groupby("name").size()
    out = []
    for name, corr, start, dev in zip(first["name"], first["launch_id"], first["start_ns"], first["device"]):
        call = ops.get(int(corr)) if pd.notna(corr) else None
        out.append({"name": name, "device": int(dev) if pd.notna(dev) else 0, "first_ns": int(start),
                    "launches": int(count[name]), "time_ns": int(total[name]),
                    "op": call.to_json() if call is not None else None})
    return out


def test_the_early_list_needs_the_same_kernels_as_the_trace(planned):
    need, parsed = planned
    early = replay_plan.early_needs(_early_list(parsed))
    assert set(early["name"]) == set(need["name"]) and len(set(early["name"])) == NEEDED


def test_the_early_plan_writes_the_trace_plans_operator_list_and_opens_the_gate(planned, tmp_path):
    _, parsed = planned
    listing = tmp_path / "kernel_ops.json"
    ops, gate = tmp_path / "replay_ops.json", tmp_path / ".replay-gate"
    early = replay_plan.EarlyPlan(listing, ops, gate, lambda need: list(dict.fromkeys(need["name"]))).start()
    tmp = tmp_path / "kernel_ops.json.tmp"  # written whole, then renamed, as the launcher does (the thread polls)
    tmp.write_text(json.dumps({"version": 1, "kernels": _early_list(parsed)}))
    tmp.replace(listing)
    found = early.finish()  # the list exists before the wait stops: the plan is made
    assert early.error is None and found is not None
    assert found["calls"] == 18 and found["kernels_with_operator"] == NEEDED and found["kernels_without_operator"] == 0
    assert gate.read_text() == "go"
    def calls(doc):
        return sorted(_key({**c, "kernels": sorted(c["kernels"])}) for c in doc)
    assert calls(json.loads(ops.read_text())) == calls(_recorded_ops_needed())


@pytest.mark.parametrize("trace", [MULTI_SHAPES, MULTI_TORCH, KINETO], ids=["h100-shapes", "h200-multi", "h200-loops"])
def test_the_kernel_event_scan_finds_what_the_full_parse_finds(trace):
    """The replay is planned from the kernel events alone while the whole trace is parsed: for every real
    trace, the same distinct kernels with the same first launch, launch count, total time and device."""
    from nsighttc.parse import load
    scanned = {k["name"]: k for k in kineto_ops.kernel_launches(trace)}
    k = load(trace).kernels
    k = k.assign(name=k["name"].astype(str))
    g = k.sort_values("start_ns", kind="stable").groupby("name", sort=False)
    first, count, total = g["start_ns"].first(), g.size(), g["duration_ns"].sum()
    assert set(scanned) == set(first.index) and len(scanned) > 10
    for name, e in scanned.items():
        assert e["launches"] == count[name]
        assert e["first_ns"] == pytest.approx(first[name], abs=1.0)
        assert e["time_ns"] == pytest.approx(total[name], rel=1e-6, abs=count[name] * 1.0)


def test_the_replay_planned_from_kernel_events_is_the_one_planned_from_the_parsed_trace(tmp_path):
    ops, gate = tmp_path / "replay_ops.json", tmp_path / ".replay-gate"
    found = replay_plan.start_from_trace(MULTI_SHAPES, ops, gate, lambda need: list(dict.fromkeys(need["name"])))
    assert found["calls"] == 18 and found["kernels_with_operator"] == NEEDED and found["kernels_without_operator"] == 0
    assert gate.read_text() == "go"

    def calls(doc):
        return sorted(_key({**c, "kernels": sorted(c["kernels"])}) for c in doc)
    assert calls(json.loads(ops.read_text())) == calls(_recorded_ops_needed())
    # kernels the cache already knows are left out: none to replay, the list is empty and the gate still opens
    found = replay_plan.start_from_trace(MULTI_SHAPES, ops, gate, lambda need: [])
    assert found["calls"] == 0 and json.loads(ops.read_text()) == []


def test_the_early_plan_without_a_list_or_with_a_broken_one_leaves_the_gate_shut(tmp_path):
    ops, gate = tmp_path / "replay_ops.json", tmp_path / ".replay-gate"
    none = replay_plan.EarlyPlan(tmp_path / "kernel_ops.json", ops, gate, lambda need: []).start()
    assert none.finish() is None and none.error is None
    (tmp_path / "kernel_ops.json").write_text('{"version": 1, "kernels": [')
    broken = replay_plan.EarlyPlan(tmp_path / "kernel_ops.json", ops, gate, lambda need: []).start()
    assert broken.finish() is None and "kernel_ops.json" in broken.error
    assert not gate.exists() and not ops.exists()


def test_the_launchers_operator_calls_read_like_the_traces():
    """kernel_ops reads the profiler's events in memory; the replay reads the trace's fields. On real
    torch.profiler output (CPU operators here), every operator call gives the same name, argument types,
    shapes and strides, and the same values once read back."""
    torch = pytest.importorskip("torch")
    from torch.autograd import DeviceType
    from nsighttc.runtime import kernel_ops
    from nsighttc.runtime.replay_args import _concrete
    a, b = torch.randn(64, 32), torch.randn(16, 32).t()
    x, w = torch.randn(2, 3, 16, 16), torch.randn(4, 3, 3, 3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.mm(a, b)
        torch.addmm(torch.randn(16), a, b, beta=0.5, alpha=2.0)
        torch.nn.functional.conv2d(x, w, stride=2, padding=1)
        torch.sum(a, dim=[0], dtype=torch.float64)
        torch.cat([a, a], dim=1)
    mine = {e.correlation_id(): kernel_ops._call(e) for e in prof.profiler.kineto_results.events()
            if e.device_type() == DeviceType.CPU and e.linked_correlation_id() == 0}
    trace = Path(__import__("tempfile").mkdtemp()) / "trace.json"
    prof.export_chrome_trace(str(trace))
    compared = 0
    for ev in json.loads(trace.read_text())["traceEvents"]:
        if ev.get("cat") != "cpu_op":
            continue
        args, call = ev["args"], mine[ev["args"]["External id"]]
        assert call["name"] == ev["name"]
        assert call["types"] == args["Input type"] and call["dims"] == args["Input Dims"]
        assert call["strides"] == args["Input Strides"]
        assert [_concrete(c) for c in call["concrete"]] == [_concrete(c) for c in args["Concrete Inputs"]]
        compared += 1
    assert compared >= 10
    # a CPU-only profile launched no kernels: the list is empty, not an error
    assert kernel_ops.collect(prof.profiler.kineto_results.events(), DeviceType.CUDA, DeviceType.CPU) == []


def _write_slowly(data: bytes, first: Path, final: Path | None, done: threading.Event, chunk: int = 1 << 20) -> None:
    """Kineto's way: the trace grows in ``first`` (``<file>.tmp``), is renamed to ``final``, then the launcher
    says it is written (``done``)."""
    with first.open("wb") as fh:
        for i in range(0, len(data), chunk):
            fh.write(data[i:i + chunk])
            fh.flush()
            time.sleep(0.002)
    if final is not None:
        os.replace(first, final)
    done.set()


def _while_written(tmp_path, monkeypatch, temp: bool, start):
    """``start(trace, written)`` (a reader's thread) over the H100 multi_phase trace written as Kineto writes
    it, in 1 MB pieces, with small parse blocks and scan windows: events cut at every read."""
    from nsighttc.parse import kineto_scan
    data = fixture_bytes(MULTI_SHAPES)
    monkeypatch.setattr(kineto_scan, "BLOCK", 1 << 20)
    monkeypatch.setattr(kineto_ops, "BLOCK", 1 << 20)
    monkeypatch.setattr(kineto_ops, "OVERLAP", 1 << 16)
    monkeypatch.setattr(kineto_ops, "CAUGHT_UP", 1 << 16)
    trace, done = tmp_path / "torch_trace.json", threading.Event()
    reader = start(trace, done.is_set)
    time.sleep(0.1)  # the reader waits for the file to appear
    first = trace.with_name(trace.name + kineto_ops.KINETO_TEMP_SUFFIX) if temp else trace
    writer = threading.Thread(target=_write_slowly, args=(data, first, trace if temp else None, done))
    writer.start()
    return trace, reader, writer


@pytest.mark.parametrize("temp", [True, False], ids=["kineto-tmp-then-rename", "written-in-place"])
def test_the_trace_parsed_while_written_is_the_finished_files_parse(tmp_path, monkeypatch, temp):
    """The default run parses the trace as the launcher writes it: the same kernel table and timeline tables
    as ``load`` of the finished file."""
    from nsighttc.parse import load
    trace, stream, writer = _while_written(tmp_path, monkeypatch, temp,
                                           lambda t, w: trace_reader.TraceStream(t, w).start())
    parsed = stream.parsed()
    writer.join()
    assert stream.error is None and parsed is not None
    whole = load(trace)
    pd.testing.assert_frame_equal(parsed.kernels, whole.kernels, check_exact=True)
    for table in ("gpu_ops", "api", "ranges"):
        pd.testing.assert_frame_equal(getattr(parsed.timeline, table), getattr(whole.timeline, table), check_exact=True)


@pytest.mark.parametrize("temp", [True, False], ids=["kineto-tmp-then-rename", "written-in-place"])
def test_the_kernel_scan_reads_the_trace_while_it_is_written(tmp_path, monkeypatch, temp):
    """The scan follows the file as the launcher writes it, finds exactly what a scan of the finished file
    finds, and hands every kernel over once, window by window, as it comes."""
    batches: list[list[dict]] = []
    trace, scan, writer = _while_written(tmp_path, monkeypatch, temp,
                                         lambda t, w: trace_reader.KernelScan(t, w, batches.append).start())
    got = scan.kernels()
    writer.join()
    assert scan.error is None and got is not None
    assert sorted(got, key=lambda k: k["name"]) == sorted(kineto_ops.kernel_launches(trace), key=lambda k: k["name"])
    assert len(got) == 61
    handed = [k["name"] for b in batches for k in b]
    assert sorted(handed) == sorted(k["name"] for k in got)  # each distinct kernel once
    assert len(batches) >= 2  # as the windows came, not at the end
    whole = {k["name"]: k for k in got}
    for k in (k for b in batches for k in b):  # its first event in the file: a launch of it, on its device
        assert k["device"] == whole[k["name"]]["device"] and k["first_ns"] >= whole[k["name"]]["first_ns"]


def test_the_kernel_scan_gives_up_when_no_trace_comes(tmp_path):
    scan = trace_reader.KernelScan(tmp_path / "torch_trace.json", lambda: True).start()
    assert scan.kernels() is None and scan.error is None


def test_the_trace_stream_gives_up_when_no_trace_comes(tmp_path):
    stream = trace_reader.TraceStream(tmp_path / "torch_trace.json", lambda: True).start()
    assert stream.parsed() is None and stream.error is None


def test_a_trace_cut_while_written_is_not_taken_from_the_stream(tmp_path):
    """The writer died mid-way: the stream says it could not parse; the finished-file path reports it."""
    data = fixture_bytes(MULTI_SHAPES)
    trace = tmp_path / "torch_trace.json"
    trace.write_bytes(data[: len(data) // 2])
    stream = trace_reader.TraceStream(trace, lambda: True).start()
    assert stream.parsed() is None and stream.error


def _plan_from_stream(tmp_path, monkeypatch, decide, defer_to=None, index=None):
    ops, gate = tmp_path / "replay_ops.json", tmp_path / ".replay-gate"
    plan = replay_plan.StreamPlan(tmp_path / "torch_trace.json", ops, gate, decide, defer_to=defer_to,
                                  index=index).start()
    trace, scan, writer = _while_written(tmp_path, monkeypatch, True,
                                         lambda t, w: trace_reader.KernelScan(t, w, plan.add, index=index).start())
    rest = scan.kernels()
    writer.join()
    return plan, plan.finish(rest), ops, gate


@pytest.mark.parametrize("lookup", ["scan", "index", "index-cut-events"])
def test_the_replay_planned_while_the_trace_is_written_calls_what_the_finished_traces_plan_calls(tmp_path,
                                                                                                 monkeypatch, lookup):
    """The calls are appended as JSON lines while the trace is written, end with {"end": true}, and are the
    calls the plan from the finished trace makes, for the same kernels: with the operators found by a scan of
    what is written, read where the kernel scan's index saw them (the default run), or, where the index's
    span cuts their events, by the scan again."""
    from nsighttc.runtime.replay import read_calls
    index = None if lookup == "scan" else kineto_ops.OperatorIndex()
    if lookup == "index-cut-events":
        monkeypatch.setattr(kineto_ops.OperatorIndex, "SPAN", (4096, 200))  # shorter than most operator events
    plan, found, ops, gate = _plan_from_stream(tmp_path, monkeypatch, lambda need: list(dict.fromkeys(need["name"])),
                                               index=index)
    assert plan.errors == [] and not plan.stood_down and gate.read_text() == "go"
    assert found["kernels_with_operator"] == NEEDED and found["kernels_without_operator"] == 0
    assert found["first_call_s"] is not None and found["last_call_s"] >= found["first_call_s"]
    assert found["first_needed_s"] is not None and found["lookup_s"] >= 0
    if index is not None:  # the operator half was indexed, and the index closed at the GPU half
        assert len(index.offsets) > 30000 and not index.open
    lines = ops.read_text().splitlines()
    assert json.loads(lines[-1]) == {"end": True} and len(lines) == found["calls"] + 1

    def call(c):
        return _key({k: v for k, v in c.items() if k != "kernels"})
    streamed = list(read_calls(ops))  # what the replay reads: the plan's calls, in the order they were listed
    assert [call(c) for c in streamed] == [call(c) for c in plan.calls()]
    reference = _recorded_ops_needed()
    mine = plan.calls()
    assert sorted(k for c in mine for k in c["kernels"]) == sorted(k for c in reference for k in c["kernels"])
    # the file's first event of a kernel is not always its first launch (5 of 61 here), yet each picked the
    # same operator call as the plan from the finished trace
    assert sorted(call(c) for c in mine) == sorted(call(c) for c in reference) and found["calls"] == 18


def test_the_stream_plan_stands_down_when_the_launcher_listed_its_kernels(tmp_path, monkeypatch):
    listing = tmp_path / "kernel_ops.json"
    listing.write_text("{}")
    plan, found, ops, gate = _plan_from_stream(tmp_path, monkeypatch, lambda need: list(need["name"]), listing)
    assert plan.stood_down and found["calls"] == 0 and not ops.exists() and not gate.exists()


def test_nothing_to_replay_writes_no_list_and_leaves_the_gate_shut(tmp_path, monkeypatch):
    plan, found, ops, gate = _plan_from_stream(tmp_path, monkeypatch, lambda need: [])
    assert found["calls"] == 0 and not ops.exists() and not gate.exists() and plan.errors == []


def test_the_replay_reads_its_calls_as_they_are_appended(tmp_path):
    from nsighttc.runtime.replay import read_calls
    path = tmp_path / "replay_ops.json"
    entries = [{"name": f"aten::op{i}"} for i in range(5)]

    def append():
        with path.open("w") as fh:
            for e in entries:
                fh.write(json.dumps(e)[:5])  # a line cut mid-way is not read until it is whole
                fh.flush()
                time.sleep(0.02)
                fh.write(json.dumps(e)[5:] + "\n")
                fh.flush()
            fh.write('{"end": true}\n')
    writer = threading.Thread(target=append)
    writer.start()
    got = list(read_calls(path, wait_s=5))
    writer.join()
    assert got == entries
    path.write_text(json.dumps(entries))  # a whole list, written at once
    assert list(read_calls(path)) == entries
    path.write_text(json.dumps(entries[0]) + "\n")  # a list that never ends: the calls it had, after the wait
    assert list(read_calls(path, wait_s=0.2)) == entries[:1]
    with pytest.raises(TimeoutError):
        list(read_calls(tmp_path / "never.json", wait_s=0.1))


def test_the_launcher_stops_the_profiler_trace_only_and_the_trace_keeps_the_arguments(tmp_path):
    """Where torch has ``trace_only`` (the CI's 2.13), the launcher's profiler keeps no events in memory: no
    kernel list is written, and the trace still holds every operator's dims, strides, types and values."""
    pytest.importorskip("torch")
    import subprocess
    import sys
    from nsighttc.runtime.launch import trace_only_config
    if trace_only_config() is None:
        pytest.skip("this torch has no trace_only")
    script = tmp_path / "mm.py"
    script.write_text("import torch\na = torch.randn(8, 4)\nb = torch.randn(6, 4).t()\nfor _ in range(3):\n"
                      "    torch.addmm(torch.zeros(8, 6), a, b, beta=0.5)\n")
    trace, listing = tmp_path / "t.json", tmp_path / "kernel_ops.json"
    r = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--torch-trace", str(trace), "--record-shapes",
                        "--kernel-ops", str(listing), "--", str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "trace_only" in r.stderr and not listing.exists()
    events = json.loads(trace.read_text())["traceEvents"]
    addmm = [e for e in events if e.get("name") == "aten::addmm"]
    assert len(addmm) == 3
    args = addmm[0]["args"]
    assert args["Input Dims"][:3] == [[8, 6], [8, 4], [4, 6]] and args["Input Strides"][2] == [1, 4]
    assert args["Input type"][:3] == ["float", "float", "float"] and "0.5" in args["Concrete Inputs"]


def test_a_kernel_first_seen_without_its_operator_is_listed_from_its_first_launch_at_the_end(tmp_path):
    """The file's first event of a kernel can be a launch outside any operator while its first launch in time
    has one (ResNet-50 AMP's trace: 1 of 47 kernels): the end of the list takes the finished trace's record."""
    trace = tmp_path / "torch_trace.json"
    trace.write_bytes(fixture_bytes(MULTI_SHAPES))
    whole = kineto_ops.kernel_launches(trace)
    ops, gate = tmp_path / "replay_ops.json", tmp_path / ".replay-gate"
    plan = replay_plan.StreamPlan(trace, ops, gate, lambda need: list(dict.fromkeys(need["name"]))).start()
    plan.add([{**k, "external": None} for k in whole])  # as if no operator were known for any of them yet
    found = plan.finish(whole)
    reference = _recorded_ops_needed()
    assert plan.errors == [] and found["kernels_with_operator"] == NEEDED and found["calls"] == 18
    assert sorted(k for c in plan.calls() for k in c["kernels"]) == sorted(k for c in reference for k in c["kernels"])
    assert json.loads(ops.read_text().splitlines()[-1]) == {"end": True}


def test_the_operator_index_reads_each_operator_where_the_scan_saw_it(tmp_path):
    """Filled by the kernel scan up to the first kernel event, the index finds the same operator calls as the
    byte scan for every kernel's operator; an id it never saw, or whose event is cut by its span, is absent
    (the plan's scan finds those)."""
    trace = tmp_path / "torch_trace.json"
    trace.write_bytes(fixture_bytes(MULTI_SHAPES))
    index = kineto_ops.OperatorIndex()
    kernels = kineto_ops.kernel_launches(trace, index=index)
    ids = sorted({k["external"] for k in kernels if k["external"] is not None})
    assert len(ids) >= 40 and not index.open
    scanned = kineto_ops.operators(trace, ids)
    with trace.open("rb") as fh:
        read = index.operators(fh, ids + [10 ** 9])
    assert read.keys() == scanned.keys() and len(read) >= 40
    assert {i: c.to_json() for i, c in read.items()} == {i: c.to_json() for i, c in scanned.items()}
    first_kernel = trace.read_bytes().find(b'"cat": "kernel"')
    assert all(index.offsets[i] < first_kernel for i in ids)  # the operators' own events, in the operator half
    index.SPAN = (4096, 40)  # "External id" is near the end of an event's head; its arguments follow
    with trace.open("rb") as fh:
        assert index.operators(fh, ids) == {}


def test_the_warm_up_profile_is_dropped_from_the_replays_report():
    """The replay's report holds, first, the warm-up GEMM ncu profiled in nsighttc-warm (its one-time set-up
    paid before the gate): no reader passes it on; the 58 profiles of the calls stay, and the kernels the replay
    measured are exactly the calls' kernels."""
    from nsighttc.parse import load
    from tests.conftest import read_rows
    rows = read_rows(RESNET_REPLAY_WARM_NCU)
    header = rows[0]
    ranges = [r[header.index(next(c for c in header if c.startswith("thread Domain")))] for r in rows[2:]]
    warm_name = rows[2][header.index("Kernel Name")]
    assert len(rows) - 2 == 59 and "nsighttc-warm" in ranges[0] and all("nsighttc-replay" in r for r in ranges[1:])
    parsed = load(RESNET_REPLAY_WARM_NCU)
    assert len(parsed.kernels) == 58 and warm_name not in set(parsed.kernels["name"].astype(str))
    assert parsed.kernels["nvtx"].astype(str).str.startswith("nsighttc-replay").all()
    from nsighttc.analysis.merge import merge_key
    measured = replay_pass.measured_keys([RESNET_REPLAY_WARM_NCU])
    calls = pd.Series([r[header.index("Kernel Name")] for r in rows[3:]], dtype=object)
    assert measured == set(merge_key(calls)) and len(measured) >= 40  # the calls' kernels, each by hardware
    assert set(merge_key(pd.Series([warm_name], dtype=object))).isdisjoint(measured)


# The transformers Trainer's replay list as its first run on H100 made it (torch 2.11, reports/window call18): call 12,
# aten::_efficient_attention_backward, crashed the replay with its philox seed and offset made on the GPU.
TRAINER_REPLAY_OPS = Path(__file__).resolve().parents[1] / "fixtures" / "replay_ops_trainer.jsonl"


def _trainer_calls() -> list[dict]:
    return [c for c in map(json.loads, TRAINER_REPLAY_OPS.read_text().splitlines()) if "end" not in c]


def test_host_side_seeds_are_made_on_the_host_and_risky_calls_go_last():
    torch = pytest.importorskip("torch")
    from nsighttc.runtime import replay_args
    calls = _trainer_calls()
    backward = next(c for c in calls if c["name"] == "aten::_efficient_attention_backward")
    schema = torch.ops.aten._efficient_attention_backward.default._schema
    values = replay_args.rebuild(torch, backward, torch.device("meta"))
    pos, kw, moved = replay_args._fit(torch, schema, values)
    by_name = dict(zip([a.name for a in schema.arguments if not a.kwarg_only], pos)) | kw
    assert moved and by_name["philox_seed"].device.type == "cpu" and by_name["philox_offset"].device.type == "cpu"
    assert by_name["query"].device.type == "meta" and by_name["logsumexp"].device.type == "meta"
    pos, kw, moved = replay_args._fit(torch, schema, values, host=False)  # the second placement: with the others
    assert not moved and all(v.device.type == "meta" for v in pos + list(kw.values()) if isinstance(v, torch.Tensor))
    # a call with a 0-dim integer tensor the table does not name (here index_select's `index`, by its schema) is made
    # after every other call, in list order
    odd = {"name": "aten::index_select", "types": ["float", "Scalar", "long int"], "dims": [[4, 4], [], []],
           "strides": [[4, 1], [], []], "concrete": ["", "0", ""]}
    order = [c["name"] for c in replay_args.in_safe_order(torch, [odd] + calls)]
    assert order[-1] == "aten::index_select" and order[:-1] == [c["name"] for c in calls]
    assert replay_args.risky(torch, odd) and not any(replay_args.risky(torch, c) for c in calls)


def test_the_operator_a_crashed_replay_was_calling_is_named(tmp_path):
    from nsighttc.runtime.replay import CALLING
    log = tmp_path / "ncu_replay.stderr.log"
    log.write_text(f"{CALLING}aten::mm\nnsighttc.replay: +0.1s aten::mm.default (0.01 s)\n"
                   f"{CALLING}aten::_efficient_attention_backward\nFatal Python error: Segmentation fault\n")
    assert replay_pass.crashed_in(log) == "aten::_efficient_attention_backward"
    log.write_text(f"{CALLING}aten::mm\nnsighttc.replay: could not call aten::mm: no\n")
    assert replay_pass.crashed_in(log) is None
    assert replay_pass.crashed_in(tmp_path / "absent.log") is None


def _planned_from_operators(tmp_path, job: bool):
    """Readers started on a first run whose operators until the window (a real trace with operators and arguments)
    are on disk, its timeline's trace not yet: a single process' (``TimelineRun(early=True)``), or a job's (rank 0's
    files, no early read of the traces, the operators' trace handed in); returned once the plan listed a call."""
    from types import SimpleNamespace
    where = tmp_path / "rank0" if job else tmp_path
    where.mkdir(exist_ok=True)
    ops_trace, trace = where / "torch_ops_trace.json", where / "torch_trace.json"
    ops_trace.write_bytes(fixture_bytes(MULTI_SHAPES))
    ops_done, written, program_done = threading.Event(), threading.Event(), threading.Event()
    ops_done.set()
    tl_run = SimpleNamespace(early=not job, p=SimpleNamespace(ops_trace=None if job else ops_trace, seconds=1.0),
                             ops_done=ops_done.is_set, trace_done=written.is_set, said_written=True,
                             program_done=program_done)
    gate = tmp_path / ".replay-gate"
    readers = trace_reader.ReadersOfTheTrace(tmp_path, gate, lambda need: list(dict.fromkeys(need["name"])),
                                             where / "kernel_ops.json", tmp_path / "replay_ops.json")
    readers.start(trace, tl_run, **({"ops_trace": ops_trace} if job else {}))
    deadline = time.monotonic() + 60
    while readers.streamed is not None and readers.streamed.first_call_s is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return readers, tl_run, trace, ops_trace, gate, written, program_done, deadline


def test_a_first_runs_operators_trace_is_planned_while_the_window_runs_and_the_gate_held_until_it_ends(tmp_path):
    """On a first run with a window the launcher writes the operators until the window first (``--ops-trace``),
    the window's ranges-only timeline at the end. The readers plan the replay from the operators' trace as soon as
    it is written, look the operators up there, and open the replay's gate only once the program's GPU work is
    over (``TimelineRun.program_done``): the replay must not share the GPU with the steps being timed."""
    from nsighttc.runtime.replay import read_calls
    readers, tl_run, trace, ops_trace, gate, written, program_done, deadline = _planned_from_operators(tmp_path,
                                                                                                     job=False)
    assert readers.streamed.first_call_s is not None  # planned while the timeline's trace does not exist yet
    assert readers.scan.trace == ops_trace and readers.streamed.trace == ops_trace
    time.sleep(0.2)
    assert not gate.exists()  # held: the program still runs its window
    program_done.set()
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gate.read_text() == "go"
    trace.write_bytes(fixture_bytes(MULTI_TORCH) if MULTI_TORCH.suffix == ".gz"
                      else MULTI_TORCH.read_bytes())  # the window's timeline: no operators
    written.set()
    info: dict = {}
    found = readers.finish(trace, tl_run, False, info, {})
    assert found["kernels_with_operator"] == NEEDED and found["kernels_without_operator"] == 0
    assert info["early_plan"]["source"].startswith("operators' trace until the window")
    reference = _recorded_ops_needed()
    assert sorted(k for c in readers.streamed.calls() for k in c["kernels"]) == \
        sorted(k for c in reference for k in c["kernels"])
    assert len(list(read_calls(tmp_path / "replay_ops.json"))) == found["calls"] == 18
    assert readers.with_operators(trace) == ops_trace


def test_without_an_operators_trace_the_readers_plan_from_the_timeline_trace(tmp_path):
    """No window ended the recording (one session, whole): the operators' trace never comes and the timeline's
    trace, written at the end, is read instead."""
    from types import SimpleNamespace
    ops_trace, trace = tmp_path / "torch_ops_trace.json", tmp_path / "torch_trace.json"
    written, program_done = threading.Event(), threading.Event()
    ended = threading.Event()
    tl_run = SimpleNamespace(early=True, p=SimpleNamespace(ops_trace=ops_trace, seconds=1.0), ops_done=ended.is_set,
                             trace_done=written.is_set, said_written=True, program_done=program_done)
    readers = trace_reader.ReadersOfTheTrace(tmp_path, tmp_path / ".replay-gate",
                                             lambda need: list(dict.fromkeys(need["name"])),
                                             tmp_path / "kernel_ops.json", tmp_path / "replay_ops.json")
    readers.start(trace, tl_run)
    time.sleep(0.2)
    program_done.set()
    trace.write_bytes(fixture_bytes(MULTI_SHAPES))
    written.set()
    ended.set()
    found = readers.finish(trace, tl_run, False, {}, {})
    assert readers.scan.trace == trace and found["kernels_with_operator"] == NEEDED
    assert readers.with_operators(trace) == trace


def test_foreach_norms_cleanup_kernel_is_settled_by_its_measurement():
    """torch._foreach_norm (a Trainer's gradient clipping) ends with lpnorm_cleanup, which the replay cannot launch
    (a TensorList argument): measured on H100 for fp32, fp16 and bf16 lists, its tensor-pipe count is HFMA2.MMA moves
    only, so its name settles it and the plan never waits for it (the Trainer's program ran under ncu for it)."""
    from nsighttc.analysis.tensor_cores import EVIDENCE_HARDWARE
    from nsighttc.api import _load_all
    from nsighttc.analysis import name_rules
    parsed = _load_all([Path(__file__).resolve().parents[1] / "fixtures" / "h100_foreach_norm_ncu_raw.csv.gz"])[0]
    launches = classify_launches(parsed.kernels)
    cleanup = launches[launches["name"].astype(str).str.contains("lpnorm_cleanup").to_numpy()]
    assert len(cleanup) == 3 and (cleanup["evidence"] == EVIDENCE_HARDWARE).all()
    assert not cleanup["tensor_core"].astype(bool).any()  # the counters: no Tensor Core math
    assert all(name_rules.match(str(n))[0] is False for n in cleanup["name"])
    from nsighttc.model import conform
    names = pd.Series(["void at::native::lpnorm_cleanup<float, (at::native::NormType)1, float, true, float>"
                       "(float const*, at::native::TensorListAddresses, int)"], dtype="string")
    assert needs_hardware(classify_launches(conform(pd.DataFrame({"name": names})))).empty


def test_an_operator_that_wants_its_seeds_on_the_gpu_is_called_again_with_them_there():
    """cuDNN's attention backward refuses host seeds with an error (H100, the torch.compile loop): the call is made
    again with them beside the other tensors; an operator that took them on the host is called once."""
    torch = pytest.importorskip("torch")
    from nsighttc.runtime import replay_args
    real = torch.ops.aten._efficient_attention_backward.default
    seen: list[str] = []

    class Op:
        _schema = real._schema

        def __init__(self, wants_gpu: bool):
            self.wants_gpu = wants_gpu

        def __call__(self, *args, **kwargs):
            names = [a.name for a in self._schema.arguments if not a.kwarg_only]
            seed = dict(zip(names, args))["philox_seed"]
            seen.append(seed.device.type)
            if self.wants_gpu and seed.device.type == "cpu":
                raise RuntimeError("Expected all tensors to be on the same device, but got philox_seed is on cpu")

    class Packet:
        def __init__(self, op):
            self.default = op

        def overloads(self):
            return ["default"]
    call = next(c for c in _trainer_calls() if c["name"] == "aten::_efficient_attention_backward")
    values = replay_args.rebuild(torch, call, torch.device("meta"))
    assert replay_args.call_op(torch, call, torch.device("meta"), (Packet(Op(True)), values)) == "default"
    assert seen == ["cpu", "meta"]
    seen.clear()
    assert replay_args.call_op(torch, call, torch.device("meta"), (Packet(Op(False)), values)) == "default"
    assert seen == ["cpu"]


def test_a_distributed_jobs_counters_pass_runs_only_for_enough_matrix_time(planned):
    """Issue 46: a torchrun job is not run again under Nsight Compute for kernels that hold less than
    NCU_RERUN_MIN_SHARE of the recording's matrix-kernel time (the replay's leftovers)."""
    need, parsed = planned
    launches = classify_launches(parsed.kernels)
    matrix = launches["matrix_work"].astype(bool)
    assert need.attrs["matrix_ns"] == pytest.approx(float(launches.loc[matrix, "duration_ns"].sum()))
    names = list(dict.fromkeys(need["name"]))
    everything = evidence.missing_matrix_share(need, names)
    assert 0.5 < everything <= 1.0  # what still needs evidence is most of the matrix time before any is measured
    smallest = need.groupby("name")["time_ns"].sum().idxmin()
    little = evidence.missing_matrix_share(need, [smallest])
    assert little < evidence.NCU_RERUN_MIN_SHARE < everything
    assert evidence.missing_matrix_share(need.iloc[0:0], names) is None


def test_a_jobs_replay_is_planned_from_rank_0s_operators_while_the_job_runs_and_held_until_its_gpu_work_ends(
        tmp_path):
    """A torchrun job's first run: its traces are read once every rank wrote its own, but rank 0's operators until the
    window are on disk long before. The replay's calls are listed from them while the job runs, and its gate opens
    once the job's GPU work is over (every rank said its exit code), not after the traces are read and planned
    (two H200s, DDP ResNet-50: the replay ended 2.6-3.3 s after the job's traces were written, cost50e)."""
    readers, tl_run, trace, ops_trace, gate, written, program_done, deadline = _planned_from_operators(tmp_path,
                                                                                                     job=True)
    rank0 = trace.parent
    assert readers.streamed is not None and readers.streamed.first_call_s is not None
    assert readers.stream is None  # the ranks' traces are parsed in the rank workers, not here
    time.sleep(0.2)
    assert not gate.exists()  # held while the job runs
    program_done.set()
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gate.read_text() == "go"
    trace.write_bytes(fixture_bytes(MULTI_TORCH) if MULTI_TORCH.suffix == ".gz"
                      else MULTI_TORCH.read_bytes())
    written.set()
    info: dict = {}
    found = readers.finish(trace, tl_run, False, info, {})
    assert found["kernels_with_operator"] == NEEDED and info["early_plan"]["source"].startswith("operators' trace")
    # a job's cached run (no operators' trace) or one without a replay: nothing is read here while the job runs
    quiet = trace_reader.ReadersOfTheTrace(tmp_path, None, lambda need: [], rank0 / "kernel_ops.json",
                                           tmp_path / "replay_ops2.json")
    quiet.start(trace, tl_run, ops_trace=ops_trace)
    assert quiet.streamed is None and quiet.stream is None and quiet.scan is None


class _TorchOnTheHost:
    """Real torch with its "cuda" tensors made on the host, a cuDNN that refuses bf16 convolutions, and the NVTX and
    synchronisation calls noted: what ``replay.warm_up`` does, part by part, on a CPU machine."""

    def __init__(self, torch):
        self._torch, self.calls = torch, []
        self.cuda = type("cuda", (), {"synchronize": staticmethod(lambda *a: self.calls.append("sync")),
                                      "nvtx": type("nvtx", (), {
                                          "range_push": staticmethod(lambda n: self.calls.append(("push", n))),
                                          "range_pop": staticmethod(lambda: self.calls.append("pop"))})})
        self.backends = type("backends", (), {"cudnn": type("cudnn", (), {"is_available": staticmethod(lambda: True)})})
        self.nn = type("nn", (), {"functional": type("F", (), {"conv2d": staticmethod(self._conv2d)})})

    def __getattr__(self, name):
        got = getattr(self._torch, name)
        if name in ("ones", "randn", "zeros"):
            def on_host(*a, **k):
                self.calls.append((name, k.get("dtype")))
                return got(*a, **{**k, "device": "cpu"})
            return on_host
        return got

    def _conv2d(self, x, w, **kw):
        if x.dtype == self._torch.bfloat16:
            raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED: no bf16 convolution here\nsecond line")
        self.calls.append(("conv", tuple(x.shape), x.is_contiguous(memory_format=self._torch.channels_last),
                           kw.get("stride")))
        return self._torch.nn.functional.conv2d(x.float(), w.float(), **kw)


def test_the_replays_warm_up_runs_each_part_and_says_what_failed(monkeypatch):
    """The warm-up (before the gate, while the program runs) makes the inputs as the calls make theirs, runs the
    first-layer convolution of image models in channels-last fp16 (its first call took 0.32-0.39 s inside DDP
    ResNet-50's replays on H200, call 27), and profiles its GEMM last: a part that fails is said in one line and the
    others still run."""
    torch = pytest.importorskip("torch")
    from nsighttc.runtime import replay
    said = []
    monkeypatch.setattr(replay, "say", said.append)
    fake = _TorchOnTheHost(torch)
    replay.warm_up(fake)
    convs = [c for c in fake.calls if c[0] == "conv"]
    assert convs == [("conv", (1, 8, 8, 8), False, 1), ("conv", (2, 3, 64, 64), True, 2)]  # fp16 only: bf16 refused
    assert len(said) == 2 and all("no bf16 convolution here" in s and "second line" not in s for s in said)
    assert {("randn", torch.float32)} <= set(fake.calls)  # the inputs' making (``make_tensor``) warmed too
    assert {("ones", dt) for dt in (torch.float16, torch.bfloat16, torch.float32)} <= set(fake.calls)  # the GEMMs
    push = fake.calls.index(("push", replay.WARM_RANGE))
    assert fake.calls[push + 1:][-1] == "sync" and "pop" in fake.calls[push:]  # the profiled GEMM ran, last


def test_a_warm_up_whose_gate_opened_already_leaves_what_only_some_lists_need_to_their_calls(tmp_path):
    """A program shorter than the replay's start under ncu opens the gate while the replay still warms up: then the
    calls are what is waited for, and the parts only some lists need (bf16, the first-layer convolution, the inputs)
    are left to the calls that need them; the context, fp16/fp32 cuBLAS and cuDNN and the profiled GEMM are made all
    the same. The gate is looked at, not waited at (``gate.said``)."""
    torch = pytest.importorskip("torch")
    from nsighttc.runtime import gate, replay
    g = tmp_path / ".replay-gate"
    assert not gate.said(g)  # no file yet
    g.write_text("")
    assert not gate.said(g)
    g.write_text("go")
    assert gate.said(g)
    fake = _TorchOnTheHost(torch)
    replay.warm_up(fake, opened=lambda: gate.said(g))
    assert [c for c in fake.calls if c[0] == "conv"] == [("conv", (1, 8, 8, 8), False, 1)]
    made = {c for c in fake.calls if isinstance(c, tuple) and c[0] in ("ones", "randn")}
    assert ("ones", torch.bfloat16) not in made and not any(c[0] == "randn" for c in made)
    assert {("ones", torch.float16), ("ones", torch.float32)} <= made and ("push", replay.WARM_RANGE) in fake.calls


def test_fp32_convolutions_that_read_cudnns_flag_are_replayed_with_tf32_off_and_on():
    """H200, wrappers/grad_accum.py (``torch.backends.cudnn.allow_tf32 = False``): its replay list as the first run wrote
    it. ``aten::convolution_backward`` carries no TF32 argument, so the replay ran it with cuDNN's default (TF32 on)
    and launched other kernels than the program; 5 of 13 kernels went to the program's ncu pass. Each such call is now
    made with the flag off and on; ``aten::cudnn_convolution`` carries its own ``allow_tf32`` and is made once."""
    import lzma
    torch = pytest.importorskip("torch")
    from nsighttc.runtime.replay_settings import set_globals, settings
    listed = Path(__file__).resolve().parents[1] / "fixtures" / "h200_grad_accum_replay_ops.jsonl.xz"
    calls = [json.loads(line) for line in lzma.open(listed, "rt") if '"name"' in line]
    by_name = {}
    for c in calls:
        by_name.setdefault(c["name"], []).append(settings(c))
    assert by_name["aten::convolution_backward"] == [[{"cudnn_tf32": False}, {"cudnn_tf32": True}]] * 5
    assert by_name["aten::cudnn_convolution"] == [[{}]] * 4 and \
        all("False" in c["concrete"] for c in calls if c["name"] == "aten::cudnn_convolution")  # (its allow_tf32)
    assert by_name["aten::mm"] == [[{"tf32": False}, {"tf32": True}]] * 2
    half = {**calls[2], "types": ["c10::Half" if t == "float" else t for t in calls[2]["types"]]}
    assert settings(half) == [{}]  # (TF32 is for fp32 inputs only)
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with set_globals(torch, {"cudnn_tf32": not before[1]}):
        assert torch.backends.cudnn.allow_tf32 is (not before[1])
        assert torch.backends.cuda.matmul.allow_tf32 is before[0]
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    with pytest.raises(RuntimeError), set_globals(torch, {"tf32": not before[0]}):
        raise RuntimeError("the call failed")
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before  # put back regardless


def test_a_rank_that_recorded_no_operators_takes_them_from_another_ranks_recording(planned, tmp_path):
    """A job's rank whose change to the operators' recording was given up (a record_function of the program's open
    around its loop: ``runtime.recording.hold_window``) recorded its window with the ranges and kernels only; another
    rank recorded the operators. Here rank 0 is the multi-phase trace with its operators taken out (what such a
    rank writes) and rank 1 the same trace as recorded: every kernel needing evidence gets its operator, from rank 1,
    as from the trace alone (2 x H200, ``ddp_w.py``: none did, and the whole job ran again under Nsight Compute)."""
    import gzip
    need, _ = planned
    names = list(dict.fromkeys(need["name"]))
    trace = json.loads(fixture_bytes(MULTI_SHAPES))
    bare = {**trace, "traceEvents": [e for e in trace["traceEvents"] if e.get("cat") != "cpu_op"]}
    # (gzip at level 1, as a job's ranks leave their traces compressed: xz of these 34 MB took 36 s a rank)
    rank0, rank1 = tmp_path / "rank0" / "torch_trace.json.gz", tmp_path / "rank1" / "torch_trace.json.gz"
    for path, doc in ((rank0, bare), (rank1, trace)):
        path.parent.mkdir()
        path.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
    job = evidence.planned_needs([rank0, rank1], {})
    first = job.attrs["first"]
    assert all(first[n][0][0] == str(rank0) and first[n][1][0] == str(rank1) for n in names)  # (rank 0's is first)
    alone = replay_plan.write_ops(tmp_path / "alone.json", {n: first[n][:1] for n in names}, names)
    assert alone["calls"] == 0  # (rank 0's recording alone: what the replay had)
    found = replay_plan.write_ops(tmp_path / "ops.json", first, names)
    assert found["kernels_with_operator"] == len(names) and not found["errors"]
    reference = replay_plan.write_ops(tmp_path / "reference.json", need.attrs["first"], names)
    assert sorted(map(_key, json.loads((tmp_path / "ops.json").read_text()))) == \
        sorted(map(_key, json.loads((tmp_path / "reference.json").read_text()))) and reference["calls"] == found["calls"]


def test_a_ranks_operators_recorded_by_a_dispatch_mode_are_matched_to_their_kernels(planned, tmp_path):
    """A rank whose change to the operators' session could not run records each aten call of a step in a list
    (``runtime.op_capture``), inside a range ``nsighttc.op#<n>`` of its ranges-only recording, whose launches carry no
    ``External id``: the kernel's call is the range around its launch on the launching thread. Here the multi-phase
    trace is made into what such a rank writes: the operators that launched the kernels needing evidence become those
    ranges (same times, same thread), their arguments the list, every other operator and every launch's link to its
    operator gone. The calls found are the ones the trace's own operators give."""
    import gzip
    from nsighttc.parse.op_capture import captured_calls
    from nsighttc.record_format import CAPTURE_FILE, CAPTURED_OP
    need, _ = planned
    names = list(dict.fromkeys(need["name"]))
    reference = replay_plan.write_ops(tmp_path / "reference.json", need.attrs["first"], names)
    trace = json.loads(fixture_bytes(MULTI_SHAPES))
    ev = trace["traceEvents"]
    corr_ext = {e["args"]["correlation"]: e["args"].get("External id") for e in ev
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {})}
    first = {}
    for e in sorted((e for e in ev if e.get("cat") == "kernel" and e.get("name") in set(names)), key=lambda e: e["ts"]):
        first.setdefault(e["name"], corr_ext.get(e["args"]["correlation"]))
    wanted = set(first.values())
    calls, out = [], []
    for e in ev:
        args = e.get("args") or {}
        if e.get("cat") == "cpu_op":
            if args.get("External id") in wanted and "Input type" in args:
                out.append({"ph": "X", "cat": "user_annotation", "name": f"{CAPTURED_OP}{len(calls)}", "pid": e["pid"],
                            "tid": e["tid"], "ts": e["ts"], "dur": e["dur"], "args": {}})
                calls.append({"name": e["name"], "types": args["Input type"], "dims": args.get("Input Dims", []),
                              "strides": args.get("Input Strides", []), "concrete": args.get("Concrete Inputs", [])})
            continue
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            e = {**e, "args": {k: v for k, v in args.items() if k != "External id"}}
        out.append(e)
    path = tmp_path / "rank0" / "torch_trace.json.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(json.dumps({**trace, "traceEvents": out}).encode(), compresslevel=1))
    (path.parent / CAPTURE_FILE).write_text(json.dumps(calls))
    got = captured_calls(path, names)
    assert set(got) == set(names), sorted(set(names) - set(got))
    written = {k: c for c in json.loads((tmp_path / "reference.json").read_text()) for k in c["kernels"]}
    for n in names:
        assert {k: v for k, v in written[n].items() if k not in ("kernels", "device")} == got[n], n
    # the plan takes them where the rank's trace has no operators of its own (``write_ops``' last resort)
    job = evidence.planned_needs([path], {})
    found = replay_plan.write_ops(tmp_path / "ops.json", job.attrs["first"], names)
    assert found["kernels_with_operator"] == len(names) and found["calls"] == reference["calls"]


CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "ddp" / "capture_one_gpu" / "torch_trace.json.xz"


def test_the_replay_list_takes_a_gpu_ranks_calls_recorded_by_a_dispatch_mode(tmp_path):
    """One H200, two gloo DDP ranks with `train` open around the loop (benchmarks/gpu/ddp_one_gpu_ranges.py,
    ``gpu_distributed_windows.sh OUT capture72``): rank 0 recorded a step's 77 calls by a dispatch mode in its
    ranges-only session (its trace kept here around that step; the list beside it). Its first run's replay listed no
    call for the 4 GEMMs needing evidence (the plan read only the kernels' ``External id``s, which such a recording
    has none of) and the job ran again under Nsight Compute. Each plan the replay starts from (the trace's kernel
    events alone; the scan while it is written) now lists their calls: the forward's two `addmm`s, the backward's
    `mm`s, from the ranges around their launches on the main thread and autograd's."""
    from nsighttc.parse.op_capture import captured_calls
    need = evidence.planned_needs([CAPTURED], {})
    names = list(dict.fromkeys(need["name"]))
    assert len(names) == 4 and all(n.startswith("nvjet_") for n in names)
    got = captured_calls(CAPTURED, names)
    assert set(got) == set(names) and sorted(c["name"] for c in got.values()) == ["aten::addmm", "aten::addmm",
                                                                                  "aten::mm", "aten::mm"]
    assert all(t == "c10::Half" for c in got.values() for t in c["types"][:3] if t)  # (autocast's fp16 GEMMs)
    ops, gate = tmp_path / "replay_ops.json", tmp_path / ".replay-gate"
    found = replay_plan.start_from_trace(CAPTURED, ops, gate, lambda need: list(dict.fromkeys(need["name"])))
    assert found["kernels_with_operator"] == 4 and found["kernels_without_operator"] == 0 and gate.read_text() == "go"
    trace = tmp_path / "rank0" / "torch_trace.json"  # (the scan reads a plain file as the launcher writes it)
    trace.parent.mkdir()
    trace.write_bytes(fixture_bytes(CAPTURED))
    (trace.parent / "torch_ops_capture.json").write_bytes((CAPTURED.parent / "torch_ops_capture.json").read_bytes())
    whole = kineto_ops.kernel_launches(trace)
    plan = replay_plan.StreamPlan(trace, tmp_path / "streamed.json", tmp_path / ".gate2",
                                  lambda need: list(dict.fromkeys(need["name"]))).start()
    plan.add(whole)
    streamed = plan.finish(whole)
    assert plan.errors == [] and streamed["kernels_with_operator"] == 4, streamed
    assert sorted(k for c in plan.calls() for k in c["kernels"]) == sorted(names)
