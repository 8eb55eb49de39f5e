"""The report's figures drawn by worker processes (``render.plot_workers``): the same files and Markdown links as
drawn in-process, from a real recording's verdict; whatever a worker does not draw is drawn in-process."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nsighttc.api import analyze
from nsighttc.render.plot_workers import PlotWorkers
from nsighttc.render.plots import FIGURES, write_plots

FIX = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def doc():
    # multi_phase's second run on H100 (its window recorded with the ranges only): activity and ranges to draw
    return analyze([FIX / "window" / "multi_window_torch.json.xz"]).to_json()


def _written(doc: dict, d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    path = d / "verdict.json"
    path.write_text(json.dumps(doc))
    return path


def test_workers_draw_what_the_report_draws_in_process(doc, tmp_path):
    here = write_plots(doc, tmp_path / "here")
    assert set(here.values()) == {"timeline.png", "kernel_time.png"}
    verdict = _written(doc, tmp_path / "workers")
    workers = PlotWorkers()
    drawn = workers.draw(verdict, verdict.parent)
    assert drawn == {"timeline": True, "kernel_time": True}
    assert write_plots(doc, verdict.parent, drawn=drawn) == here  # same links, nothing drawn a second time
    for _, file, _ in FIGURES.values():
        png = (verdict.parent / file).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    # each worker serves one request: a second report draws in-process
    assert workers.draw(verdict, verdict.parent) == {}
    workers.close()


def test_a_figure_without_data_is_reported_not_made(doc, tmp_path):
    bare = dict(doc, timeline=None)  # no timeline: no activity figure, the kernel-time figure still drawn
    verdict = _written(bare, tmp_path)
    drawn = PlotWorkers().draw(verdict, tmp_path)
    assert drawn == {"timeline": False, "kernel_time": True}
    assert write_plots(bare, tmp_path, drawn=drawn) == {"Kernel time by range": "kernel_time.png"}
    assert not (tmp_path / "timeline.png").exists()


def test_a_worker_that_cannot_draw_leaves_the_figure_to_the_report(doc, tmp_path):
    missing = tmp_path / "no-such-verdict.json"  # the worker cannot read the verdict: it answers an error
    drawn = PlotWorkers().draw(missing, tmp_path)
    assert drawn == {}
    assert set(write_plots(doc, tmp_path, drawn=drawn).values()) == {"timeline.png", "kernel_time.png"}


def test_workers_that_never_started_or_died_are_drawn_in_process(doc, tmp_path):
    verdict = _written(doc, tmp_path)
    assert PlotWorkers(python=str(tmp_path / "no-python")).draw(verdict, tmp_path) == {}
    # a worker that exits at once (this interpreter running nothing): end of file, no answer
    dead = PlotWorkers(python=sys.executable)
    for w in dead._workers.values():
        w.proc.kill()
    assert dead.draw(verdict, tmp_path, timeout_s=20) == {}


def test_a_worker_leaves_when_its_input_ends(tmp_path):
    # what happens when the profile process ends or dies without asking: the pipe's end of file
    workers = PlotWorkers()
    procs = [w.proc for w in workers._workers.values()]
    for p in procs:
        p.stdin.close()
    assert [p.wait(30) for p in procs] == [0, 0]
    workers.close()
