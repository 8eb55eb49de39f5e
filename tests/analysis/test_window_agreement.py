"""A window of steady steps gives the verdict a whole-program recording gives (issue 29): the same program recorded
on the H100 by the default run's timeline alone (`nsighttc profile --fast`, a window then stopped, or each phase's
window) and with `--whole-program` (every step), `benchmarks/gpu/gpu_window.sh` part a. Same headline verdict, the
headline phase's steady step within 5%, the Tensor Core share within 2 points, the same phases."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from nsighttc.api import analyze
from tests.conftest import fixture_open

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "window"
# trainer: the Trainer fine-tune (hook steps), stopped after its window; multi: five named phases, each a window
PAIRS = ["trainer", "multi"]


def _steps_in(path: Path) -> int:
    """Optimizer steps / step ranges in the raw trace (read without nsighttc's parsers)."""
    with fixture_open(path, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    return sum(1 for e in ev if e.get("name") in ("nsighttc.step", "step") and e.get("cat") == "user_annotation")


@pytest.mark.parametrize("name", PAIRS)
def test_the_window_agrees_with_the_whole_program(name):
    window, whole = (analyze([FIX / f"{name}_{how}_torch.json.xz"]).to_json() for how in ("window", "whole"))
    tw, th = window["timeline"], whole["timeline"]
    assert tw["verdict"] == th["verdict"]
    assert {f["name"] for f in tw["step_families"]} == {f["name"] for f in th["step_families"]}
    assert tw["steps"]["name"] == th["steps"]["name"]
    a, b = tw["steps"]["median_iteration_ns"], th["steps"]["median_iteration_ns"]
    assert abs(a - b) / b <= 0.05, (a, b)
    assert abs(window["tensor_cores"]["tc_time_share"] - whole["tensor_cores"]["tc_time_share"]) <= 0.02
    assert window["tensor_cores"]["verdict"] == whole["tensor_cores"]["verdict"]


def test_the_trainer_window_holds_fewer_steps_than_the_program_ran():
    """The pair is a real window: the program was stopped after it (40 steps asked, fewer recorded)."""
    assert _steps_in(FIX / "trainer_window_torch.json.xz") < _steps_in(FIX / "trainer_whole_torch.json.xz") == 40


# The same program's first default run (every operator recorded with its arguments, for the replay) and second run
# (the ranges only, from the window's start: nsighttc.runtime.recording), H100, reports/window/call14
# (`benchmarks/keep_traces.py`; both stripped of operator events by strip_fixture.py, so they differ only in how the
# program ran while recorded).
SECOND_RUN_PAIRS = ["dataloader", "lightning"]


def _labels(path: Path) -> set[str]:
    with fixture_open(path, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    return {e["name"] for e in ev if e.get("cat") == "user_annotation"}


@pytest.mark.parametrize("name", SECOND_RUN_PAIRS)
def test_a_ranges_only_recording_keeps_what_the_verdict_reads(name):
    ops_path, ranges_path = (FIX / f"{name}_{how}_torch.json.xz" for how in ("operators", "ranges"))
    # torch's own record_function labels (the DataLoader's fetch, the optimizer's step) and the step hooks' marks
    # are ranges: the ranges-only recording has every one the operator recording has
    assert _labels(ranges_path) == _labels(ops_path)
    assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in _labels(ranges_path)
    ops, ranges = (analyze([p]).to_json() for p in (ops_path, ranges_path))
    assert abs(ops["tensor_cores"]["tc_time_share"] - ranges["tensor_cores"]["tc_time_share"]) <= 0.02
    assert ops["tensor_cores"]["verdict"] == ranges["tensor_cores"]["verdict"]
    assert ops["timeline"]["steps"]["name"] == ranges["timeline"]["steps"]["name"] == "optimizer steps"
    for doc in (ops, ranges):  # the same cause found, in the same place
        assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in doc["timeline"]["headline_cause"]


def test_the_report_note_quotes_what_recording_operators_did_to_the_steps():
    """profile.window's note on a first run's timeline quotes these two recordings of Lightning: the operators and
    their arguments made its steps nearly twice as long as the ranges-only recording's (a plain run: 5.5 ms), and the
    verdict moved from mixed to cpu-bound."""
    from nsighttc.profile.window import SHAPES_SLOWDOWN_SEEN
    ops, ranges = (analyze([FIX / f"lightning_{how}_torch.json.xz"]).to_json()["timeline"]
                   for how in ("operators", "ranges"))
    a, b = ops["steps"]["median_iteration_ns"] / 1e6, ranges["steps"]["median_iteration_ns"] / 1e6
    assert f"{a:.1f} ms/step against {b:.1f} ms" in SHAPES_SLOWDOWN_SEEN
    assert (ops["verdict"], ranges["verdict"]) == ("cpu-bound", "mixed")


def test_only_a_timeline_that_recorded_arguments_says_its_steps_were_slowed(tmp_path):
    """The first run's note carries the measured slow-down (whose numbers the test above checks on the fixtures);
    a ranges-only second run says nothing of arguments."""
    from nsighttc.profile.passes import Pass
    from nsighttc.profile.window import SHAPES_SLOWDOWN_SEEN, note
    events = [{"event": "start", "phase": "nsighttc.step", "warmup": 3, "steps": 20, "median_ms": 7.0}]
    said = {}
    for how, extra in (("first", ["--record-shapes"]), ("second", ["--no-operators"])):
        p = Pass("torch", ["python", "-m", "nsighttc.runtime.launch", "--torch-trace", "t.json", *extra, "--", "x.py"],
                 tmp_path / "torch.log", window={"warmup": None, "steps": None, "end": "stop"}, window_events=events)
        said[how] = note(p)
    assert said["first"].startswith("recorded a window of steady steps: 20 steps of `nsighttc.step`")
    assert "recorded with its arguments for the replay" in said["first"] and SHAPES_SLOWDOWN_SEEN in said["first"]
    assert "arguments" not in said["second"]


def test_a_first_run_with_no_window_says_why_it_cost_and_how_to_bound_it(tmp_path):
    """No steady window (no steps seen): a first run recorded every operator with its arguments from start to end
    (issue 44: an LLM loop's first run passed 2.3x the plain run), so its note says so and how to bound it; a
    ranges-only run says only that the whole program was recorded."""
    from nsighttc.profile.passes import Pass
    from nsighttc.profile.window import note
    said = {}
    for how, extra in (("first", ["--record-shapes"]), ("second", ["--no-operators"])):
        p = Pass("torch", ["python", "-m", "nsighttc.runtime.launch", "--torch-trace", "t.json", *extra, "--", "x.py"],
                 tmp_path / "torch.log", window={"warmup": None, "steps": None, "end": "stop"}, window_events=[])
        said[how] = note(p)
    assert said["first"].startswith("recorded the whole program: no steady window started")
    assert "`--no-replay`" in said["first"] and "`--timeout SECONDS`" in said["first"] and "annotate.step" in said["first"]
    assert said["second"].startswith("recorded the whole program") and "--no-replay" not in said["second"]


def test_a_distributed_first_runs_note_says_rank_0_recorded_the_operators_just_before_the_window_only(tmp_path):
    """Rank 0 of a distributed first run records the ranges only until a few steps before its window, then the
    operators with their arguments for those steps (runtime.recording.OPERATOR_STEPS): its launcher's lines say when
    (the dropped recording, the operators' trace), and the note says that, not "during the warm-up"."""
    from nsighttc.profile.passes import Pass
    from nsighttc.profile.timeline_run import rank_recording
    from nsighttc.profile.window import note
    events = [{"event": "start", "phase": "nsighttc.step", "warmup": 9, "steps": 33, "median_ms": 61.0}]
    p = Pass("torch", ["python", "-m", "nsighttc.runtime.launch", "--torch-trace", "t.json", "--record-shapes", "--",
                       "x.py"], tmp_path / "torch.log", window={"warmup": None, "steps": None, "end": "stop"},
             window_events=events)
    p.operators_until_s = 10.73
    # the lines the GPU run's rank 0 printed (two H200s, DDP ResNet-50, reports/profile_overhead/torchrun_cost call 11)
    for line in ("nsighttc.launch: dropped the recording before the window, for /r/rank0/torch_trace.json "
                 "(program 10.37 s, profiler stop 0.23 s; the operators are recorded with their arguments from here "
                 "for 2 steps, then the window with the ranges only)",
                 "nsighttc.launch: wrote operators /r/rank0/torch_ops_trace.json (program 10.73 s, profiler stop "
                 "0.19 s, trace written in 0.06 s; the window records the ranges only)"):
        rank_recording(line, p.ranks_recorded)
    said = note(p)
    assert "rank 0 recorded every operator with its arguments for the replay in the steps just before the " \
           "window only (10.4-10.7 s into the program)" in said
    assert "during the warm-up" not in said
    p.ranks_recorded = {}  # a single process (no lead): as before
    assert "during the warm-up, until its steps were steady (10.7 s into the program)" in note(p)
