"""Every Kineto schema torch has written: a trace of torch 1.8-1.9 (its categories with capitals, its ranges written as
operators, its GPU events on "stream N" threads) gives the verdict its events give in today's schema.

The old schema, as the V100 ResNet-50 sample of pytorch/kineto's tb_plugin wrote it (June 2021,
``worker0.1623143089861.pt.trace.json``): categories ``Kernel``, ``Memcpy``, ``Memset``, ``Runtime``, ``Operator``,
``Trace``; ``ProfilerStep#N``, ``enumerate(DataLoader)#...``, ``Optimizer.step#...`` and record_function's ranges are
``Operator`` events beside ``aten::`` operators and autograd nodes (``CudnnConvolutionBackward``); GPU events carry
``"pid": <device>``, ``"tid": "stream 7"`` and ``"external id"``. That trace is not this repository's to ship, so the
tests turn real traces of ours into it (``as_torch_1_9``) and check both read alike."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import nsighttc
from nsighttc.parse import kineto
from tests.conftest import FIXTURES, MULTI_TORCH, fixture_open

OLD_CATS = {"kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset", "cuda_runtime": "Runtime",
            "cuda_driver": "Runtime", "user_annotation": "Operator", "cpu_op": "Operator"}


def as_torch_1_9(doc: dict) -> dict:
    """A trace of today's torch as torch 1.9's Kineto wrote the same events (the module docstring)."""
    out = []
    for e in doc["traceEvents"]:
        cat = e.get("cat")
        if cat in ("gpu_user_annotation", "ac2g", "python_function", "overhead"):  # (not written in 1.9)
            continue
        e = dict(e)
        if cat in OLD_CATS:
            e["cat"] = OLD_CATS[cat]
        args = dict(e.get("args") or {})
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            e["pid"], e["tid"] = args.get("device", e.get("pid")), f"stream {args.get('stream', e.get('tid'))}"
            if "External id" in args:
                args["external id"] = args.pop("External id")
        if args:
            e["args"] = args
        out.append(e)
    return {**{k: v for k, v in doc.items() if k != "traceEvents"}, "traceEvents": out}


@pytest.fixture(scope="module")
def todays():
    """``src``'s verdict in today's schema, made once for the layouts that compare with it."""
    made: dict = {}

    def verdict(src: Path) -> dict:
        if src not in made:
            made[src] = nsighttc.analyze([src]).to_json()
        return made[src]
    return verdict


def _pair(src: Path, tmp_path: Path, todays, layout: str = "object") -> tuple[dict, dict]:
    """The verdicts of ``src`` and of its events as torch 1.9 wrote them; ``layout``: the document as Kineto writes
    it ("object"), or Chrome's JSON Array Format, the events array alone ("array"; the Kineto of late 2020, pytorch/
    kineto's first tb_plugin sample ``plugin/samples/resnet50_num_workers_0``), whose closing ``]`` Chrome makes
    optional ("open"). Written with a line break after every comma (whitespace between and inside the events, as a
    pretty-printed file has; json's C encoder: ``indent`` would take its Python one, 4x slower on 27 MB)."""
    doc = json.load(fixture_open(src))
    old = tmp_path / "old.json.gz"
    text = json.dumps(as_torch_1_9(doc) if layout == "object" else as_torch_1_9(doc)["traceEvents"],
                      separators=(",\n", ": "))
    with gzip.open(old, "wt", compresslevel=1) as fh:
        fh.write(text if layout != "open" else text.rstrip().removesuffix("]"))
    return (todays(src), nsighttc.analyze([old]).to_json())


@pytest.mark.parametrize("src, layout", [(MULTI_TORCH, "object"), (FIXTURES / "unmarked" / "trainer_torch.json.xz", "object"),
                                         (MULTI_TORCH, "array"), (MULTI_TORCH, "open")],
                         ids=["multi_phase", "trainer", "multi_phase-array-format", "multi_phase-array-format-open"])
def test_a_torch_1_9_trace_gives_the_verdict_of_its_events_in_todays_schema(src, layout, tmp_path, todays):
    new, old = _pair(src, tmp_path, todays, layout)
    for key in ("verdict", "tc_time_share", "matrix_time_share", "launches", "by_dtype"):
        assert old["tensor_cores"][key] == pytest.approx(new["tensor_cores"][key]), key
    a, b = new["timeline"], old["timeline"]
    assert b["verdict"] == a["verdict"] and b["gpu_busy_share"] == pytest.approx(a["gpu_busy_share"], abs=0.005)
    assert b["steps"]["count"] == a["steps"]["count"] and b["steps"]["name"] == a["steps"]["name"]
    assert b["steps"]["median_iteration_ns"] == pytest.approx(a["steps"]["median_iteration_ns"], rel=1e-6)
    assert {r["name"] for r in old["ranges"]} >= {r["name"] for r in new["ranges"] if "/" not in r["name"]} - {""}


def test_an_old_traces_operators_are_ranges_only_where_they_are_the_programs():
    ranges = ["ProfilerStep#5", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
              "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad", "## forward ##", "data"]
    operators = ["aten::empty", "torch::autograd::AccumulateGrad", "CudnnConvolutionBackward", "ReluBackward1",
                 "AddBackward0", "detach_", ""]
    assert all(kineto.old_range(n) for n in ranges)
    assert not any(kineto.old_range(n) for n in operators)


@pytest.mark.parametrize("text", ["[1, 2, 3]", '[{"name": "a record of another tool"}]'])
def test_a_json_array_without_trace_events_is_refused_in_one_line(text, tmp_path, run_cli):
    """The Array Format's events are objects with a phase (``"ph"``): an array of anything else is no trace, and says
    so, where it read as an empty one."""
    path = tmp_path / "list.json"
    path.write_text(text)
    code, _, err = run_cli("analyze", path)
    assert code == 2 and "a JSON array without trace events" in err and len(err.strip().splitlines()) == 1
