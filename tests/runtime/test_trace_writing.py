"""How the launcher ends a torch.profiler recording that the program outlives: CUPTI released (kineto's
``TEARDOWN_CUPTI``) and the recording's objects kept away from the garbage collector until the trace is written."""
from __future__ import annotations

import argparse
import gc

import pytest

from nsighttc.runtime import trace_writing as tw

torch = pytest.importorskip("torch")


class _Prof:
    """What ``write_trace`` calls on a profiler (a stand-in: no recording is parsed here)."""

    def __init__(self):
        self.stopped = self.exported = False
        self.teardown_at_stop = None

    def __exit__(self, *exc):
        self.stopped = True
        self.teardown_at_stop = tw.os.environ.get(tw.CUPTI_TEARDOWN_ENV)  # kineto reads it as the profiler stops

    def export_chrome_trace(self, path):
        self.exported = True
        open(path, "w").write('{"traceEvents": []}')

    def add_metadata_json(self, *_):
        pass


class _Recorder:
    def __init__(self, finished, follow):
        self.finished, self.follow, self.deferred, self.started_at, self.start_seconds = finished, follow, None, 0.0, None


@pytest.fixture(autouse=True)
def _no_teardown_setting(monkeypatch):
    """The code under test sets the variable itself: undone after each test, whatever it was before. The trace is
    written in this process (``trace_writer.INLINE_ENV``), where the stand-in can say it was exported; the forked
    writer has its own tests (``test_trace_writer``)."""
    monkeypatch.setenv(tw.CUPTI_TEARDOWN_ENV, "")
    monkeypatch.delenv(tw.CUPTI_TEARDOWN_ENV)
    monkeypatch.setenv(tw.trace_writer.INLINE_ENV, "1")


def _ns(tmp_path):
    return argparse.Namespace(torch_trace=tmp_path / "torch_trace.json", kernel_ops=None, record_shapes=False,
                              ops_trace=None)


@pytest.mark.parametrize("cuda, expected", [("13.0", "1"), ("12.6", "1"), ("12.4", None), (None, None)])
def test_cupti_is_released_only_where_kineto_can_tear_it_down_safely(monkeypatch, cuda, expected):
    monkeypatch.setattr(torch.version, "cuda", cuda)
    said = tw.release_cupti_after_stop()
    assert tw.os.environ.get(tw.CUPTI_TEARDOWN_ENV) == expected
    assert (said == "CUPTI released") == (expected == "1")


def test_a_teardown_setting_already_made_is_kept(monkeypatch):
    monkeypatch.setenv(tw.CUPTI_TEARDOWN_ENV, "0")  # what inductor sets for its CUDA graphs
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert tw.release_cupti_after_stop() == "TEARDOWN_CUPTI=0 kept"
    assert tw.os.environ[tw.CUPTI_TEARDOWN_ENV] == "0"


def test_a_window_stop_the_program_outlives_releases_cupti_and_sets_the_recording_aside_until_written(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    prof, rec = _Prof(), _Recorder(finished=True, follow=True)
    frozen_before = gc.get_freeze_count()
    try:
        tw.write_trace(prof, _ns(tmp_path), 0.0, None, rec, operators=False)
        assert prof.stopped and prof.teardown_at_stop == "1" and not prof.exported
        assert rec.deferred is not None and gc.get_freeze_count() > frozen_before  # the unrecorded steps run now
        rec.deferred()  # (TorchRecorder.flush, once those steps are timed)
        assert prof.exported and gc.get_freeze_count() == 0
        assert "CUPTI released" in capsys.readouterr().err
    finally:
        gc.unfreeze()


def test_a_stop_at_the_programs_end_leaves_cupti_and_the_collector_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    prof = _Prof()
    tw.write_trace(prof, _ns(tmp_path), 0.0, None, _Recorder(finished=False, follow=False), operators=False)
    assert prof.exported and prof.teardown_at_stop is None and gc.get_freeze_count() == 0
    assert "CUPTI" not in capsys.readouterr().err


@pytest.mark.parametrize("world, expected", [("2", "0"), ("1", "1")])
def test_a_ranks_stop_at_its_programs_end_asks_for_no_cupti_teardown_even_where_its_environment_does(
        tmp_path, monkeypatch, capsys, world, expected):
    """Kineto's teardown waits for the program's next CUDA call: a DDP job with TEARDOWN_CUPTI=1 hung in its exit
    after both ranks wrote their traces (two H200s). A single process keeps what its environment says."""
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setenv(tw.CUPTI_TEARDOWN_ENV, "1")
    monkeypatch.setenv("WORLD_SIZE", world)
    monkeypatch.setenv("RANK", "1")
    prof = _Prof()
    tw.write_trace(prof, _ns(tmp_path), 0.0, None, _Recorder(finished=False, follow=False), operators=False)
    assert prof.exported and prof.teardown_at_stop == expected
    assert ("set to 0 for this stop" in capsys.readouterr().err) == (expected == "0")
