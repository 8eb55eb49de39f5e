"""A window of steady steps gives the verdict a whole-program recording gives (issue 29): the same program recorded
on the H100 by the default run's timeline alone (`nsighttc profile --fast`, a window then stopped, or each phase's
window) and with `--whole-program` (every step), `benchmarks/gpu_window.sh` part a. Same headline verdict, the
headline phase's steady step within 5%, the Tensor Core share within 2 points, the same phases."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from nsighttc.api import analyze

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "window"
# trainer: the Trainer fine-tune (hook steps), stopped after its window; multi: five named phases, each a window
PAIRS = ["trainer", "multi"]


def _steps_in(path: Path) -> int:
    """Optimizer steps / step ranges in the raw trace (read without nsighttc's parsers)."""
    with gzip.open(path, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    return sum(1 for e in ev if e.get("name") in ("nsighttc.step", "step") and e.get("cat") == "user_annotation")


@pytest.mark.parametrize("name", PAIRS)
def test_the_window_agrees_with_the_whole_program(name):
    window, whole = (analyze([FIX / f"{name}_{how}_torch.json.gz"]).to_json() for how in ("window", "whole"))
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
    assert _steps_in(FIX / "trainer_window_torch.json.gz") < _steps_in(FIX / "trainer_whole_torch.json.gz") == 40
