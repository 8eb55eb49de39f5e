"""``nsighttc try --variant cuda-graphs``: the main model's evaluation calls replayed as CUDA graphs, one graph per
input signature, where that is safe; every other call runs as the program wrote it, and the record says why.

Why a variant of its own: a launch-bound evaluation loop (small batches, many small kernels: the host launches
them one by one while the GPU idles between them) is what CUDA graphs fix, and ``compile-reduce-overhead`` gets
there only through torch.compile (compilation, recompilation on every new shape, graph breaks). Capturing the
model's own kernels as they are (``torch.cuda.CUDAGraph``, PyTorch's "whole-network capture" recipe) needs no
compiler: the first calls of a signature run eagerly, one more warms up on the capture stream (cuBLAS workspaces and
cuDNN plans are made per stream, outside the capture), then the call is captured, and later calls copy their inputs
into the graph's static inputs and replay it.

Where it applies, and where it cannot (each counted in the record, ``item["set"]``):
- **Evaluation calls only**: autograd off (``torch.no_grad()``, ``torch.inference_mode()``). A training step's
  forward is not enough to graph: its backward and the optimizer's step would still be launched one by one, and
  capturing them needs the whole step's structure (``torch.cuda.make_graphed_callables``, whole-step capture with
  static optimizer state), which a variant applied from outside the program cannot know is safe. Those calls run
  eagerly ("training calls"); ``compile-reduce-overhead`` graphs them through the compiler.
- **Static signatures**: every tensor argument on the GPU, and the same shapes, dtypes and non-tensor arguments call
  after call. A signature seen fewer than ``EAGER_CALLS`` times is not captured; past ``MAX_GRAPHS`` signatures (each
  holds its own memory pool) new ones run eagerly ("shapes not static").
- **Not inside ``generate()``**: a growing KV cache changes shapes every token; ``static-cache`` is the experiment
  there.
- **Not inside the program's own graphs**: a call while torch.compile traces, or while the program captures a CUDA
  graph itself, runs as it is (and is not counted).
- **A capture that fails** (a host sync inside the forward: ``.item()``, ``nonzero``, a print of a GPU tensor; CPU
  work; data-dependent control flow) leaves that signature eager for the rest of the run, with PyTorch's reason.
- **Under the program's autocast** the capture runs with autocast's weight-cast cache off (the casts are then part
  of the graph, and no replay reads a cache the autocast region freed).
- **Outputs are copied out of the graph** on every replay: the next replay overwrites the graph's own outputs, and a
  loop that keeps a batch's logits (a list of predictions) would read the later batch's. The copy costs one kernel
  per output tensor.
- **The program's other threads keep working** while a call is captured: the capture checks only its own thread
  (``capture_error_mode="thread_local"``). In PyTorch's default ("global") mode, what another thread does meanwhile
  is refused: a DataLoader's pin-memory thread pinning the next batch failed with "operation not permitted when
  stream is capturing", and the program died (H200, timm ViT-B/16 evaluation, ``num_workers=4, pin_memory=True``).
The capture's time is reported apart (``capture_s``): like compilation, it is warm-up, not a step.
"""
from __future__ import annotations

import time

EAGER_CALLS = 2   # calls of a signature run as written before it is captured (allocator and autotuning settle)
MAX_GRAPHS = 8    # distinct signatures captured at most (each graph keeps its own memory pool)
TRAINING = "training calls (autograd on: the backward and optimizer step would stay eager)"
NOT_STATIC = f"calls whose shapes were not static (more than {MAX_GRAPHS} signatures)"
NOT_CUDA = "calls with a tensor argument off the GPU, or without CUDA"
IN_GENERATE = "calls from transformers' generate() (use static-cache)"
CAPTURE_FAILED = "calls of a signature whose capture failed"
# Which CUDA calls a capture refuses: only the capturing thread's (not the program's pin-memory, prefetch or logging
# threads, which the default "global" mode fails: the pin-memory thread's cudaHostAlloc, H200, torch 2.11).
CAPTURE_MODE = "thread_local"


def signature(args: tuple, kwargs: dict):
    """The call's key (tensors by shape, dtype, device and strides; other arguments by value), or None where an
    argument is neither a tensor nor a plain value the key can hold (a cache object, a list of tensors)."""
    import torch
    out = []
    for name, value in [(i, a) for i, a in enumerate(args)] + sorted(kwargs.items()):
        if isinstance(value, torch.Tensor):
            out.append((name, "T", tuple(value.shape), str(value.dtype), str(value.device), value.stride()))
        elif value is None or isinstance(value, (bool, int, float, str)):
            out.append((name, "V", value))
        else:
            return None
    return tuple(out)


def on_gpu(args: tuple, kwargs: dict) -> bool:
    """CUDA is there, and every tensor argument is on the GPU (there is one at least)."""
    import torch
    if not torch.cuda.is_available():
        return False
    tensors = [v for v in list(args) + list(kwargs.values()) if isinstance(v, torch.Tensor)]
    return bool(tensors) and all(t.is_cuda for t in tensors)


class _Graph:
    """One captured signature: its static inputs (the tensors the graph reads) and outputs."""
    __slots__ = ("replay", "inputs", "kw_inputs", "outputs")

    def __init__(self, replay, inputs: tuple, kw_inputs: dict, outputs):
        self.replay, self.inputs, self.kw_inputs, self.outputs = replay, inputs, kw_inputs, outputs


def cuda_capture(fn, args: tuple, kwargs: dict):
    """Capture ``fn(*args, **kwargs)`` as a CUDA graph on a side stream, after one warm-up call there: returns
    ``(replay, static_args, static_kwargs, static_outputs)``. Raises what the capture raised."""
    import torch
    static_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
    static_kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with _uncached_autocast():
        with torch.cuda.stream(stream):
            fn(*static_args, **static_kwargs)  # warm-up on the capture's stream: its per-stream workspaces exist
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream, capture_error_mode=CAPTURE_MODE):
            outputs = fn(*static_args, **static_kwargs)
    return graph.replay, static_args, static_kwargs, outputs


def _uncached_autocast():
    """Inside the program's autocast: the same autocast with its weight-cast cache off. With the cache, the capture
    would read the warm-up's cast weights (made outside the graph's memory) instead of casting them in the graph, and
    a replay after the autocast region ended (which empties the cache) would read freed memory: PyTorch asks for
    ``cache_enabled=False`` around captures (``torch.cuda.make_graphed_callables``)."""
    import contextlib
    import torch
    try:
        on = torch.is_autocast_enabled("cuda")
        dtype = torch.get_autocast_dtype("cuda")
    except TypeError:  # an older torch: the CUDA autocast has its own functions
        on, dtype = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
    return torch.autocast("cuda", dtype=dtype, cache_enabled=False) if on else contextlib.nullcontext()


def copy_out(outputs):
    """The outputs with every tensor cloned (tuples, lists, dicts and ``transformers``' ModelOutput kept as they are)."""
    import torch
    if isinstance(outputs, torch.Tensor):
        return outputs.clone()
    if isinstance(outputs, dict):  # (ModelOutput is an OrderedDict: a copy of the same class)
        out = outputs.__class__(**{k: copy_out(v) for k, v in outputs.items()}) if _rebuildable(outputs) else \
            {k: copy_out(v) for k, v in outputs.items()}
        return out
    if isinstance(outputs, tuple) and hasattr(outputs, "_fields"):  # a namedtuple
        return outputs.__class__(*(copy_out(v) for v in outputs))
    if isinstance(outputs, (tuple, list)):
        return outputs.__class__(copy_out(v) for v in outputs)
    return outputs


def _rebuildable(d) -> bool:
    try:
        d.__class__(**{})
        return True
    except Exception:
        return False


class GraphedForward:
    """The main model's ``forward`` with its evaluation calls replayed as CUDA graphs (see the module docstring).
    ``item``: the variant's record (``variants.Applied``); ``capture``: how a signature is captured (``cuda_capture``;
    tests give one that runs on the CPU); ``in_generate``: whether a call comes from ``generate()``; ``placed``: whether
    a call's arguments are where the capture can take them (``on_gpu``)."""

    def __init__(self, forward, item: dict, capture=cuda_capture, in_generate=lambda: False, placed=on_gpu):
        self.forward, self.item, self.capture, self.in_generate, self.placed = forward, item, capture, in_generate, placed
        self.seen: dict = {}       # signature -> eager calls so far
        self.graphs: dict = {}     # signature -> _Graph
        self.failed: dict = {}     # signature -> why its capture failed
        st = item["set"]
        st.setdefault("graphed calls", 0)
        st.setdefault("graphs", 0)
        st.setdefault("capture_s", 0.0)
        st.setdefault("left eager", {})

    def _eager(self, why: str, args, kwargs):
        left = self.item["set"]["left eager"]
        left[why] = left.get(why, 0) + 1
        return self.forward(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        import torch
        if _compiling() or _capturing():  # the program's own torch.compile tracing, or its own graph capture
            return self.forward(*args, **kwargs)
        if torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
            return self._eager(TRAINING, args, kwargs)
        if self.in_generate():
            return self._eager(IN_GENERATE, args, kwargs)
        if not self.placed(args, kwargs):
            return self._eager(NOT_CUDA, args, kwargs)
        key = signature(args, kwargs)
        if key is None:
            return self._eager(NOT_STATIC, args, kwargs)
        # (inference mode apart: a graph captured there has inference tensors as its inputs, which a call under
        # no_grad alone may not write into)
        key = (torch.is_inference_mode_enabled(), key)
        g = self.graphs.get(key)
        if g is not None:
            return self._replay(g, args, kwargs)
        if key in self.failed:
            return self._eager(CAPTURE_FAILED, args, kwargs)
        n = self.seen.get(key, 0)
        if n < EAGER_CALLS:
            self.seen[key] = n + 1
            return self.forward(*args, **kwargs)  # (warm-up of this signature: not counted as left eager)
        if len(self.graphs) >= MAX_GRAPHS:
            return self._eager(NOT_STATIC, args, kwargs)
        t0 = time.perf_counter()
        try:
            replay, s_args, s_kwargs, outputs = self.capture(self.forward, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - the program goes on eagerly; the record says why
            self.failed[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            self.item["set"].setdefault("capture failed", {})[str(len(self.failed))] = self.failed[key]
            return self._eager(CAPTURE_FAILED, args, kwargs)
        finally:
            self.item["set"]["capture_s"] = round(self.item["set"]["capture_s"] + time.perf_counter() - t0, 4)
        g = self.graphs[key] = _Graph(replay, s_args, s_kwargs, outputs)
        self.item["set"]["graphs"] = len(self.graphs)
        return self._replay(g, args, kwargs)

    def _replay(self, g: _Graph, args, kwargs):
        import torch
        for static, given in zip(g.inputs, args):
            if isinstance(static, torch.Tensor) and static.data_ptr() != given.data_ptr():
                static.copy_(given)
        for k, static in g.kw_inputs.items():
            given = kwargs[k]
            if isinstance(static, torch.Tensor) and static.data_ptr() != given.data_ptr():
                static.copy_(given)
        g.replay()
        self.item["set"]["graphed calls"] += 1
        return copy_out(g.outputs)


def _compiling() -> bool:
    try:
        import torch
        return bool(torch.compiler.is_compiling())
    except Exception:  # noqa: BLE001 - a torch without it compiles nothing we could be inside of
        return False


def _capturing() -> bool:
    try:
        import torch
        return torch.cuda.is_available() and bool(torch.cuda.is_current_stream_capturing())
    except Exception:  # noqa: BLE001
        return False


def not_applied(st: dict) -> str | None:
    """Why the variant, applied to the main model, changed nothing in this run (no call was replayed as a graph), or
    None (``variants._applied`` says why when no main model was found)."""
    if st.get("graphed calls"):
        return None
    left = st.get("left eager") or {}
    if not left and not st.get("graphs"):
        return "the main model was called too few times to capture a graph"
    return "no call was replayed as a CUDA graph: " + "; ".join(f"{n} {why}" for why, n in
                                                                  sorted(left.items(), key=lambda kv: -kv[1]))
