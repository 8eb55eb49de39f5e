"""``try --variant cuda-graphs`` (nsighttc/runtime/cuda_graphs.py): which calls of the main model are captured and
replayed, which run as written and why. On the CPU the capture is a stand-in with a CUDA graph's semantics (static
input buffers the replay reads, static outputs each replay overwrites); on a GPU (``-m gpu``) the real one."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from nsighttc.runtime import cuda_graphs as cg  # noqa: E402


def cpu_capture(calls: list):
    """A capture with a graph's semantics on the CPU: the inputs are copied into static buffers once, and a replay runs
    the function again on those buffers, writing into the same output tensors (what the next replay overwrites)."""
    def capture(fn, args, kwargs):
        calls.append("capture")
        s_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        s_kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        out = fn(*s_args, **s_kwargs)

        def replay():
            calls.append("replay")
            out.copy_(fn(*s_args, **s_kwargs))
        return replay, s_args, s_kwargs, out
    return capture


def _graphed(capture, **kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    item = {"variant": "cuda-graphs", "set": {"model": "Sequential"}}
    f = cg.GraphedForward(model.forward, item, capture=capture, placed=lambda a, k: True, **kw)
    return model, f, item


def test_evaluation_calls_of_one_signature_are_captured_once_then_replayed_with_their_own_inputs():
    calls = []
    model, f, item = _graphed(cpu_capture(calls))
    xs = [torch.randn(3, 8, generator=torch.Generator().manual_seed(i)) for i in range(6)]
    with torch.no_grad():
        outs = [f(x) for x in xs]
        want = [model(x) for x in xs]
    assert calls == ["capture"] + ["replay"] * (6 - cg.EAGER_CALLS)  # eager warm-up calls, one capture, replays
    assert all(torch.equal(o, w) for o, w in zip(outs, want))  # each replay read its call's inputs ...
    assert outs[-2].data_ptr() != outs[-1].data_ptr()  # ... and returned a copy the next replay cannot overwrite
    st = item["set"]
    assert st["graphed calls"] == 6 - cg.EAGER_CALLS and st["graphs"] == 1 and st["left eager"] == {}
    assert cg.not_applied(st) is None


def test_training_calls_generate_calls_and_calls_off_the_gpu_run_as_written_and_are_counted():
    calls = []
    model, f, item = _graphed(cpu_capture(calls))
    x = torch.randn(3, 8)
    for _ in range(4):
        f(x).sum().backward()  # autograd on: a training step
    assert calls == [] and item["set"]["left eager"] == {cg.TRAINING: 4}
    why = cg.not_applied(item["set"])
    assert why.startswith("no call was replayed") and "4 training calls" in why
    inside = [True]
    _, g, item2 = _graphed(cpu_capture(calls), in_generate=lambda: inside[0])
    with torch.no_grad():
        for _ in range(4):
            g(x)
    assert item2["set"]["left eager"] == {cg.IN_GENERATE: 4}
    h = cg.GraphedForward(model.forward, {"variant": "cuda-graphs", "set": {"model": "Sequential"}})
    with torch.no_grad():
        h(x)
    assert h.item["set"]["left eager"] == {cg.NOT_CUDA: 1}  # CPU tensors (or no CUDA): never captured


def test_inference_mode_and_no_grad_calls_get_graphs_of_their_own():
    """A graph captured under inference_mode holds inference tensors as its inputs, which a call under no_grad alone may
    not write into: the two modes are two signatures."""
    calls = []
    model, f, item = _graphed(cpu_capture(calls))
    x = torch.randn(3, 8)
    outs = []
    for _ in range(cg.EAGER_CALLS + 2):
        with torch.inference_mode():
            outs.append(f(x))
        with torch.no_grad():
            outs.append(f(x))
    assert item["set"]["graphs"] == 2 and calls.count("capture") == 2
    with torch.no_grad():
        assert all(torch.equal(o, model(x)) for o in outs)


def test_shapes_that_keep_changing_stop_being_captured_past_the_limit():
    calls = []
    _, f, item = _graphed(cpu_capture(calls))
    with torch.no_grad():
        for batch in range(1, cg.MAX_GRAPHS + 3):
            for _ in range(cg.EAGER_CALLS + 1):
                f(torch.randn(batch, 8))
    st = item["set"]
    assert st["graphs"] == cg.MAX_GRAPHS and calls.count("capture") == cg.MAX_GRAPHS
    assert st["left eager"] == {cg.NOT_STATIC: 2}  # the two signatures past the limit, once each past warm-up


def test_a_capture_that_fails_leaves_its_signature_eager_with_the_reason():
    def failing(fn, args, kwargs):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")
    model, f, item = _graphed(failing)
    x = torch.randn(2, 8)
    with torch.no_grad():
        outs = [f(x) for _ in range(5)]
        want = model(x)
    assert all(torch.equal(o, want) for o in outs)  # the program's results are its own
    st = item["set"]
    assert st["left eager"] == {cg.CAPTURE_FAILED: 5 - cg.EAGER_CALLS}
    assert st["capture failed"] == {"1": "RuntimeError: operation not permitted when stream is capturing"}
    assert "capture failed" in cg.not_applied(st) or cg.CAPTURE_FAILED in cg.not_applied(st)


def test_outputs_keep_their_structure_when_copied_out_of_the_graph():
    from collections import OrderedDict, namedtuple
    Pair = namedtuple("Pair", "a b")
    t = torch.ones(2)
    out = cg.copy_out({"logits": t, "extra": (t, [t, None]), "pair": Pair(t, 3), "od": OrderedDict(x=t)})
    assert isinstance(out["pair"], Pair) and out["pair"].b == 3 and isinstance(out["od"], OrderedDict)
    assert out["logits"].data_ptr() != t.data_ptr() and out["extra"][1][1] is None
    assert torch.equal(out["extra"][1][0], t)


def test_signatures_hold_shapes_dtypes_and_plain_values_and_refuse_other_objects():
    a = cg.signature((torch.zeros(2, 3),), {"flag": True})
    assert a == cg.signature((torch.ones(2, 3),), {"flag": True})
    assert a != cg.signature((torch.zeros(2, 4),), {"flag": True})
    assert a != cg.signature((torch.zeros(2, 3, dtype=torch.float16),), {"flag": True})
    assert a != cg.signature((torch.zeros(2, 3),), {"flag": False})
    assert cg.signature((torch.zeros(2, 3), [torch.zeros(1)]), {}) is None  # a list of tensors: not a static key


@pytest.mark.gpu
@pytest.mark.parametrize("autocast", [False, True])
def test_on_a_gpu_evaluation_calls_replay_as_cuda_graphs_and_match_eager(autocast):
    """Real captures: the replays' outputs are eager's, also for batches each run in their own autocast region (the
    cache of cast weights emptied between them)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import contextlib
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 8)).cuda().eval()
    item = {"variant": "cuda-graphs", "set": {"model": "Sequential"}}
    f = cg.GraphedForward(model.forward, item)
    xs = [torch.randn(16, 64, device="cuda") for _ in range(6)]

    def region():
        return torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    outs, want = [], []
    with torch.inference_mode():
        for x in xs:
            with region():
                outs.append(f(x))
            with region():
                want.append(model(x))
    assert item["set"]["graphed calls"] == 6 - cg.EAGER_CALLS and item["set"]["graphs"] == 1
    tol = 2e-2 if autocast else 1e-5
    assert all(torch.allclose(o.float(), w.float(), atol=tol) for o, w in zip(outs, want))


def test_calls_the_program_compiles_itself_are_left_to_the_compiler():
    """A main model the program runs under torch.compile: while dynamo traces it, the variant steps aside (no capture,
    nothing counted), so the program's compiled graph is its own."""
    calls = []
    model, f, item = _graphed(cpu_capture(calls))
    x = torch.randn(3, 8)
    compiled = torch.compile(lambda t: f(t), backend="eager", fullgraph=True)  # fullgraph: a break would raise
    with torch.no_grad():
        outs = [compiled(x) for _ in range(cg.EAGER_CALLS + 2)]  # past the calls after which it would capture
    assert all(torch.equal(o, model(x)) for o in outs) and calls == [] and item["set"]["left eager"] == {}
    assert f.seen == {}  # never even counted


def test_the_capture_leaves_the_programs_other_threads_alone(monkeypatch):
    """The capture asks CUDA to check only its own thread: in the default "global" mode a DataLoader's pin-memory
    thread pinning the next batch meanwhile was refused and the program died (H200, timm ViT-B/16 evaluation with
    ``pin_memory=True, num_workers=4``: "operation not permitted when stream is capturing" in the pin-memory thread).
    A stand-in for ``torch.cuda`` records how the capture was opened."""
    import contextlib
    opened = []

    class Stream:
        def wait_stream(self, other):
            pass

    class Graph:
        def replay(self):
            pass

    @contextlib.contextmanager
    def graph(g, stream=None, **kw):
        opened.append(kw)
        yield

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: Stream())
    replay, s_args, _, out = cg.cuda_capture(lambda x: x * 2, (torch.ones(2),), {})
    assert opened == [{"capture_error_mode": "thread_local"}]
    assert torch.equal(out, torch.full((2,), 2.0)) and torch.equal(s_args[0], torch.ones(2))


@pytest.mark.gpu
def test_on_a_gpu_a_capture_beside_a_pin_memory_thread_replays_and_the_loader_keeps_going():
    """The real case: evaluation batches from a DataLoader with workers and pinned memory (its pin-memory thread
    works while the main thread captures); every batch arrives and the calls after the warm-up replay."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from torch.utils.data import DataLoader, TensorDataset
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 8)).cuda().eval()
    item = {"variant": "cuda-graphs", "set": {"model": "Sequential"}}
    f = cg.GraphedForward(model.forward, item)
    dl = DataLoader(TensorDataset(torch.randn(64 * 40, 256)), batch_size=64, num_workers=2, pin_memory=True)
    n = 0
    with torch.inference_mode():
        for (x,) in dl:
            f(x.cuda(non_blocking=True))
            n += 1
    assert n == 40 and not item["set"].get("capture failed")
    assert item["set"]["graphed calls"] == 40 - cg.EAGER_CALLS
