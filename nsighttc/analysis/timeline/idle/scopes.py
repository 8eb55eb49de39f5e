"""What a scope (a range and its children, a step family's steady iterations, the window) holds of the idle pieces:
sums per (range path, cause), read through masks of pieces."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ....allocator import slices
from ... import intervals
from ...grouping import aggregate

from .pieces import KINDS, Idle


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


def _under_names(paths, names: list[str]) -> pd.DataFrame:
    """(``pc``, ``range``): each path's index with the index in ``names`` of each name that is the path or one of its
    ancestors (a prefix of whole components). Built on a trie of the components, not on each prefix's string: a
    recording whose step ranges nest (Lightning's ``ProfilerStep``s, each inside the ones before it) has paths 245
    ranges deep and 7 KB long, and the prefixes as strings (242k of them) took 21 s of a 26 s analysis (this
    repository's CPU machine, tests/fixtures/steps/lightning_profiler_cpu_torch.json.xz)."""
    node: dict[tuple[int, str], int] = {}

    def nodes_along(path: str) -> list[int]:
        out, at = [], -1
        for part in path.split("/"):
            at = node.setdefault((at, part), len(node))
            out.append(at)
        return out

    wanted = {nodes_along(n)[-1]: i for i, n in enumerate(names) if n}
    pcs: list[int] = []
    codes: list[int] = []
    for i, p in enumerate(paths):
        if not p:
            continue
        for nd in nodes_along(p):
            k = wanted.get(nd)
            if k is not None:
                pcs.append(i)
                codes.append(k)
    return pd.DataFrame({"pc": np.asarray(pcs, dtype=np.int64), "range": np.asarray(codes, dtype=np.int64)})


def range_scopes(idle: Idle, names: list[str],
                 *warms: tuple[np.ndarray, np.ndarray] | None) -> list[dict[str, Scope]]:
    """One scope per range path, for each of ``warms``: the pieces and calls whose innermost range is the path or lies
    under it. Pieces inside warm-up iterations (each of ``warms``: sorted disjoint intervals, or None) are left out, as
    for families: causes describe the steady state. The ranges' paths and their calls (which no warm-up leaves out) are
    matched once for all of ``warms``."""
    m = _under_names(idle.paths, names)
    c = idle.calls
    every = (np.ones(len(c.sync), dtype=bool), np.ones(len(c.dtoh), dtype=bool), np.ones(len(c.pageable), dtype=bool))
    scopes = [scope_of(idle, ~mids_in(idle, *w) if w is not None and len(w[0]) else None, *every) for w in warms]
    sync_g = {names[k]: g.drop(columns="range") for k, g in scopes[0].sync.merge(m, on="pc").groupby("range")} \
        if scopes else {}
    dtoh_g = {names[k]: v for k, v in c.dtoh.merge(m, on="pc").groupby("range").size().items()}
    pg = aggregate(c.pageable.merge(m, on="pc").groupby("range"), copies=("ns", "size"), bytes=("bytes", "sum"),
                   ns=("ns", "sum"))
    pg.index = [names[k] for k in pg.index]
    rows = {n: pg.loc[[n]].reset_index(drop=True) if n in pg.index
            else pd.DataFrame({"copies": [0], "bytes": [0.0], "ns": [0.0]}) for n in names}
    out = []
    for base in scopes:
        idle_g = {names[k]: g.drop(columns="range") for k, g in base.idle.merge(m, on="pc").groupby("range")}
        empty_idle, empty_sync = base.idle.iloc[0:0], base.sync.iloc[0:0]
        out.append({n: Scope(idle_g.get(n, empty_idle), sync_g.get(n, empty_sync), int(dtoh_g.get(n, 0)), rows[n])
                    for n in names})
    return out
