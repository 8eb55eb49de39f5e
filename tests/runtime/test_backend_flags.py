"""nsighttc.runtime.backend_flags: the program's kernel-choosing switches, written by its launcher where the operators'
recording stops and set by the replay before its calls."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from nsighttc.runtime import backend_flags  # noqa: E402

# A program that turns on cuDNN's benchmark mode and deterministic algorithms at its start (as image-model training
# scripts and Lightning's Trainer(benchmark=True) do), and turns benchmark mode off again after its loop: the file says
# what the operators were recorded under.
SWITCHING = """
import torch
torch.backends.cudnn.benchmark = True
torch.use_deterministic_algorithms(True, warn_only=True)
m = torch.nn.Linear(16, 16); opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(8, 16)
for i in range(40):
    opt.zero_grad(); m(x).sum().backward(); opt.step()
torch.backends.cudnn.benchmark = False
"""


def _launch(tmp_path, *extra: str):
    prog = tmp_path / "prog.py"
    prog.write_text(SWITCHING)
    flags, trace = tmp_path / "backend_flags.json", tmp_path / "trace.json"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--torch-trace", str(trace),
                           "--record-shapes", "--backend-flags", str(flags), *extra, "--", str(prog)],
                          capture_output=True, text=True, timeout=300, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    return flags, trace


def test_a_first_run_writes_the_switches_its_operators_were_recorded_under_before_their_trace(tmp_path):
    ops = tmp_path / "ops.json"
    flags, trace = _launch(tmp_path, "--window", "--window-warmup", "4", "--window-steps", "6", "--window-end",
                           "continue", "--ops-trace", str(ops))
    doc = json.loads(flags.read_text())
    assert doc["cudnn.benchmark"] is True and doc["deterministic_algorithms"] is True  # not the program's last value
    assert doc["cudnn.enabled"] is True and "cudnn.deterministic" in doc
    assert flags.stat().st_mtime_ns <= ops.stat().st_mtime_ns  # there before the replay's calls can be listed
    assert not list(tmp_path.glob("*.tmp"))


def test_a_program_recorded_whole_writes_them_at_its_end_and_without_record_shapes_nothing_is_written(tmp_path):
    flags, trace = _launch(tmp_path)
    assert json.loads(flags.read_text())["cudnn.benchmark"] is False  # the whole run's operators: the end's values
    flags.unlink()
    prog = tmp_path / "prog.py"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--torch-trace", str(trace),
                           "--backend-flags", str(flags), "--", str(prog)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not flags.exists()  # (no operators' arguments recorded: there is no replay to carry them to)


def test_the_replay_reads_only_switches_it_knows_and_sets_those_that_differ(tmp_path):
    assert backend_flags.read(None) == {} and backend_flags.read(tmp_path / "absent.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert backend_flags.read(bad) == {}
    good = tmp_path / "flags.json"
    good.write_text(json.dumps({"cudnn.benchmark": True, "something.else": 1}))
    assert backend_flags.read(good) == {"cudnn.benchmark": True}
    before = torch.backends.cudnn.benchmark
    try:
        torch.backends.cudnn.benchmark = False
        assert backend_flags.apply(torch, {"cudnn.benchmark": True, "cudnn.enabled": True}) == ["cudnn.benchmark=True"]
        assert torch.backends.cudnn.benchmark is True
        assert backend_flags.apply(torch, {"cudnn.benchmark": True}) == []  # already so: nothing said
    finally:
        torch.backends.cudnn.benchmark = before


def test_only_convolutions_under_benchmark_mode_are_autotuned_before_their_profiled_call():
    conv = {"name": "aten::convolution_backward"}
    assert backend_flags.autotuned(conv, {"cudnn.benchmark": True})
    assert backend_flags.autotuned({"name": "aten::cudnn_convolution"}, {"cudnn.benchmark": True})
    assert not backend_flags.autotuned(conv, {"cudnn.benchmark": False})
    assert not backend_flags.autotuned(conv, {})
    assert not backend_flags.autotuned(conv, {"cudnn.benchmark": True, "cudnn.enabled": False})
    assert not backend_flags.autotuned({"name": "aten::mm"}, {"cudnn.benchmark": True})


def test_the_default_runs_replay_reads_the_file_its_timeline_launcher_writes(tmp_path):
    """One path on both sides: the timeline's launcher is told where to write, the replay where to read (a
    distributed job's rank that records the operators writes in its rank directory)."""
    from nsighttc.profile import replay_pass
    from nsighttc.profile.passes import BACKEND_FLAGS_FILE, Options
    from nsighttc.profile.planning import rank_file, timeline_pass
    from nsighttc.profile.target import resolve_target
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    target = resolve_target(str(script), [], None)
    tl = timeline_pass(Options(timeline_engine="torch", record_shapes=True), target, tmp_path)
    written = tl.argv[tl.argv.index("--backend-flags") + 1]
    rp = replay_pass.replay_pass("ncu", tmp_path, "9.0", Options(), tmp_path / "gate",
                                 rank_file(tmp_path, BACKEND_FLAGS_FILE, target))
    assert rp.argv[rp.argv.index("--backend-flags") + 1] == written == str(tmp_path / BACKEND_FLAGS_FILE)
    assert "--backend-flags" not in timeline_pass(Options(timeline_engine="torch"), target, tmp_path).argv


@pytest.mark.gpu
def test_on_a_gpu_a_convolution_under_benchmark_mode_is_tuned_outside_the_profiled_range():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import io
    from nsighttc.runtime import replay
    # (self, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32), as torch.profiler records
    call = {"name": "aten::cudnn_convolution", "types": ["c10::Half", "c10::Half", "ScalarList", "ScalarList",
                                                         "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
            "dims": [[8, 64, 56, 56], [64, 64, 3, 3]], "strides": [[], []],
            "concrete": ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "True", "False", "True"]}
    before = torch.backends.cudnn.benchmark
    try:
        torch.backends.cudnn.benchmark = True
        log = io.StringIO()
        counts = replay.replay([call], log=log, flags={"cudnn.benchmark": True})
    finally:
        torch.backends.cudnn.benchmark = before
    assert counts["called"] == 1, log.getvalue()
    assert "inputs and autotuning" in log.getvalue()
