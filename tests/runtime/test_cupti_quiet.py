"""Runtime calls that do no GPU work, left out of CUPTI's records (nsighttc/runtime/cupti_quiet.py): which library
is found, what is asked of it, and that nothing the analysis reads is among them. The call into CUPTI itself was
measured on an H200 (benchmarks/probes/gpu_cupti_records_probe.py); here it is a stand-in that records the calls."""
from __future__ import annotations

import pytest

from nsighttc.analysis.timeline.base import SYNC_CALLS
from nsighttc.runtime import cupti_quiet

MAPS = """\
7f00 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6
7f10 r-xp 00000000 08:01 2 /venv/site-packages/nvidia/cu13/lib/libcupti.so.13
7f20 rw-p 00000000 00:00 0
7f30 r-xp 00000000 08:01 3 [vdso]
"""


class _Enable:
    """``cuptiActivityEnableRuntimeApi`` as a stand-in: records each (id, enable); refuses the ids in ``refuse``."""

    def __init__(self, refuse=()):
        self.calls, self.refuse = [], set(refuse)

    def __call__(self, cbid, enable):
        self.calls.append((cbid, enable))
        return 1 if cbid in self.refuse else 0


class _Lib:
    def __init__(self, enable=None):
        if enable is not None:
            self.cuptiActivityEnableRuntimeApi = enable


def test_the_loaded_cupti_is_found_in_the_process_maps():
    assert cupti_quiet.loaded_cupti(MAPS) == "/venv/site-packages/nvidia/cu13/lib/libcupti.so.13"
    assert cupti_quiet.loaded_cupti(MAPS.replace("libcupti.so.13", "libcudart.so.13")) is None
    assert cupti_quiet.loaded_cupti("") is None


def test_every_quiet_call_is_turned_off_in_the_loaded_cupti_and_what_was_done_is_said(monkeypatch):
    monkeypatch.delenv(cupti_quiet.QUIET_ENV, raising=False)
    enable, opened = _Enable(), []
    said = cupti_quiet.quiet(lambda p: opened.append(p) or _Lib(enable), path="/x/libcupti.so.13")
    ids = [i for v in cupti_quiet.QUIET.values() for i in v]
    assert opened == ["/x/libcupti.so.13"] and enable.calls == [(i, 0) for i in ids]
    assert enable.argtypes and said.startswith(f"{len(cupti_quiet.QUIET)} kinds of runtime call")
    assert "refused" not in said
    refused = cupti_quiet.quiet(lambda p: _Lib(_Enable(refuse={12})), path="/x/libcupti.so.13")
    assert f"1 of {len(ids)} ids refused" in refused
    # a CUPTI without the call (an older one), one that cannot be opened, no CUPTI loaded, or switched off
    assert "cannot leave single ones out" in cupti_quiet.quiet(lambda p: _Lib(), path="/x/libcupti.so.13")

    def fails(path):
        raise OSError("not loaded")
    assert "OSError: not loaded" in cupti_quiet.quiet(fails, path="/x/libcupti.so.13")
    monkeypatch.setattr(cupti_quiet, "loaded_cupti", lambda: None)
    assert cupti_quiet.quiet(lambda p: _Lib(_Enable())) == ""
    monkeypatch.setenv(cupti_quiet.QUIET_ENV, "off")
    enable = _Enable()
    assert cupti_quiet.quiet(lambda p: _Lib(enable), path="/x/libcupti.so.13") == "" and not enable.calls


def test_no_quiet_call_is_one_the_analysis_reads():
    """Launches, copies, memsets, allocations, graph launches, events and the calls that wait are what the timeline
    reads (analysis.timeline.base.SYNC_CALLS among them): none of them may be left out."""
    read = ("Launch", "Memcpy", "Memset", "Malloc", "Free", "Synchronize", "Event", "Graph", "Wait")
    assert not [n for n in cupti_quiet.QUIET if any(w in n for w in read) or n in SYNC_CALLS]
    ids = [i for v in cupti_quiet.QUIET.values() for i in v]
    assert len(ids) == len(set(ids))


def test_a_sessions_start_quiets_cupti_each_time_and_says_so_once(monkeypatch):
    torch = pytest.importorskip("torch")
    from nsighttc.runtime import recording
    asked, said = [], []
    monkeypatch.setattr(cupti_quiet, "quiet", lambda: asked.append(1) or "20 kinds of runtime call ... not recorded")
    monkeypatch.setattr(recording, "say", said.append)
    monkeypatch.setattr(recording, "_QUIETED", [])
    for _ in range(2):
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        recording.start(prof, operators=False)
        prof.__exit__(None, None, None)
    assert len(asked) == 2 and said == ["nsighttc.launch: CUPTI: 20 kinds of runtime call ... not recorded"]
