"""torch.profiler (Kineto) chrome traces (``.json`` / ``.json.gz``) -> kernel table + Timeline.

Events used (``traceEvents``, complete events ``ph: X``, timestamps in µs):
``kernel``, ``gpu_memcpy``, ``gpu_memset`` (GPU side, ``args.correlation``, ``args.device``),
``cuda_runtime`` / ``cuda_driver`` (host API calls with the same correlation ids), and
``user_annotation`` (``record_function`` labels, including ``ProfilerStep#N``). ``ac2g`` flow events
repeat the correlation ids and are not needed. ``deviceProperties`` names the GPUs.

Traces of long runs reach gigabytes, so the file is streamed with ijson (C backend) and only the fields
we use are kept per event: memory grows with the number of GPU events, not with the file's size.
"""
from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ParseError
from ..model import conform
from . import Parsed, textio
from .sniff import Kind
from .timeline import (API_COLUMNS, GPU_OP_COLUMNS, RANGE_COLUMNS, Timeline, attribute_ranges, nest_paths, sanitize,
                       strip_api_version)

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
API_CATS = {"cuda_runtime", "cuda_driver"}
RANGE_CATS = {"user_annotation"}
_MEMCPY_NAME = re.compile(r"Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")


def _open(path: Path):
    return gzip.open(path, "rb") if textio.is_gzip(path) else path.open("rb")


def _events(path: Path):
    try:
        import ijson  # C backend when available: fast and constant memory per event
    except ImportError:  # small traces still work with the standard library
        import json
        with _open(path) as fh:
            doc = json.load(fh)
        if not isinstance(doc, dict) or "traceEvents" not in doc:
            raise ParseError("JSON without 'traceEvents': not a torch.profiler/chrome trace", path)
        yield from doc["traceEvents"]
        return
    with _open(path) as fh:
        yield from ijson.items(fh, "traceEvents.item", use_float=True)


def _has_trace_events(path: Path) -> bool:
    import ijson
    with _open(path) as fh:
        for prefix, event, value in ijson.parse(fh):
            if prefix == "" and event == "map_key" and value == "traceEvents":
                return True
            if prefix == "" and event == "start_array":
                return False
    return False


MAX_DEPTH = 64            # Kineto traces nest 4 deep; a streaming parser pays per level on every value
DEPTH_SCAN_BYTES = 64 << 20


def _check_depth(path: Path) -> None:
    """Refuse absurd nesting before streaming: ``[[[[...]]]]`` 100,000 deep (200 KB) kept ijson busy for
    minutes (its item prefixes grow with the depth). Brackets inside strings (kernel names with
    ``[lambda]``) are balanced in practice and far below the limit. Vectorised over the first 64 MB."""
    depth = 0
    with _open(path) as fh:
        left = DEPTH_SCAN_BYTES
        while left > 0:
            chunk = fh.read(min(left, 8 << 20))
            if not chunk:
                return
            left -= len(chunk)
            b = np.frombuffer(chunk, dtype=np.uint8)
            step = ((b == 91) | (b == 123)).astype(np.int64) - ((b == 93) | (b == 125)).astype(np.int64)
            run = depth + np.cumsum(step)
            if len(run) and run.max() > MAX_DEPTH:
                raise ParseError(f"JSON nested more than {MAX_DEPTH} levels deep: not a torch.profiler trace", path)
            depth = int(run[-1]) if len(run) else depth


def read(path: Path) -> Parsed:
    gpu, api, rng = {k: [] for k in ("cat", "name", "ts", "dur", "corr", "device", "stream", "bytes", "grid", "block", "pid")}, \
        {k: [] for k in ("name", "ts", "dur", "corr", "pid", "tid")}, {k: [] for k in ("name", "ts", "dur", "pid", "tid")}
    props: dict = {}
    n_events = 0
    try:
        _check_depth(path)
        for ev in _events(path):
            n_events += 1
            if not isinstance(ev, dict):
                continue
            cat = ev.get("cat")
            if ev.get("ph") != "X" or cat is None:
                continue
            if cat in GPU_CATS:
                a = ev.get("args") or {}
                gpu["cat"].append(GPU_CATS[cat]); gpu["name"].append(ev.get("name", ""))
                gpu["ts"].append(ev.get("ts")); gpu["dur"].append(ev.get("dur", 0))
                gpu["corr"].append(a.get("correlation")); gpu["device"].append(a.get("device", ev.get("pid")))
                gpu["stream"].append(a.get("stream", ev.get("tid"))); gpu["bytes"].append(a.get("bytes"))
                gpu["grid"].append(a.get("grid")); gpu["block"].append(a.get("block")); gpu["pid"].append(None)
            elif cat in API_CATS:
                a = ev.get("args") or {}
                api["name"].append(ev.get("name", "")); api["ts"].append(ev.get("ts")); api["dur"].append(ev.get("dur", 0))
                api["corr"].append(a.get("correlation")); api["pid"].append(ev.get("pid")); api["tid"].append(ev.get("tid"))
            elif cat in RANGE_CATS:
                rng["name"].append(ev.get("name", "")); rng["ts"].append(ev.get("ts")); rng["dur"].append(ev.get("dur", 0))
                rng["pid"].append(ev.get("pid")); rng["tid"].append(ev.get("tid"))
    except ParseError:
        raise
    except Exception as exc:  # ijson.IncompleteJSONError, JSONError, gzip EOFError, ...
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParseError(f"truncated or malformed JSON ({msg})", path) from None
    if n_events == 0 and not _has_trace_events(path):
        raise ParseError("JSON without 'traceEvents': not a torch.profiler/chrome trace", path)
    props = _device_properties(path)
    return _build(path, gpu, api, rng, props, n_events)


def _device_properties(path: Path) -> dict[int, dict]:
    try:
        import ijson
        with _open(path) as fh:
            items = list(ijson.items(fh, "deviceProperties.item"))
    except Exception:
        return {}
    return {int(p.get("id", i)): {"name": p.get("name"),
                                  "compute_capability": f"{p.get('computeMajor')}.{p.get('computeMinor')}"
                                  if p.get("computeMajor") is not None else None}
            for i, p in enumerate(items) if isinstance(p, dict)}


def _us_to_ns(values: list) -> np.ndarray:
    return np.asarray(pd.to_numeric(pd.Series(values, dtype=object), errors="coerce"), dtype="float64") * 1e3


def _dims(values: list) -> pd.Series:
    return pd.Series([f"({v[0]}, {v[1]}, {v[2]})" if isinstance(v, list) and len(v) == 3 else None for v in values],
                     dtype=object)


def _build(path: Path, gpu: dict, api: dict, rng: dict, devices: dict, n_events: int) -> Parsed:
    g = pd.DataFrame({"kind": gpu["cat"], "name": gpu["name"], "start_ns": _us_to_ns(gpu["ts"]),
                      "dur_ns": _us_to_ns(gpu["dur"]), "correlation": pd.to_numeric(pd.Series(gpu["corr"], dtype=object)),
                      "device": pd.to_numeric(pd.Series(gpu["device"], dtype=object), errors="coerce"),
                      "stream": pd.Series(gpu["stream"], dtype=object).astype(str),
                      "bytes": pd.to_numeric(pd.Series(gpu["bytes"], dtype=object), errors="coerce")})
    a = pd.DataFrame({"name": api["name"], "start_ns": _us_to_ns(api["ts"]), "dur_ns": _us_to_ns(api["dur"]),
                      "correlation": pd.to_numeric(pd.Series(api["corr"], dtype=object)),
                      "pid": pd.Series(api["pid"], dtype=object), "tid": pd.Series(api["tid"], dtype=object)})
    api_df = pd.DataFrame({"pid": a["pid"], "tid": a["tid"], "start_ns": a["start_ns"],
                           "end_ns": a["start_ns"] + a["dur_ns"], "name": strip_api_version(a["name"].astype(str)),
                           "correlation": a["correlation"]}).reindex(columns=API_COLUMNS)
    # GPU events carry no host pid: take it from the launch call with the same correlation id.
    corr_pid = a.dropna(subset=["correlation"]).drop_duplicates("correlation").set_index("correlation")["pid"]
    g["pid"] = g["correlation"].map(corr_pid)
    r = pd.DataFrame({"pid": rng["pid"], "tid": rng["tid"], "start_ns": _us_to_ns(rng["ts"]),
                      "end_ns": _us_to_ns(rng["ts"]) + _us_to_ns(rng["dur"]), "name": rng["name"]})
    r = r.dropna(subset=["start_ns", "end_ns"]).reset_index(drop=True)
    r["path"] = nest_paths(r)
    ranges = r.reindex(columns=RANGE_COLUMNS)

    copy = g["name"].astype(str).str.extract(_MEMCPY_NAME)
    gpu_ops = pd.DataFrame({"device": g["device"], "start_ns": g["start_ns"], "end_ns": g["start_ns"] + g["dur_ns"],
                            "kind": g["kind"], "correlation": g["correlation"], "pid": g["pid"], "bytes": g["bytes"],
                            "copy_kind": copy[0].where(g["kind"] == "memcpy"),
                            "src_kind": copy[1].str.lower().where(g["kind"] == "memcpy"),
                            "stream": g["stream"]}).reindex(columns=GPU_OP_COLUMNS)

    kk = g[g["kind"] == "kernel"]
    grid = _dims([gpu["grid"][i] for i in kk.index])
    block = _dims([gpu["block"][i] for i in kk.index])
    kernels = pd.DataFrame({
        "source": "torch", "input": str(path),
        "launch_id": kk["correlation"].astype("Int64").to_numpy(),
        "name": kk["name"].to_numpy(), "duration_ns": kk["dur_ns"].to_numpy(), "start_ns": kk["start_ns"].to_numpy(),
        "stream": kk["stream"].to_numpy(), "device": kk["device"].astype("Int64").to_numpy(),
        "grid": grid.to_numpy(), "block": block.to_numpy(), "pid": kk["pid"].to_numpy(),
    })
    if devices:
        kernels["device_name"] = kernels["device"].map({d: v["name"] for d, v in devices.items()})
        kernels["cc"] = kernels["device"].map({d: v["compute_capability"] for d, v in devices.items()})
    kernels, gpu_ops, ranges, notes = sanitize(path, kernels, gpu_ops, api_df, ranges)
    kernels["nvtx"] = attribute_ranges(kernels, api_df, ranges)
    if gpu_ops.empty:
        notes.append(f"{path}: the trace holds no GPU events: the workload launched no GPU work "
                     "(or the profiler ran without ProfilerActivity.CUDA)")
    return Parsed(path, Kind.KINETO_JSON, conform(kernels), notes, Timeline("torch", gpu_ops, api_df, ranges, devices))
