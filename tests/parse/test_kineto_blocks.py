"""The block reader (``parse.kineto_scan``: msgspec on cuts of the events array) must give exactly what the
event-by-event ijson reader gives, on real traces in torch's own layout and re-serialised compactly, with
cuts forced everywhere, and must hand anything unusual to the ijson reader rather than guess."""
import gzip
import json

import pandas as pd
import pytest

from nsighttc.parse import kineto, kineto_devices, kineto_scan
from tests.conftest import FIXTURES, fixture_open

REAL = [FIXTURES / "kineto_trace_cases_loops.json.xz", FIXTURES / "multi_phase_torch.json.xz"]


def _same(a, b):
    pd.testing.assert_frame_equal(a.kernels, b.kernels, check_exact=True)
    for t in ("gpu_ops", "api", "ranges"):
        pd.testing.assert_frame_equal(getattr(a.timeline, t), getattr(b.timeline, t), check_exact=True)
    assert a.timeline.devices == b.timeline.devices


def _fast(path):
    got = kineto._read_blocks(path)
    assert got is not None, "the block reader declined a well-formed trace"
    return kineto._build(path, *got)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_traces_in_torch_layout(path):
    assert b"},\n  {" in fixture_open(path, "rb").read(1 << 20)  # torch's own indentation: the regex cut
    _same(_fast(path), kineto._read_events(path))


@pytest.mark.parametrize("block", [997, 4096, 65536])
def test_compact_trace_with_cuts_everywhere(tmp_path, monkeypatch, block):
    doc = json.load(fixture_open(REAL[0]))
    # a kernel name holding the cut pattern itself: a cut inside it must be rejected by the decoder
    gpu = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    gpu["name"] = 'void k<"},{", 3>(float*)'
    path = tmp_path / "compact.json"
    path.write_text(json.dumps(doc, separators=(",", ":")))
    monkeypatch.setattr(kineto_scan, "BLOCK", block)
    slow = kineto._read_events(path)
    try:
        fast = _fast(path)
    except kineto_scan.NotFast:  # a cut inside the name: refused, and read() falls back
        fast = kineto.read(path)
    _same(fast, slow)
    assert 'void k<"},{", 3>(float*)' in set(fast.kernels["name"].astype(str))


def test_trailer_keys_and_empty_events(tmp_path):
    doc = json.load(fixture_open(REAL[0]))
    props = doc.pop("deviceProperties")
    doc["deviceProperties"] = props  # after traceEvents now: read from the trailer
    path = tmp_path / "trailer.json"
    path.write_text(json.dumps(doc))
    assert kineto._read_blocks(path)[3] == kineto_devices.properties(props) != {}
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [], "deviceProperties": props}))
    got = kineto._read_blocks(empty)
    assert got[4] == 0 and got[3] == kineto_devices.properties(props)


def test_traceevents_not_at_the_top_is_left_to_ijson(tmp_path):
    doc = json.load(fixture_open(REAL[0]))
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"wrapper": {"traceEvents": []}, **doc}))
    with pytest.raises(kineto_scan.NotFast):
        kineto._read_blocks(path)
    _same(kineto.read(path), kineto._read_events(path))
