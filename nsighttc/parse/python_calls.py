"""The Python calls a torch.profiler trace recorded with ``with_stack=True`` carries, as a source of host stacks for
"where the host time went" (``analysis.timeline.host_frames``), for recordings made without nsighttc's sampler.

Each ``python_function`` event is one call: ``name`` ``path(LINE): function`` (torch 2.11-2.13 write the function's
first line, not the line it was at, and paths cut at their ``sys.path`` entry: ``torch/nn/modules/module.py``,
``train.py``), ``args`` ``Python id`` and ``Python parent id`` (the caller). ``<built-in function sleep>`` and
``<built-in method item of Tensor ...>`` are calls into C. The stack at a moment is the innermost call open then and
its callers; ``stacks_at`` finds it for many moments at once: the last call started on the thread, walked up to its
first caller still open, in numpy over all moments together (one step per level of the stack).

Seen on torch 2.13 (CPU): a 5-step loop recorded ``with_stack=True`` holds 543 such events
(tests/runtime/test_host_samples.py records one).
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import textio
from .host_samples import LIBRARY, OWN, STDLIB, TOOL, HostSamples

MARKER = b'"python_function"'
HEAD_BYTES = 1 << 22     # a with_stack trace holds python_function events from its first megabytes on
_NAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<function>.*)$")
MAX_MOMENTS = 20_000     # moments read per scope: one per ~idle/20000 of idle time


def present(path: Path) -> bool:
    return MARKER in textio.head_bytes(Path(path), HEAD_BYTES)


# "<built-in method copy_ of Tensor object at 0x7ed6e00c44a0>": the address differs run to run and says nothing to a
# reader (a headline of SGLang's public decode trace, AMD's TraceLens tests)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+$")


def read(path: Path) -> HostSamples | None:
    """The trace's Python calls (None without any)."""
    import ijson
    tid, ts, dur, name, pyid, parent = [], [], [], [], [], []
    from .kineto import events_prefix
    with textio.open_binary(Path(path)) as fh:
        for ev in ijson.items(fh, events_prefix(Path(path)), use_float=True):
            if not isinstance(ev, dict) or ev.get("cat") != "python_function" or ev.get("ph") != "X":
                continue
            a = ev.get("args") or {}
            tid.append(ev.get("tid")); ts.append(ev.get("ts")); dur.append(ev.get("dur") or 0.0)
            name.append(str(ev.get("name", ""))); pyid.append(a.get("Python id")); parent.append(a.get("Python parent id"))
    if not ts:
        return None
    codes, uniq = pd.factorize(pd.Series(name, dtype=object))
    rows = []
    for u in uniq:
        m = _NAME.match(u)
        if m:
            rows.append([m["file"], m["function"], int(m["line"]), recorded_kind(m["file"]), ""])
        else:  # <built-in function sleep>: a call into C, named as Python names it (less the object's address)
            rows.append(["<built-in>", _ADDRESS.sub("", u.strip("<>")), 0, STDLIB, ""])
    frames = pd.DataFrame(rows, columns=["file", "function", "line", "kind", "source"])
    # one frame per name once the addresses are gone (the same method of two objects)
    key = frames["file"] + "\x00" + frames["function"] + "\x00" + frames["line"].astype(str)
    once, _ = pd.factorize(key)
    frames, codes = frames.loc[~key.duplicated()].reset_index(drop=True), once[codes]
    ids = pd.to_numeric(pd.Series(pyid), errors="coerce").to_numpy()
    par = pd.to_numeric(pd.Series(parent), errors="coerce").to_numpy()
    index_of = pd.Series(np.arange(len(ids)), index=ids)
    index_of = index_of[~index_of.index.duplicated()]
    parent_idx = index_of.reindex(par).fillna(-1).to_numpy(dtype=np.int64)
    start = np.asarray(ts, dtype="float64") * 1e3  # µs -> ns, as parse.kineto reads the trace's other events
    tids = pd.to_numeric(pd.Series(tid), errors="coerce").fillna(-1).to_numpy(dtype=np.int64)
    calls = pd.DataFrame({"tid": tids, "start_ns": start, "end_ns": start + np.asarray(dur, dtype="float64") * 1e3,
                          "frame": codes, "parent": parent_idx})
    return HostSamples("torch.profiler with_stack", frames, [], pd.DataFrame({"t_ns": [], "tid": [], "stack": [],
                                                                              "dt_ns": []}),
                       int(pd.Series(tids).value_counts().index[0]), placed=True, calls=calls)


def recorded_kind(file: str) -> str:
    """A frame's kind from a path torch.profiler cut at its ``sys.path`` entry: the standard library and installed
    packages by their top-level name (as importable here, or the usual ones), else the program's own."""
    if file.startswith("<") or "nsighttc/" in file.replace("\\", "/"):
        return TOOL
    if "site-packages" in file or "dist-packages" in file:
        return LIBRARY
    top = file.replace("\\", "/").lstrip("/").split("/", 1)[0].removesuffix(".py")
    if top in sys.stdlib_module_names:
        return STDLIB
    if not file.startswith("/"):
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        origin = getattr(spec, "origin", None) or ""
        if spec is not None and ("site-packages" in origin or "dist-packages" in origin):
            return LIBRARY
        if top in KNOWN_LIBRARIES:
            return LIBRARY
    return OWN


# Packages the programs we see import, recognised where they are not installed (a trace analysed on another machine)
KNOWN_LIBRARIES = frozenset({"torch", "torchvision", "torchaudio", "transformers", "accelerate", "lightning",
                             "pytorch_lightning", "timm", "datasets", "numpy", "PIL", "tqdm", "wandb", "tensorboard",
                             "deepspeed", "apex", "triton", "peft", "trl", "safetensors", "tokenizers", "huggingface_hub"})


def moments(starts: np.ndarray, ends: np.ndarray, n: int = MAX_MOMENTS) -> np.ndarray:
    """Evenly spaced moments over the total length of the intervals (sorted, disjoint): each stands for the same
    share of their time, as samples of a periodic sampler do."""
    lengths = np.maximum(ends - starts, 0.0)
    total = float(lengths.sum())
    if total <= 0:
        return np.array([])
    step = total / n
    grid = (np.arange(n) + 0.5) * step
    cum = np.cumsum(lengths)
    i = np.searchsorted(cum, grid, side="right")
    i = np.clip(i, 0, len(starts) - 1)
    before = cum[i] - lengths[i]
    return starts[i] + (grid - before)


def stacks_at(hs: HostSamples, t: np.ndarray, tid: int) -> HostSamples:
    """``hs`` with one sample per moment ``t`` on thread ``tid``: the calls open then, innermost first."""
    c = hs.calls
    on = (c["tid"].to_numpy() == tid)
    if not on.any() or not len(t):
        hs.samples = pd.DataFrame({"t_ns": np.asarray(t, dtype="float64"), "tid": np.full(len(t), tid),
                                   "stack": np.zeros(len(t), dtype=np.int64), "dt_ns": np.ones(len(t))})
        hs.stacks = [np.array([], dtype=np.int64)]
        return hs
    idx = np.nonzero(on)[0]
    order = idx[np.argsort(c["start_ns"].to_numpy()[idx], kind="stable")]
    start, end = c["start_ns"].to_numpy(), c["end_ns"].to_numpy()
    parent, frame = c["parent"].to_numpy(), c["frame"].to_numpy()
    k = np.searchsorted(start[order], t, side="right") - 1
    cur = np.where(k >= 0, order[np.clip(k, 0, None)], -1)
    # walk up from the last call started to the first one still open at t (one numpy step per level)
    for _ in range(512):
        closed = (cur >= 0) & (end[np.clip(cur, 0, None)] <= t)
        if not closed.any():
            break
        cur = np.where(closed, parent[np.clip(cur, 0, None)], cur)
    chains = [[] for _ in range(len(t))]
    level = cur.copy()
    for _ in range(512):  # collect each moment's frames, innermost first
        live = level >= 0
        if not live.any():
            break
        for i in np.nonzero(live)[0].tolist():
            chains[i].append(int(frame[level[i]]))
        level = np.where(live, parent[np.clip(level, 0, None)], -1)
    stack_ids: dict[tuple, int] = {}
    stacks: list[np.ndarray] = []
    sid = np.empty(len(t), dtype=np.int64)
    for i, ch in enumerate(chains):
        key = tuple(ch)
        j = stack_ids.get(key)
        if j is None:
            j = stack_ids[key] = len(stacks)
            stacks.append(np.asarray(ch, dtype=np.int64))
        sid[i] = j
    hs.stacks = stacks
    # (evenly spaced moments of the idle time: each stands for as much of it as any other)
    hs.samples = pd.DataFrame({"t_ns": np.asarray(t, dtype="float64"), "tid": np.full(len(t), tid), "stack": sid,
                               "dt_ns": np.ones(len(t))})
    hs.interval_ns = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    hs.span_ns = 0.0
    return hs
