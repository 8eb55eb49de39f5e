"""Where the host time went: the Python frames the host was in while the GPU idled.

Every host stack sample (``parse.host_samples``) taken inside an idle piece of the GPU (``idle.pieces``) stands for
an equal part of that scope's idle time. Samples are put down to a *site* and what it *calls*:

- the *trunk* is the chain of functions on the stack of nearly every idle sample (``TRUNK_SHARE``): the program's
  ``main``, a Trainer's ``_inner_training_loop``, Lightning's loops. It is the program, not a cause: a range that
  spans the whole program is what the analysis named before, and nobody could act on it. It never goes into a
  function whose topic is a cause (``CAUSE_TOPICS``: a DataLoader's ``__next__``, an optimizer's ``step``), however
  many samples sit there, so the site of the same work does not move with its share;
- a sample's *site* is its frame in the trunk's last function, at its line (``for batch in epoch_iterator``,
  ``loss.item()``, ``self.optimizer.step()``); a sample that left the trunk earlier is sited at the last trunk
  function it was in;
- it *calls* the first function below the site (``DataLoader.__next__``, ``AdamW.step``), and its *program line* is
  the outermost frame in the program's own files below the site: the program's code a library loop called (a
  dataset's ``__getitem__`` under a Trainer's fetch), else the site itself where it is the program's.

Each sample stands for its share of the idle time of its kind of piece in its range (``table``'s ``idle_by``): the
pieces of a (kind, range) pair hold so many ns and so many samples, each sample the part of them its span (the time
since the sampler's previous tick, ``parse.host_samples.tick_spans``) is of the samples' spans. So a row's
idle time is an estimate stratified by those pairs, the numbers the causes (``idle.causes``) are made of, and its
95% error comes from the samples' count in each pair (``share_error``); idle time no sample fell in stays with the
causes the pieces give (launch gaps, ranges).
Wrappers every call goes through (``host_topics.PLUMBING``) and nsighttc's own frames are never sites.

Each sample's stack also says what kind of work it was (``host_topics.TOPICS``): data loading, an optimizer step,
logging, a synchronising call on the program's line, the model's forward or backward. Findings take their fix from it.
All of it works on the distinct stacks (a few thousand), weighted by their samples: no loop over samples.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...parse.host_samples import LIBRARY, OWN, STDLIB, TOOL, HostSamples, sampler_cost_share
from .. import intervals
from . import idle
from .host_topics import CAUSE_TOPICS, SYNC_SOURCE, plumbing as _plumbing, stack_topic as _stack_topic, \
    topics as _topics

TRUNK_SHARE = 0.9   # a function on the stacks of this share of the idle samples is the program's loop, not a cause
TOP_ROWS = 8        # rows the report shows (the JSON keeps TOP_ROWS * 2)


@dataclass
class Attributed:
    """The idle samples of a recording: per sample its time, the time it stands for (``parse.host_samples.tick_spans``),
    piece kind and range code and row (``rows``)."""
    t: np.ndarray
    dt: np.ndarray
    kind: np.ndarray
    pc: np.ndarray
    row: np.ndarray
    topic: np.ndarray          # object: each sample's topic (or "")
    stack: np.ndarray          # each sample's stack id (HostSamples.stacks)
    rows: pd.DataFrame         # one row per (site, callee): frame, file, line, own, source, calls, program_line
    records: list | None = field(default=None, repr=False)  # ``rows`` as dicts, made once (``_records``)


def sample_calls(hs: HostSamples, pieces: idle.Idle, scope: tuple[np.ndarray, np.ndarray], tids: set[int]) \
        -> HostSamples:
    """A recording's Python calls (``parse.python_calls``) read at evenly spaced moments of the idle time in
    ``scope``, on the thread that launched most (else the one with most calls): samples as the sampler's."""
    from ...parse import python_calls
    mid = (pieces.start + pieces.end) / 2
    keep = intervals.inside(mid, *scope)
    o = np.argsort(pieces.start[keep], kind="stable")
    t = python_calls.moments(pieces.start[keep][o], pieces.end[keep][o])
    counts = hs.calls["tid"].value_counts()
    tid = next((int(x) for x in counts.index if int(x) in tids), int(counts.index[0]) if len(counts) else -1)
    hs.main_tid = tid
    return python_calls.stacks_at(hs, t, tid)


def attribute(hs: HostSamples, pieces: idle.Idle, tids: set[int] | None, scope: tuple[np.ndarray, np.ndarray]) \
        -> Attributed | None:
    """The samples of the program's launching threads (``tids``; the main thread where unknown) taken inside an idle
    piece within ``scope`` (intervals), each with its row. None when no sample fell in one."""
    s = hs.samples
    if not hs.placed or s.empty or not len(pieces.start):
        return None
    t = s["t_ns"].to_numpy(dtype="float64")
    keep = launching(hs, tids) & intervals.inside(t, *scope)
    order = np.argsort(pieces.start, kind="stable")
    ps, pe = pieces.start[order], pieces.end[order]
    i = np.searchsorted(ps, t, side="right") - 1
    inside = keep & (i >= 0) & (t < pe[np.clip(i, 0, None)])
    if not inside.any():
        return None
    p = order[i[inside]]
    stack = s["stack"].to_numpy()[inside]
    dt = s["dt_ns"].to_numpy(dtype="float64")[inside] if "dt_ns" in s else np.ones(int(inside.sum()))
    row_of_stack, rows, topic_of_stack = _rows(hs, stack)
    return Attributed(t[inside], dt, pieces.kind[p], pieces.pc[p], row_of_stack[stack], topic_of_stack[stack], stack,
                      rows)


def launching(hs: HostSamples, tids: set[int] | None) -> np.ndarray:
    """Per sample, whether it is of the program's launching threads (``tids``), or its main thread; every sample where
    neither is known."""
    want = set(tids or ()) | ({int(hs.main_tid)} if hs.main_tid is not None else set())
    return np.isin(hs.samples["tid"].to_numpy(), list(want)) if want else np.ones(len(hs.samples), dtype=bool)


def _rows(hs: HostSamples, stack: np.ndarray) -> tuple[np.ndarray, pd.DataFrame, np.ndarray]:
    """(row per stack id, the rows, topic per stack id) for the stacks of the idle samples (``stack``)."""
    fr = hs.frames
    files, funcs = fr["file"].astype(str), fr["function"].astype(str)
    eligible = (fr["kind"] != TOOL).to_numpy() & ~_plumbing(files, funcs)
    fn_id = pd.factorize(files + "\x00" + funcs)[0]
    frame_topic = _topics(fr)
    cause_fn = set(np.unique(fn_id[np.isin(frame_topic, CAUSE_TOPICS)]).tolist())  # functions the trunk never enters
    own = (fr["kind"] == OWN).to_numpy()
    sources = fr["source"].fillna("").astype(str).to_numpy()
    weight = np.bincount(stack, minlength=len(hs.stacks)).astype("float64")
    used = np.nonzero(weight)[0]
    paths = {int(k): [int(x) for x in hs.stacks[k][::-1] if eligible[x]] for k in used}  # outermost first
    total = weight.sum()
    trunk: list[int] = []
    live = list(paths)
    while live:  # grow the trunk while one function is next on nearly every idle sample's stack
        d = len(trunk)
        nxt = pd.Series({k: fn_id[paths[k][d]] for k in live if len(paths[k]) > d}, dtype="float64")
        if nxt.empty:
            break
        w = pd.Series(weight[nxt.index.to_numpy()], index=nxt.to_numpy()).groupby(level=0).sum()
        best = int(w.idxmax())
        if w.max() < TRUNK_SHARE * total or best in cause_fn:
            break
        trunk.append(best)
        live = [k for k in live if len(paths[k]) > d and fn_id[paths[k][d]] == best]
    keys: dict[tuple, int] = {}
    row_of = np.full(len(hs.stacks), -1, dtype=np.int64)
    topic_of = np.full(len(hs.stacks), "", dtype=object)
    program_of: dict[int, dict[int, float]] = {}  # row -> {the program's frame below the site: weight}
    callee_of: dict[int, int] = {}                # row -> the frame of the function its site calls
    for k, path in paths.items():
        depth = 0
        while depth < len(trunk) and depth < len(path) and fn_id[path[depth]] == trunk[depth]:
            depth += 1
        site = path[depth - 1] if depth else (path[0] if path else -1)
        callee = path[depth] if depth and depth < len(path) else -1
        r = row_of[k] = keys.setdefault((site, int(fn_id[callee]) if callee >= 0 else -1), len(keys))
        if callee >= 0:
            callee_of.setdefault(r, callee)
        full = hs.stacks[k]
        # the program's own code the site led to: its outermost frame below the site (or the site, the program's)
        below = next((int(x) for x in path[depth:] if own[x]), -1) if depth else -1
        if below < 0 and site >= 0 and own[site]:
            below = site
        if below < 0 and not depth:  # no trunk: the innermost frame of the program's, as the stack shows it
            below = next((int(x) for x in full if own[x]), -1)
        prog = program_of.setdefault(r, {})
        prog[below] = prog.get(below, 0.0) + weight[k]
        first_eligible = next((int(x) for x in full if eligible[x]), -1)
        if first_eligible >= 0 and own[first_eligible] and SYNC_SOURCE.search(sources[first_eligible]):
            topic_of[k] = "sync"  # the program's line itself made the call that waited (no Python frame below)
        else:
            topic_of[k] = _stack_topic(frame_topic, full)
    rows = []
    for (site, _), r in keys.items():
        found = {f: w for f, w in program_of[r].items() if f >= 0}  # stacks that reach the program's code decide
        prog = max(found.items(), key=lambda kv: kv[1])[0] if found else -1
        c = callee_of.get(r, -1)
        rows.append({"frame": funcs.iat[site] if site >= 0 else "(no Python frame)",
                     "file": files.iat[site] if site >= 0 else "", "line": int(fr["line"].iat[site]) if site >= 0 else 0,
                     "own": bool(own[site]) if site >= 0 else False, "source": sources[site] if site >= 0 else "",
                     "calls": funcs.iat[c] if c >= 0 else None, "calls_file": files.iat[c] if c >= 0 else None,
                     "program_line": f"{_short(files.iat[prog])}:{int(fr['line'].iat[prog])}" if prog >= 0 else None,
                     "program_frame": funcs.iat[prog] if prog >= 0 else None,
                     "program_source": sources[prog] if prog >= 0 else ""})
    return row_of, pd.DataFrame(rows), topic_of


def _text(x) -> str | None:
    """A table cell as text, or None (pandas turns a missing string into NaN)."""
    return x if isinstance(x, str) and x else None


def _short(path: str) -> str:
    """A file as the reader knows it: from the package folder for installed code, else the last two parts."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 2 else path


def _strata(att: Attributed, m: np.ndarray, idle_by: pd.DataFrame | None, idle_ns: float) \
        -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The samples in ``m`` by (kind, range) stratum: (each sample's stratum, each stratum's idle ns, each stratum's
    samples, each stratum's sampled time: the sum of its samples' spans). ``idle_by`` (pc, kind, ns: the scope's idle
    time per range and kind, ``idle.Scope.idle``) gives the strata their ns; without it, one stratum of ``idle_ns``."""
    n = int(m.sum())
    if idle_by is None or idle_by.empty:
        codes = np.zeros(n, dtype=np.int64)
        return codes, np.array([float(idle_ns)]), np.array([n]), np.array([float(att.dt[m].sum())])
    stratum = att.kind[m].astype(np.int64) * (1 << 32) + (att.pc[m].astype(np.int64) + 1)
    key = idle_by["kind"].to_numpy().astype(np.int64) * (1 << 32) + (idle_by["pc"].to_numpy().astype(np.int64) + 1)
    ns_of = pd.Series(idle_by["ns"].to_numpy(dtype="float64"), index=key).groupby(level=0).sum()
    codes, uniq = pd.factorize(stratum)
    return (codes.astype(np.int64), ns_of.reindex(uniq).fillna(0.0).to_numpy(),
            np.bincount(codes, minlength=len(uniq)), np.bincount(codes, weights=att.dt[m], minlength=len(uniq)))


def _scope_strata(att: Attributed, scope: tuple[np.ndarray, np.ndarray], idle_by: pd.DataFrame | None) -> tuple:
    """(the samples inside ``scope``, and ``_strata``'s four arrays for them): the same for every cause of a scope,
    made once for all of them (``cause_frames``). With ``_records``: the analysis of the 2-rank FSDP2 cached recording
    ``tests/fixtures/fsdp/extra_cached`` in 1.28 s instead of 1.43 s on this repository's CPU machine (median of 5,
    ``jobs=1``), its verdict and those of the host-frames fixtures byte for byte the same."""
    m = intervals.inside(att.t, *scope)
    return (m, *_strata(att, m, idle_by, 0.0))


def _records(att: Attributed, top: np.ndarray) -> list[dict]:
    """``att.rows``' rows at ``top`` as dicts, from the table turned into records once per recording (a table of
    a cause asked for them 70 times a rank, each a DataFrame ``iloc`` and ``to_dict``)."""
    if att.records is None:
        att.records = att.rows.to_dict("records")
    return [att.records[i] for i in top.astype(np.int64)]


def _top_counts(top: np.ndarray, row: np.ndarray, kind: np.ndarray, topic: np.ndarray):
    """Per row of ``top``: its samples per idle kind (a row per top row, a column per ``idle.KINDS``) and per topic
    (columns: the topics in sorted order, returned third). Only the top rows are counted: a cause's table is made
    for every cause of every scope (71 tables a rank for an FSDP2 job, where a cross-tabulation of every row took
    half of the analysis' time on this repository's CPU machine)."""
    order = np.argsort(top, kind="stable")
    ordered = top[order]
    j = np.clip(np.searchsorted(ordered, row), 0, max(len(ordered) - 1, 0))
    hit = ordered[j] == row if len(ordered) else np.zeros(len(row), dtype=bool)
    slot = order[j[hit]]
    kinds = np.zeros((len(top), len(idle.KINDS)))
    np.add.at(kinds, (slot, kind[hit].astype(np.int64)), 1.0)
    codes, names = pd.factorize(pd.Series(topic[hit], dtype=object).fillna("").astype(str), sort=True)
    topics = np.zeros((len(top), len(names)))
    np.add.at(topics, (slot, codes), 1.0)
    return kinds, topics, np.asarray(names, dtype=object)


def table(att: Attributed | None, scope: tuple[np.ndarray, np.ndarray], idle_ns: float, mask=None,
          idle_by: pd.DataFrame | None = None, strata: tuple | None = None, drained_part: float = 1.0) -> list[dict]:
    """The rows of the samples inside ``scope`` (and ``mask``), largest first, each with the idle time its samples
    stand for (per (kind, range) stratum of ``idle_by``, a stratum's ns shared by its samples; else ``idle_ns``
    shared by all), its share of ``idle_ns`` (the scope's idle time, or a cause's) and that share's 95% error from
    the sample counts. The strata are the scope's, so a cause's rows (``mask``) weigh as the scope's table does.
    ``strata``: the scope's (``_scope_strata``), where one caller asks for many causes of one scope.
    ``drained_part``: the part of the drained time (``idle.DRAINED``) that is the cause's own (``drained_parts``)."""
    if att is None:
        return []
    m, codes, stratum_ns, counts, spans = strata if strata is not None else _scope_strata(att, scope, idle_by)
    if not m.any():
        return []
    if idle_by is None or idle_by.empty:  # one stratum: the idle time asked for
        stratum_ns = np.array([float(idle_ns)])
    elif drained_part != 1.0:  # (a copy: the scope's strata serve its other causes too)
        drained = np.zeros(len(stratum_ns), dtype=bool)
        drained[codes] = att.kind[m] == idle.DRAINED   # (a stratum is one kind)
        stratum_ns = np.where(drained, stratum_ns * drained_part, stratum_ns)
    keep = np.ones(len(codes), dtype=bool) if mask is None else np.asarray(mask)[m]
    if not keep.any():
        return []
    codes = codes[keep]
    row, kind, topic, dt = att.row[m][keep], att.kind[m][keep], att.topic[m][keep], att.dt[m][keep]
    # a sample's part of its stratum's idle time: its span's part of the stratum's sampled time
    ns = stratum_ns[codes] * dt / np.where(spans[codes] > 0, spans[codes], 1.0)
    # per row: its idle ns and sample count, largest first (ties: the smaller row first, as a stable sort keeps them)
    uniq, inv = np.unique(row, return_inverse=True)
    row_ns = np.bincount(inv, weights=ns, minlength=len(uniq))
    row_n = np.bincount(inv, minlength=len(uniq))
    order = np.lexsort((-row_n, -row_ns))[:TOP_ROWS * 2]
    top = uniq[order]
    kinds, topics, topic_names = _top_counts(top, row, kind, topic)
    # a row's variance: per stratum, (stratum ns)^2 p (1 - p) / n, p the row's part of the stratum's n samples, taken
    # as Agresti-Coull's (k + 2) / (n + 4): a stratum whose few samples all fell in one row is not certain of it
    n_strata = len(counts)
    pair, pair_inv = np.unique(inv.astype(np.int64) * n_strata + codes, return_inverse=True)
    pair_dt = np.bincount(pair_inv, weights=dt, minlength=len(pair))
    g, pair_row = pair % n_strata, pair // n_strata
    n4 = counts[g] + 4.0
    k = pair_dt / np.where(spans[g] > 0, spans[g], 1.0) * counts[g]  # (the row's samples, time-weighted)
    p = (k + 2.0) / n4
    var = np.bincount(pair_row, weights=stratum_ns[g] ** 2 * p * (1 - p) / n4, minlength=len(uniq))
    denom = idle_ns if idle_ns > 0 else float(ns.sum()) or 1.0
    out = []
    infos = _records(att, top)
    for i, (info, ri) in enumerate(zip(infos, order)):
        r_ns, c = row_ns[ri], int(row_n[ri])
        ks, tp = kinds[i], topics[i]
        best = int(np.argmax(tp)) if tp.size else -1  # (the first of equal counts in sorted order, as before)
        out.append({"frame": info["frame"], "file": _short(info["file"]), "line": int(info["line"]),
                    "own": bool(info["own"]), "source": _text(info["source"]),
                    "calls": _text(info["calls"]),
                    "calls_file": _short(info["calls_file"]) if _text(info["calls_file"]) else None,
                    "program_line": _text(info["program_line"]), "program_frame": _text(info.get("program_frame")),
                    "program_source": _text(info["program_source"]),
                    "samples": c, "share": float(r_ns / denom), "idle_ns": float(r_ns),
                    "share_error": float(1.96 * np.sqrt(var[ri]) / denom),
                    "idle_kinds": {idle.KINDS[k]: float(v / c) for k, v in enumerate(ks) if v},
                    "topic": str(topic_names[best]) if best >= 0 and tp[best] > 0 and str(topic_names[best])
                    else None})
    return out


def drained_part(c: dict, idle_by: pd.DataFrame | None, code: dict[str, int]) -> float:
    """The part of the scope's drained time (a sync had emptied the GPU's queue, then the host ran code) that a
    cause holds: ``idle.causes`` gives the sync the part the scope's GPU work could have hidden and the host code the
    rest, so a cause's samples in drained time stand for that part of it, not all of it. Without this a cause's frames
    held more than its time: TraceLens' TimeSformer trace (H100), whose host decoded video after a sync, read
    "waiting at `preprocess` → `__call__` 113%" in the sync's finding and "276%" in the host-code one."""
    if idle_by is None or idle_by.empty or c["kind"] not in ("sync", "host-range"):
        return 1.0
    kind, pc, ns = (idle_by[k].to_numpy() for k in ("kind", "pc", "ns"))
    if c["kind"] == "sync":
        own, drained = ns[kind == idle.SYNC].sum(), ns[kind == idle.DRAINED].sum()
    else:
        at = pc == code.get(c["name"], -1)
        own, drained = ns[at & (kind == idle.HOST)].sum(), ns[at & (kind == idle.DRAINED)].sum()
    return float(np.clip((c["idle_ns"] - own) / drained, 0.0, 1.0)) if drained > 0 else 1.0


def cause_frames(att: Attributed | None, scope: tuple[np.ndarray, np.ndarray], causes: list[dict],
                 paths: np.ndarray, idle_by: pd.DataFrame | None = None) -> None:
    """Each cause gains ``frames`` (its top rows, shares of its own idle time, the samples weighed as the scope's
    table weighs them: ``idle_by``) and ``topics`` (share of its samples per topic) where samples fell in its
    pieces: host-range causes by their range (host and drained pieces), sync, launch-overhead and pageable-copy
    causes by their kind."""
    if att is None:
        return
    strata = _scope_strata(att, scope, idle_by)  # (every cause's table weighs its samples by the scope's strata)
    in_scope = strata[0]
    code = {str(p): i for i, p in enumerate(paths)}
    for c in causes:
        if c["kind"] == "host-range":
            pc = code.get(c["name"], -1)
            m = in_scope & np.isin(att.kind, [idle.HOST, idle.DRAINED]) & (att.pc == pc)
        elif c["kind"] in ("sync", "launch-overhead", "pageable-copy"):
            k = {"sync": [idle.SYNC, idle.DRAINED], "launch-overhead": [idle.LAUNCH],
                 "pageable-copy": [idle.PAGEABLE]}[c["kind"]]
            m = in_scope & np.isin(att.kind, k)
        else:
            continue
        if not m.any():
            continue
        rows = table(att, scope, c["idle_ns"], m, idle_by, strata, drained_part(c, idle_by, code))
        keys = ("frame", "file", "line", "own", "source", "calls", "program_line", "program_frame", "program_source",
                "share", "share_error", "idle_ns", "samples", "topic")
        c["frames"] = [{k: r[k] for k in keys} for r in rows[:3]]
        tp = pd.Series(att.dt[m]).groupby(att.topic[m]).sum()
        tp = tp / (tp.sum() or 1.0)
        c["topics"] = {str(k): float(v) for k, v in tp.sort_values(ascending=False).items() if k}
        c["samples"] = int(m.sum())


def summary(att: Attributed | None, hs: HostSamples | None, basis: str, rows: list[dict]) -> dict:
    """``timeline.host_frames``: the rows of the dominant scope, and what they rest on."""
    if hs is None:
        return {}
    out = {"source": hs.source, "basis": basis, "interval_ns": hs.interval_ns,
           "samples": int(len(hs.samples)), "placed": hs.placed,
           "idle_samples": int(sum(r["samples"] for r in rows)) if rows else 0,
           "sampler_cost_share": sampler_cost_share(hs),
           "rows": rows, "notes": list(hs.notes), "host": dict(hs.host)}
    if att is None and hs.placed:
        out["notes"].append("no host sample fell in the GPU's idle time of the steady steps")
    return out


def collapsed(att: Attributed | None, hs: HostSamples | None, scope: tuple[np.ndarray, np.ndarray]) -> str:
    """The idle samples' stacks in the collapsed format (``a;b;c N``, outermost first) that speedscope, Perfetto's
    and Brendan Gregg's flame graph tools read."""
    if att is None or hs is None:
        return ""
    counts = pd.Series(att.stack[intervals.inside(att.t, *scope)]).value_counts()
    fr = hs.frames
    names = (fr["function"].astype(str) + " (" + fr["file"].astype(str).map(_short) + ":" + fr["line"].astype(str)
             + ")").str.replace(";", ",").to_numpy()
    keep = (fr["kind"] != TOOL).to_numpy()
    lines = []
    for k, n in counts.items():
        ids = [x for x in hs.stacks[int(k)][::-1] if keep[x]]
        lines.append(";".join(names[ids]) + f" {int(n)}")
    return "\n".join(lines) + ("\n" if lines else "")


__all__ = ["Attributed", "LIBRARY", "OWN", "STDLIB", "TOP_ROWS", "TRUNK_SHARE", "attribute", "cause_frames",
           "collapsed", "summary", "table"]
