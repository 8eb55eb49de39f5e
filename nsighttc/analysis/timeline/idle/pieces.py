"""The window's idle time cut into pieces, each with one cause (the package's docstring says which, in what order)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ....parse.range_paths import _path_categorical, _segment_codes, paths_at
from ....parse.timeline import op_launch_calls
from .... import labels
from ....allocator import slices
from ... import intervals
from ..base import SYNC_CALLS, Thresholds, device_to_host

KINDS = ("sync", "pageable-copy", "gpu-wait", "launch-overhead", "host-range", "drained")
SYNC, PAGEABLE, GPU_WAIT, LAUNCH, HOST, DRAINED = range(len(KINDS))


@dataclass
class HostCalls:
    """Whole-run tables of the host's blocking calls and copies, each with its time and range (path code)."""
    sync: pd.DataFrame       # t, ns, name, pc
    dtoh: pd.DataFrame       # t, pc, end (the copy's end on the GPU: the data is on the host then)
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
    d = device_to_host(ops)
    p = memcpy & (ops["copy_kind"] == "HtoD").to_numpy() & (ops["src_kind"] == "pageable").to_numpy()

    def at(mask):
        t = pd.Series(op_launch[mask])
        return path_codes(paths, paths_at(ranges, pd.Series(ops["pid"].to_numpy()[mask]), t))
    dtoh = pd.DataFrame({"t": op_launch[d], "pc": at(d), "end": ops["end_ns"].to_numpy(dtype="float64")[d]})
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
    calls, queued_before, launch_ok, launched_at = _gap_facts(gs, ge, ops, api, ranges, paths, th)
    # blocking host calls: synchronising calls, and the calls that launched pageable copies
    sync_u = intervals.union(calls.sync["t"].to_numpy(), (calls.sync["t"] + calls.sync["ns"]).to_numpy())
    page_u = intervals.union(calls.pageable["t"].to_numpy(), calls.pageable["call_end"].to_numpy())
    # a gap is drained when a blocking call that began while the GPU still worked ended inside it [gs, ge]: each
    # end marks the gap that holds it. A call made once the GPU had gone idle emptied no queue: it found it empty
    # (TraceLens' TimeSformer trace, H100: four syncs blocked 56 us in all, then the host decoded video for 158 ms,
    # and that time was the syncs', "up to 1.71x" from removing them)
    ends = np.concatenate([sync_u.ends, page_u.ends])
    began = np.concatenate([sync_u.starts, page_u.starts])
    drained = np.zeros(len(gs), dtype=bool)
    if len(ends) and len(gs):
        i = np.searchsorted(ge, ends, side="left")  # the first gap ending at or after each end
        for j in (i, i + 1):  # (the next gap too: it starts where this one ends after a zero-length kernel)
            ok = j < len(gs)
            jj, e, b = j[ok], ends[ok], began[ok]
            drained[jj[(gs[jj] <= e) & (e <= ge[jj]) & (b < gs[jj])]] = True
    launch_ok &= ~drained

    seg_t, seg_c = _host_segments(api, ranges, paths)
    a, b, g = _cut_gaps(gs, ge, np.concatenate([seg_t, sync_u.starts, sync_u.ends, page_u.starts, page_u.ends,
                                                launched_at[np.isfinite(launched_at)]]))
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
        k[intervals.sorted_inside(mid, sync_u.starts, sync_u.ends)] = SYNC
        # the GPU's wait beats a sync: a host blocked while the GPU idles with work already queued is waiting
        # for the GPU, which waits on something the recording does not show (work from before it, another
        # process, a dependency); no fewer syncs would start that work sooner
        k[queued_before[gg]] = GPU_WAIT
        k[a[sl] >= launched_at[gg]] = GPU_WAIT  # (NaN compares False)
        k[intervals.sorted_inside(mid, page_u.starts, page_u.ends)] = PAGEABLE
    return Idle(a, b, kind, pc, first, paths, calls)


def _gap_facts(gs: np.ndarray, ge: np.ndarray, ops: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame,
               paths: np.ndarray, th: Thresholds) -> tuple[HostCalls, np.ndarray, np.ndarray, np.ndarray]:
    """The host's blocking calls, and per gap: was the op that ended it launched before the GPU went idle
    (``queued_before``), is it a short gap ended by a traced launch made after (``launch_ok``, before
    the drained test), and where the GPU still idled ``Thresholds.launch_gap_ns`` or more after the call that
    launched that op had returned, that return (``launched_at``, NaN elsewhere): from then on the GPU, not the host,
    was waiting. TraceLens' vLLM decode trace on an MI300: copies launched 0.5 ms into the step began 8.4 ms into it
    (work from before the recording, or a dependency), read as the host's time."""
    launch_calls = op_launch_calls(ops, api)
    calls = host_calls(ops, launch_calls, api, ranges, paths)
    op_launch = launch_calls["start_ns"].to_numpy()
    op_return = launch_calls["end_ns"].to_numpy(dtype="float64", copy=True)
    del launch_calls
    o_start = ops["start_ns"].to_numpy(dtype="float64")
    # a copy whose call returned only after the copy had ended was made by a blocking call (``cudaMemcpy`` to the
    # host): it was queued when that call began, and the GPU idling on after that waited, not the host.
    # TraceLens' SGLang decode trace (MI300X): a 256-byte copy to the host, called 0.4 ms into the step, ran
    # 463 ms later on an idle GPU; read as 'a synchronising call emptied the GPU's queue', up to 44x. (Copies
    # only: a kernel's launch call can outlast the kernel while it loads the kernel's module, host work.)
    blocking = ops["kind"].isin(("memcpy", "memset")).to_numpy() & \
        (op_return >= ops["end_ns"].to_numpy(dtype="float64"))
    op_return[blocking] = op_launch[blocking]
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
        launched_at = op_return[order[j]]
        launched_at[~has_next] = np.nan
    else:
        has_next, next_launch = np.zeros(len(ge), dtype=bool), np.full(len(ge), np.nan)
        launched_at = np.full(len(ge), np.nan)
    del order, j, op_launch, op_return
    queued_before = next_launch < gs                          # NaN (no next op, launch not traced) compares False
    launch_ok = ~np.isnan(next_launch) & ((ge - gs) < th.launch_gap_ns)  # without the launch call, no overhead
    launched_at[~((launched_at > gs) & (ge - launched_at >= th.launch_gap_ns))] = np.nan
    return calls, queued_before, launch_ok, launched_at


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
