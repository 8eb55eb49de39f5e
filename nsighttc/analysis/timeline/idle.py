"""Why was the GPU idle? Every idle moment gets one cause, read from what the host was doing then.

The GPU's idle time (gaps in the union of its activity) is cut into pieces at every boundary of the
host's ranges and blocking calls, so each piece has one innermost host range and one host state. A piece
is, in this order:

1. ``pageable-copy``: the host was inside the call of a pageable host-to-device copy (staged and
   blocking by CUDA's rules);
2. ``sync``: the host was blocked in a synchronising call (``cudaStreamSynchronize``, ``cudaMemcpy``...);
3. ``gpu-wait``: the work that ended the gap had been launched *before* the GPU went idle: the GPU, not
   the host, was waiting (another stream, an event, a graph dependency);
4. ``launch-overhead``: a short gap (< ``Thresholds.launch_gap_ns``) ended by work launched after the
   GPU went idle: the host could not launch as fast as the GPU ran (HTA's "host wait"); only where the
   launch call was traced;
5. ``host-range``: the host was in a range the user drew around host work (``data``, ``preprocess``:
   any range that is neither a step nor holds steps), named after it;
6. drained: a synchronising call had emptied the GPU's queue in this gap and the host then ran unnamed
   code. Had the host not waited, that code would have run while the GPU worked, so per scope the
   drained time is blamed on ``sync`` up to the GPU work the scope had to overlap it with, and the rest
   on the host code itself (``host-range``, the innermost range);
7. otherwise ``host-range``: host code in the innermost range, outside any child range.

Pieces are plain numpy arrays (a few per gap); scopes (a range path and everything under it, a step
family's steady iterations, the window) only sum them, so every range gets its own causes for the price
of a group-by.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...durations import duration
from ...parse.range_paths import _path_categorical, _segment_codes, paths_at
from ...parse.timeline import op_launch_calls
from ... import labels
from ...allocator import slices
from .. import intervals
from ..grouping import aggregate
from .base import SYNC_CALLS, Thresholds

KINDS = ("sync", "pageable-copy", "gpu-wait", "launch-overhead", "host-range", "drained")
SYNC, PAGEABLE, GPU_WAIT, LAUNCH, HOST, DRAINED = range(len(KINDS))


@dataclass
class HostCalls:
    """Whole-run tables of the host's blocking calls and copies, each with its time and range (path code)."""
    sync: pd.DataFrame       # t, ns, name, pc
    dtoh: pd.DataFrame       # t, pc
    pageable: pd.DataFrame   # t, call_end (the launching call), pc, bytes, ns (GPU time of the copy)


@dataclass
class Idle:
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray         # int8 index into KINDS
    pc: np.ndarray           # innermost range path code (index into paths), -1 = none
    first: np.ndarray        # the piece opens its gap (counts gaps)
    paths: np.ndarray        # object array of path strings
    calls: HostCalls

    def __post_init__(self):
        # What every scope reads, made once: a scope (a phase's steady steps, the window, the ranges twice) then
        # sums them through a mask, where each made its own (1M-kernel benchmark: ~0.1 s of ~0.3 s of scopes).
        # Pieces are disjoint and in time order, so their midpoints are sorted (``mids_in``).
        self.mid = (self.start + self.end) / 2
        self.ns = self.end - self.start
        self.code = None  # (path, kind) of each piece, once the kinds are final (``finish``)


def path_codes(paths: np.ndarray, values: pd.Series) -> np.ndarray:
    """Codes of path strings in ``paths`` ('' or unknown -> -1)."""
    return labels.codes_in(values, paths)


def host_calls(ops: pd.DataFrame, calls: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame,
               paths: np.ndarray) -> HostCalls:
    """Synchronising calls, device-to-host copies and pageable copies over the whole run, each attributed
    to the innermost range open when its host call started."""
    s = api[api["name"].isin(SYNC_CALLS).to_numpy()] if not api.empty else api
    sync = pd.DataFrame({"t": s["start_ns"].to_numpy(dtype="float64"),
                         "ns": (s["end_ns"] - s["start_ns"]).to_numpy(dtype="float64"),
                         "name": labels.strings(s["name"]),
                         "pc": path_codes(paths, paths_at(ranges, s["pid"], s["start_ns"]))})
    op_launch = calls["start_ns"].to_numpy()
    memcpy = (ops["kind"] == "memcpy").to_numpy()
    d = memcpy & (ops["copy_kind"] == "DtoH").to_numpy()
    p = memcpy & (ops["copy_kind"] == "HtoD").to_numpy() & (ops["src_kind"] == "pageable").to_numpy()

    def at(mask):
        t = pd.Series(op_launch[mask])
        return path_codes(paths, paths_at(ranges, pd.Series(ops["pid"].to_numpy()[mask]), t))
    dtoh = pd.DataFrame({"t": op_launch[d], "pc": at(d)})
    pg = ops[p]
    pageable = pd.DataFrame({"t": op_launch[p], "call_end": calls["end_ns"].to_numpy()[p], "pc": at(p),
                             "bytes": pg["bytes"].fillna(0).to_numpy(dtype="float64"),
                             "ns": (pg["end_ns"] - pg["start_ns"]).to_numpy(dtype="float64")})
    return HostCalls(sync, dtoh, pageable)


def pieces(u: intervals.Union, lo: float, hi: float, ops: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame,
           paths: np.ndarray, containers: set[str], th: Thresholds) -> Idle:
    """Cut the window's idle time into pieces and give each its cause (see the module docstring)."""
    return finish(cut(u, lo, hi, ops, api, ranges, paths, th), containers)


def finish(idle: Idle, containers: set[str]) -> Idle:
    """The one rule that needs the steps: drained time in a range the user drew around host work (neither a step
    nor a range holding steps, ``containers``) is that range's, not the sync's (rule 5 before rule 6). ``cut`` does
    the rest without the steps, so the analysis runs it beside finding them (``analysis.timeline``)."""
    named_path = np.array([bool(p) and p not in containers for p in idle.paths] + [False])
    for sl in slices(len(idle.kind)):
        k = idle.kind[sl]
        k[(k == DRAINED) & named_path[idle.pc[sl]]] = HOST   # pc -1 -> the trailing False
    idle.code = (idle.pc.astype(np.int32) + 1) * len(KINDS) + idle.kind
    return idle


def cut(u: intervals.Union, lo: float, hi: float, ops: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame,
        paths: np.ndarray, th: Thresholds) -> Idle:
    """The idle pieces with every cause but the one ``finish`` gives.

    Memory: a 4M-kernel trace has ~5M gaps and ~7.5M pieces, so every whole-run temporary is 30-60 MB. The
    steps below are helpers whose temporaries die when they return, piece indices are 32-bit, and the causes
    are written into one int8 array: the peak of this function fell by ~0.5 GB on that trace."""
    gs, ge = intervals.gaps(u, lo, hi) if hi > lo else (np.array([]), np.array([]))
    calls, queued_before, launch_ok = _gap_facts(gs, ge, ops, api, ranges, paths, th)
    # blocking host calls: synchronising calls, and the calls that launched pageable copies
    sync_u = intervals.union(calls.sync["t"].to_numpy(), (calls.sync["t"] + calls.sync["ns"]).to_numpy())
    page_u = intervals.union(calls.pageable["t"].to_numpy(), calls.pageable["call_end"].to_numpy())
    # a gap is drained when a blocking call ended inside it [gs, ge]: each end marks the gap that holds it
    ends = np.concatenate([sync_u.ends, page_u.ends])
    drained = np.zeros(len(gs), dtype=bool)
    if len(ends) and len(gs):
        i = np.searchsorted(ge, ends, side="left")  # the first gap ending at or after each end
        for j in (i, i + 1):  # (the next gap too: it starts where this one ends after a zero-length kernel)
            ok = j < len(gs)
            jj, e = j[ok], ends[ok]
            drained[jj[(gs[jj] <= e) & (e <= ge[jj])]] = True
    launch_ok &= ~drained

    seg_t, seg_c = _host_segments(api, ranges, paths)
    a, b, g = _cut_gaps(gs, ge, np.concatenate([seg_t, sync_u.starts, sync_u.ends, page_u.starts, page_u.ends]))
    first = a == gs[g]
    del gs, ge
    # per piece, its innermost range and its cause, a slice of pieces at a time: whole-run temporaries of
    # 7.5M pieces would be ~60 MB each. The first matching rule wins: rules are written from last to first
    # (``finish`` then gives drained time in a named host range to that range).
    kind = np.full(len(a), HOST, dtype=np.int8)
    pc = np.full(len(a), -1, dtype=np.int32)
    for sl in slices(len(a)):
        mid, gg, k = (a[sl] + b[sl]) / 2, g[sl], kind[sl]   # (sorted: pieces are disjoint, in time order)
        if len(seg_t):
            pos = intervals.sorted_count_at_or_before(seg_t, mid) - 1
            pc[sl] = np.where(pos >= 0, seg_c[np.clip(pos, 0, None)], -1)
        k[drained[gg]] = DRAINED
        k[launch_ok[gg]] = LAUNCH
        k[queued_before[gg]] = GPU_WAIT
        k[intervals.sorted_inside(mid, sync_u.starts, sync_u.ends)] = SYNC
        k[intervals.sorted_inside(mid, page_u.starts, page_u.ends)] = PAGEABLE
    return Idle(a, b, kind, pc, first, paths, calls)


def _gap_facts(gs: np.ndarray, ge: np.ndarray, ops: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame,
               paths: np.ndarray, th: Thresholds) -> tuple[HostCalls, np.ndarray, np.ndarray]:
    """The host's blocking calls, and per gap: was the op that ended it launched before the GPU went idle
    (``queued_before``), and is it a short gap ended by a traced launch made after (``launch_ok``, before
    the drained test)."""
    launch_calls = op_launch_calls(ops, api)
    calls = host_calls(ops, launch_calls, api, ranges, paths)
    op_launch = launch_calls["start_ns"].to_numpy()
    del launch_calls  # the calls' ends: only the host calls needed them
    o_start = ops["start_ns"].to_numpy(dtype="float64")
    order = np.argsort(o_start, kind="stable")
    if len(order) < 2**31:
        order = order.astype(np.int32)  # kept until the lookup below: half the bytes
    s_sorted = o_start[order]
    j = np.searchsorted(s_sorted, ge, side="left")
    if len(s_sorted):
        np.clip(j, 0, len(s_sorted) - 1, out=j)
        has_next = s_sorted[j] == ge   # the gap at the window's end has none
        del s_sorted
        next_launch = op_launch[order[j]]
        next_launch[~has_next] = np.nan
    else:
        has_next, next_launch = np.zeros(len(ge), dtype=bool), np.full(len(ge), np.nan)
    del order, j, op_launch
    queued_before = next_launch < gs                          # NaN (no next op, launch not traced) compares False
    launch_ok = ~np.isnan(next_launch) & ((ge - gs) < th.launch_gap_ns)  # without the launch call, no overhead
    return calls, queued_before, launch_ok


def _host_segments(api: pd.DataFrame, ranges: pd.DataFrame, paths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host ranges of the process that launches the work, as segment start times and the innermost range's
    position in ``paths`` (-1: none) from each start on."""
    main = _main_pid(api, ranges)
    mine = ranges[(ranges["pid"] == main).to_numpy()] if main is not None and not ranges.empty else ranges.iloc[0:0]
    if mine.empty:
        return np.array([]), np.array([], dtype=np.int32)
    seg_t, seg_c = _segment_codes(mine)
    if len(seg_c):  # range categories -> positions in ``paths``
        cat_pc = path_codes(paths, pd.Series(_path_categorical(mine).cat.categories, dtype=object))
        seg_c = np.where(seg_c >= 0, np.append(cat_pc, -1)[seg_c], -1)
    return seg_t, seg_c.astype(np.int32)


def _cut_gaps(gs: np.ndarray, ge: np.ndarray, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gaps [gs, ge) (sorted, disjoint) cut at every point of ``cuts`` that falls strictly inside one:
    piece starts, ends and gap index, in time order. With the inside cuts sorted (k-th cut in gap i_k),
    gap g's pieces are its start, then its cuts, so every piece's place is known without sorting the
    pieces: cut k starts piece k + i_k + 1 and ends piece k + i_k (4M-kernel trace: 0.10 s, against 0.4-0.6 s
    for one stable argsort of every edge and cut)."""
    if len(gs) == 0:
        return np.array([]), np.array([]), np.array([], dtype=np.int32)
    cuts = np.unique(cuts)  # sorted: the searches below walk forward
    i = np.searchsorted(gs, cuts, side="right") - 1
    inside = i >= 0
    inside[inside] = (cuts[inside] > gs[i[inside]]) & (cuts[inside] < ge[i[inside]])
    cuts, i = cuts[inside], i[inside]
    size = len(gs) + len(cuts)
    index = np.int32 if size < 2**31 else np.int64     # piece and gap numbers: half the bytes of int64
    n = np.bincount(i, minlength=len(gs)).astype(index)  # cuts per gap
    before = np.concatenate([[0], np.cumsum(n)]).astype(index)  # cuts in the gaps before each gap
    g = np.arange(len(gs), dtype=index)
    k = np.arange(len(cuts), dtype=index)
    i = i.astype(index)
    a, b = np.empty(size), np.empty(size)
    a[g + before[:-1]] = gs
    b[g + before[1:]] = ge
    a[k + i + 1] = cuts
    b[k + i] = cuts
    return a, b, np.repeat(g, n + 1)


def _main_pid(api: pd.DataFrame, ranges: pd.DataFrame):
    """The process that launches the GPU work (most API calls); its ranges describe the host's state."""
    src = api["pid"] if not api.empty else ranges["pid"] if not ranges.empty else None
    if src is None or src.dropna().empty:
        return None
    return src.mode().iloc[0]


# --- scopes ---------------------------------------------------------------------------------------
def in_intervals(t: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which times fall in one of the sorted, disjoint intervals [starts, ends): t is inside when it is before
    the end of the last interval starting at or before it (``ends`` padded with -inf for "none")."""
    out = np.zeros(len(t), dtype=bool)
    if len(starts) == 0:
        return out
    ends_pad = np.concatenate([[-np.inf], ends])
    for sl in slices(len(t)):
        out[sl] = t[sl] < ends_pad[np.searchsorted(starts, t[sl], side="right")]
    return out


def mids_in(idle: Idle, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which pieces have their midpoint in the sorted, disjoint intervals [starts, ends). The midpoints are sorted,
    so each interval holds a run of pieces: two searches per interval and one running sum mark them (1.5M pieces,
    a hundred thousand intervals: a few ms, against a search per piece)."""
    return intervals.sorted_inside(idle.mid, starts, ends)


@dataclass
class Scope:
    """What one scope (a range and its children, a step family's steady iterations) holds, per path code."""
    idle: pd.DataFrame       # pc, kind, ns, gaps
    sync: pd.DataFrame       # pc, name, calls, ns
    dtoh: int
    pageable: pd.DataFrame   # copies, bytes, ns (one row)


def scope_of(idle: Idle, piece_mask: np.ndarray | None, sync_mask: np.ndarray, dtoh_mask: np.ndarray,
             page_mask: np.ndarray) -> Scope:
    # (path, kind) sums with bincount: pieces can number millions, their (path, kind) pairs a few hundred;
    # ``piece_mask`` None: every piece
    # a slice of pieces at a time: 7.5M pieces made ~250 MB of masked copies per scope (nsys pieces are whole
    # nanoseconds, so the sums are exact; torch's fractional ones agree with one pass up to rounding)
    nk = len(KINDS)
    size = (len(idle.paths) + 1) * nk
    ns, gaps = np.zeros(size), np.zeros(size)
    everything = piece_mask is None
    for sl in slices(len(idle.start)):
        m = slice(None) if everything else piece_mask[sl]
        code = idle.code[sl][m]
        ns += np.bincount(code, weights=idle.ns[sl][m], minlength=size)
        gaps += np.bincount(code, weights=idle.first[sl][m], minlength=size)
    hit = np.flatnonzero((ns > 0) | (gaps > 0))
    t = pd.DataFrame({"pc": hit // nk - 1, "kind": (hit % nk).astype(np.int8), "ns": ns[hit], "gaps": gaps[hit]})
    c = idle.calls
    s = c.sync[sync_mask]
    pg = c.pageable[page_mask]
    return Scope(t,
                 aggregate(s.groupby(["pc", "name"]), calls=("ns", "size"), ns=("ns", "sum")).reset_index(),
                 int(dtoh_mask.sum()),
                 pd.DataFrame({"copies": [len(pg)], "bytes": [float(pg["bytes"].sum())], "ns": [float(pg["ns"].sum())]}))


def time_scope(idle: Idle, starts: np.ndarray, ends: np.ndarray) -> Scope:
    """Everything inside the sorted, disjoint intervals (steady iterations of a family, the window)."""
    c = idle.calls
    return scope_of(idle, mids_in(idle, starts, ends),
                    in_intervals(c.sync["t"].to_numpy(), starts, ends), in_intervals(c.dtoh["t"].to_numpy(), starts, ends),
                    in_intervals(c.pageable["t"].to_numpy(), starts, ends))


def range_scopes(idle: Idle, names: list[str], warm: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Scope]:
    """One scope per range path: the pieces and calls whose innermost range is the path or lies under it.
    Pieces inside warm-up iterations (``warm``: sorted disjoint intervals) are left out, as for families:
    causes describe the steady state."""
    paths = idle.paths
    prefix_rows = [(i, "/".join(p.split("/")[:k + 1])) for i, p in enumerate(paths) if p
                   for k in range(p.count("/") + 1)]
    m = pd.DataFrame(prefix_rows, columns=["pc", "range"])
    m = m[m["range"].isin(set(names))]
    c = idle.calls
    keep = ~mids_in(idle, *warm) if warm is not None and len(warm[0]) else None
    base = scope_of(idle, keep, np.ones(len(c.sync), dtype=bool),
                    np.ones(len(c.dtoh), dtype=bool), np.ones(len(c.pageable), dtype=bool))
    idle_g = {k: g for k, g in base.idle.merge(m, on="pc").groupby("range")}
    sync_g = {k: g for k, g in base.sync.merge(m, on="pc").groupby("range")}
    dtoh_g = c.dtoh.merge(m, on="pc").groupby("range").size().to_dict()
    pg = aggregate(c.pageable.merge(m, on="pc").groupby("range"), copies=("ns", "size"), bytes=("bytes", "sum"),
                   ns=("ns", "sum"))
    empty_idle = base.idle.iloc[0:0]
    empty_sync = base.sync.iloc[0:0]
    out = {}
    for n in names:
        prow = pg.loc[[n]] if n in pg.index else pd.DataFrame({"copies": [0], "bytes": [0.0], "ns": [0.0]})
        out[n] = Scope(idle_g.get(n, empty_idle), sync_g.get(n, empty_sync), int(dtoh_g.get(n, 0)),
                       prow.reset_index(drop=True))
    return out


# --- causes ---------------------------------------------------------------------------------------
def _ms(x: float) -> str:
    return duration(x)


def _per_pc(pcs: np.ndarray, kinds: np.ndarray, ns: np.ndarray, kind: int) -> dict[int, float]:
    """{path code: idle ns} of one kind (the sum, should a scope hold a range's kind twice)."""
    out: dict[int, float] = {}
    m = kinds == kind
    for pc, v in zip(pcs[m].tolist(), ns[m].tolist()):
        out[pc] = out.get(pc, 0.0) + v
    return out


def causes(sc: Scope, busy_ns: float, paths: np.ndarray, rinfo: dict[str, dict] | None = None) -> list[dict]:
    """The scope's causes of idle GPU time, ``{kind, name, idle_ns, detail}``, largest first."""
    rinfo = rinfo or {}
    by_kind = sc.idle.groupby("kind")["ns"].sum().to_dict() if not sc.idle.empty else {}
    out: list[dict] = []
    # per range of one kind: a scope holds one row per (range, kind) (``scope_of``, ``range_scopes``), so these
    # are the rows' own values, read without a groupby per kind (this runs once per range and step family)
    pcs, kinds, nss = (sc.idle[k].to_numpy() for k in ("pc", "kind", "ns"))
    host = _per_pc(pcs, kinds, nss, HOST)
    drained_ns = float(by_kind.get(DRAINED, 0.0))
    sync_drained = min(drained_ns, max(busy_ns, 0.0))
    rest = drained_ns - sync_drained
    if rest > 0:  # host code that no overlap could have hidden: blame it, per range, in proportion
        for pc, ns in sorted(_per_pc(pcs, kinds, nss, DRAINED).items()):
            host[pc] = host.get(pc, 0.0) + rest * ns / drained_ns
    for pc, ns in sorted(host.items(), key=lambda x: -x[1]):
        if ns <= 0:
            continue
        path = str(paths[pc]) if pc >= 0 else NO_RANGE
        info = rinfo.get(path)
        if info and info.get("leaf_work"):
            detail = (f"the GPU idled {_ms(ns)} while the host worked in `{path}` ({info['count']} × median "
                      f"{_ms(info['median_wall_ns'])} with the GPU busy {100 * info['gpu_busy_share']:.1f}%)")
        elif pc < 0:
            detail = (f"the GPU idled {_ms(ns)} while the host ran code outside any range (name that host work "
                      "with `nsighttc.annotate.range(...)` to see which)")
        else:
            detail = f"the GPU idled {_ms(ns)} while the host ran code in `{path}` outside any child range"
        out.append({"kind": "host-range", "name": path, "idle_ns": float(ns), "detail": detail})
    blocked = float(by_kind.get(SYNC, 0.0))
    if not sc.sync.empty or blocked or sync_drained:
        calls = int(sc.sync["calls"].sum()) if not sc.sync.empty else 0
        names = sc.sync.groupby("name")["calls"].sum().sort_values(ascending=False) if not sc.sync.empty else pd.Series(dtype=int)
        host_ns = float(sc.sync["ns"].sum()) if not sc.sync.empty else 0.0
        where = sc.sync.groupby("pc")["calls"].sum().sort_values(ascending=False) if not sc.sync.empty else pd.Series(dtype=int)
        top = ", ".join(f"`{paths[pc] if pc >= 0 else '(no range)'}` ×{n}" for pc, n in where.head(3).items())
        out.append({"kind": "sync", "name": ", ".join(names.index) or "synchronising calls",
                    "idle_ns": blocked + sync_drained,
                    "detail": f"{calls} synchronising calls ({', '.join(f'{k} ×{v}' for k, v in names.items())})"
                              f"{' in ' + top if top else ''}, {sc.dtoh} device-to-host copies; the host was blocked "
                              f"{_ms(host_ns)}, and the GPU idled {_ms(blocked + sync_drained)} while the host was blocked "
                              "or after the call had emptied its queue"})
    n_launch = int(sc.idle["gaps"].to_numpy()[kinds == LAUNCH].sum()) if not sc.idle.empty else 0
    if by_kind.get(LAUNCH):
        ns = float(by_kind[LAUNCH])
        out.append({"kind": "launch-overhead", "name": "kernel launches", "idle_ns": ns,
                    "detail": f"{n_launch:,} idle gaps shorter than 100 µs, each ended by work the host launched "
                              f"after the GPU had gone idle (mean gap {ns / max(n_launch, 1) / 1e3:.1f} µs)"})
    pg = sc.pageable.iloc[0] if not sc.pageable.empty else None
    if by_kind.get(PAGEABLE) or (pg is not None and pg["copies"]):
        ns = float(by_kind.get(PAGEABLE, 0.0))
        out.append({"kind": "pageable-copy", "name": "pageable host-to-device copies", "idle_ns": ns,
                    "detail": f"{int(pg['copies']) if pg is not None else 0} copies, "
                              f"{(pg['bytes'] if pg is not None else 0) / 1e6:.3g} MB from pageable memory; the GPU "
                              f"idled {_ms(ns)} while the host was staging them"})
    if by_kind.get(GPU_WAIT):
        ns = float(by_kind[GPU_WAIT])
        out.append({"kind": "gpu-wait", "name": "launched work waiting", "idle_ns": ns,
                    "detail": f"the GPU idled {_ms(ns)} with the next work already launched (a dependency on "
                              "another stream, an event, or between the nodes of a CUDA graph)"})
    return sorted(out, key=lambda c: -c["idle_ns"])


def frame_words(frame: dict) -> str:
    """A host frame (``host_frames``) in words: `function` (file:line) → what it calls."""
    text = f"`{frame['frame']}` ({frame['file']}:{frame['line']})"
    return text + (f" → `{frame['calls']}`" if frame.get("calls") else "")


NO_RANGE = "(no range)"  # host work the recording puts in no range (a program, or a recording, without any)


def headline(causes_: list[dict], verdict: str) -> str | None:
    """One line for the verdict's headline: the first cause and its share of the idle time."""
    if verdict not in ("cpu-bound", "mixed") or not causes_ or causes_[0]["idle_ns"] <= 0:
        return None
    c = causes_[0]
    share = c["idle_ns"] / (sum(x["idle_ns"] for x in causes_) or 1.0)
    waiting = any(x["kind"] == "communication" for x in causes_)  # a rank: idle of compute, not of the GPU
    of = f"{100 * share:.0f}% of the GPU's {'time without compute' if waiting else 'idle time'}"
    if c["kind"] == "host-range" and c.get("frames"):  # the host's stacks say where, not the range around it
        return f"host busy in {frame_words(c['frames'][0])} ({of}, {_ms(c['idle_ns'])})"
    if c["kind"] == "host-range":
        where = "outside any range" if c["name"] == NO_RANGE else f"in `{c['name']}`"
        return f"host busy {where} ({of}, {_ms(c['idle_ns'])})"
    if c["kind"] == "launch-overhead":
        return f"launch overhead ({of}: {c['detail']})"
    if c["kind"] == "communication":
        return f"waiting in communication not overlapped by compute ({of}, {_ms(c['idle_ns'])}): another rank is late, or the transfers are not overlapped"
    if c["kind"] == "sync":
        at = f" at {frame_words(c['frames'][0])}" if c.get("frames") else ""
        return f"synchronising calls ({c['name']}){at} emptied the GPU's queue ({of}, {_ms(c['idle_ns'])})"
    return f"{c['detail']} ({of})"
