"""A scope's idle pieces as causes, largest first, and the headline's words for the first."""
from __future__ import annotations


import numpy as np
import pandas as pd

from ....durations import duration

from .. import per_item
from .pieces import DRAINED, GPU_WAIT, HOST, LAUNCH, PAGEABLE, SYNC
from .scopes import Scope


# the gpu-wait cause's words after its time: the headline's verdict word reads them (``render.markdown.headlines``)
GPU_WAIT_WORDS = "with the next work already launched"


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


def causes(sc: Scope, busy_ns: float, paths: np.ndarray, rinfo: dict[str, dict] | None = None,
           first: int | None = None) -> list[dict]:
    """The scope's causes of idle GPU time, ``{kind, name, idle_ns, detail}``, largest first; ``first``: only the first
    that many (the ranges' table: a range holding every range under it would list each of them, ``RANGE_CAUSES``)."""
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
    for pc, ns in sorted(host.items(), key=lambda x: -x[1])[:first]:
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
                    "detail": f"the GPU idled {_ms(ns)} {GPU_WAIT_WORDS} (a dependency on "
                              "another stream, an event, or between the nodes of a CUDA graph; or GPU work the "
                              "recording does not hold, launched before it began)"})
    return sorted(out, key=lambda c: -c["idle_ns"])[:first]


def frame_words(frame: dict) -> str:
    """A host frame (``host_frames``) in words, the program's line first where the site is a library's loop that led
    to it: `trainer_finetune.py:42` in `RandomTokens.__getitem__`, under `Trainer._run_epoch` (trainer.py:1809) →
    `Trainer.get_batch_samples`; else `function` (file:line) → what it calls."""
    text = f"`{frame['frame']}` ({frame['file']}:{frame['line']})"
    text += f" → `{frame['calls']}`" if frame.get("calls") else ""
    prog = frame.get("program_line")
    if prog and not frame.get("own") and not prog.endswith(f"{frame['file']}:{frame['line']}"):
        inside = f" in `{frame['program_frame']}`" if frame.get("program_frame") else ""
        return f"`{prog}`{inside}, under {text}"
    return text


def _pm(row: dict) -> str:
    """A share with its 95% error, in points: '62% ± 9'."""
    err = row.get("share_error")
    return f"{100 * row['share']:.0f}%" + (f" ± {100 * err:.0f}" if err is not None and err >= 0.005 else "")


LAUNCH_SITE_SHARE = 0.5  # a launch gap's host samples named a site this often, or the headline names none


def _launching_from(c: dict) -> str:
    """Where the host was while the GPU waited in launch gaps, where its stack samples name one place of the program
    for most of them: " in `lit_cifar.py:18` in `Net.training_step`, under ...". A launch-bound loop is host work too,
    and its line is what the user edits. Without it, one program's two runs read as two causes: Lightning's
    ResNet-18 (`../shared/programs/lit_cifar.py`, H200, 2026-11-29) had its first runs' windows span two epoch
    boundaries (DataLoader workers restarted), so the host-range cause led with "host busy in `lit_cifar.py:18` in
    `Net.training_step`", and its cached runs' 12-step windows led with "launch overhead", whose samples sat at the
    same line 95-100% of the time."""
    f = (c.get("frames") or [None])[0]
    if not f or not f.get("program_line") or (f.get("share") or 0.0) < LAUNCH_SITE_SHARE:
        return ""
    return f" in {frame_words(f)}"


HOST_KINDS = ("host-range", "drained", "sync")  # the idle kinds a host sample explains (not launch gaps, not waits)


def top_host_row(rows: list[dict] | None) -> dict | None:
    """The host-frames table's first row whose samples fell mostly in host-kind idle time (``HOST_KINDS``)."""
    for r in rows or ():
        if sum(v for k, v in (r.get("idle_kinds") or {}).items() if k in HOST_KINDS) >= 0.5:
            return r
    return None


NO_RANGE = "(no range)"  # host work the recording puts in no range (a program, or a recording, without any)

# A launch-gap cause whose host samples sit at the top host row's line is that line's work too: its idle time is
# the host launching what that line runs. Where it holds at least this share of the row's idle time, the row's
# headline says so; where it holds more than 1 / LAUNCH_LEADS of it, the launch gaps lead as before. Seen on
# Lightning's ResNet-18 (`../shared/programs/lit_cifar.py`, H200, 2026-11-30): one program's runs split nearly
# evenly between longer host work and launch gaps, both at `lit_cifar.py:18`; by the larger of the two, its first run
# read "host busy" (row 950 ms, launch gaps 494 ms) and its cached runs "launch overhead" (145 / 80 ms and
# 100 / 95 ms: the host work is split by range, the launch gaps are one cause).
LAUNCH_CLAUSE = 0.25
LAUNCH_LEADS = 0.5


def _launch_at_row(causes_: list[dict], row: dict | None) -> dict | None:
    """The launch-gap cause whose host samples' first frame is at ``row``'s program line (None without one). The
    match itself is the evidence: launch gaps are short, so few samples fall in them (3 to 30 in the runs above),
    and a line the row's many samples also name is not the noise of a few."""
    line = (row or {}).get("program_line")
    c = next((x for x in causes_ if x["kind"] == "launch-overhead" and x["idle_ns"] > 0), None)
    f = ((c or {}).get("frames") or [None])[0]
    return c if line and f and f.get("program_line") == line else None


def _same_site(a: dict, b: dict) -> bool:
    return all(a.get(k) == b.get(k) for k in ("frame", "file", "line", "calls", "program_line"))


def _tie_to_first_cause(row: dict, c: dict, rows: list[dict]) -> dict:
    """The host row the headline names: the table's top host row, or, where the first cause's own top row (a host
    range's samples) is at another line of the program and the samples cannot tell the two apart (their shares differ
    by less than their 95% errors combined), that row, as the causes rank them and the first fix follows. Seen on
    `../shared/programs/vit_eval.py` (H200, 2026-11-30): its first run's forward row 46% ± 7 (42.9 ms, spread over
    several ranges) led its DataLoader row 42% ± 7 (39.1 ms, one range, the first cause and the first fix), and its
    cached run's DataLoader row led 56% ± 7 against 38% ± 6: one program's runs named two lines. Plain runs put the
    limit in the DataLoader: with its batches loaded before the loop, 1.59-2.12x faster (reports/steps_time)."""
    f = (c.get("frames") or [None])[0]
    if not f or not f.get("program_line") or f.get("program_line") == row.get("program_line"):
        return row
    own = next((r for r in rows if _same_site(r, f)), None)
    if own is None or own is row or top_host_row([own]) is None:
        return row
    err = ((row.get("share_error") or 0.0) ** 2 + (own.get("share_error") or 0.0) ** 2) ** 0.5
    return own if row["share"] - own["share"] <= err else row


def _waits_for_gpu(row: dict) -> bool:
    """A host row whose samples fell in a wait for the GPU (a synchronising call, a blocking copy): the headline says
    the wait, not host work."""
    return row.get("topic") == "sync" or (row.get("idle_kinds") or {}).get("sync", 0.0) >= 0.5


def _host_and_launch(row: dict, launch: dict, of: str) -> str:
    """The headline of one line's host work and the launch gaps whose samples sit at it: the row's words and numbers
    (as the host-frames table shows them), then the launch gaps' (as the causes' table does)."""
    return (f"host busy in {frame_words(row)} ({_pm(row)} of the GPU's {of}, {_ms(row['idle_ns'])}), and launching "
            f"its kernels slower than the GPU runs them ({launch['_share']:.0%} of the {of}: {launch['detail']})")


def headline(causes_: list[dict], verdict: str, rows: list[dict] | None = None) -> str | None:
    """One line for the verdict's headline: the first cause and its share of the idle time. Where the host's stack
    samples explain a host cause (``rows``: the scope's host-frames table), they decide: the headline is the table's
    top host row, with the same share, error and time as the table shows (one attribution)."""
    if verdict not in ("cpu-bound", "mixed") or not causes_ or causes_[0]["idle_ns"] <= 0:
        return None
    c = causes_[0]
    total = sum(x["idle_ns"] for x in causes_) or 1.0
    share = c["idle_ns"] / total
    waiting = any(x["kind"] == "communication" for x in causes_)  # a rank: idle of compute, not of the GPU
    what = "time without compute" if waiting else "idle time"
    row = top_host_row(rows) if c["kind"] in ("host-range", "sync", "launch-overhead") else None
    per_input = per_item.match(rows) if row is not None else None
    if per_input is not None:  # a library's one-input call: the call, not the part of it that held most this run
        return per_item.headline(per_input, what, _ms(per_input.idle_ns))
    launch = _launch_at_row(causes_, row)
    if launch is not None and launch["idle_ns"] >= LAUNCH_CLAUSE * row["idle_ns"] \
            and row["idle_ns"] >= LAUNCH_LEADS * launch["idle_ns"] and not _waits_for_gpu(row):
        return _host_and_launch(row, {**launch, "_share": launch["idle_ns"] / total}, what)
    if c["kind"] == "launch-overhead":
        row = None
    if row is not None:
        row = _tie_to_first_cause(row, c, rows or [])
        if _waits_for_gpu(row):
            # (its samples fell in a wait for the GPU: a blocking copy as much as a named sync, ROCm's
            # hipMemcpyWithStream under `Tensor.copy_` in SGLang's public decode trace)
            return f"a synchronising call at {frame_words(row)} emptied the GPU's queue ({_pm(row)} of the GPU's {what}, {_ms(row['idle_ns'])})"
        return f"host busy in {frame_words(row)} ({_pm(row)} of the GPU's {what}, {_ms(row['idle_ns'])})"
    of = f"{100 * share:.0f}% of the GPU's {what}"
    if c["kind"] == "host-range" and c.get("frames"):  # the host's stacks say where, not the range around it
        return f"host busy in {frame_words(c['frames'][0])} ({of}, {_ms(c['idle_ns'])})"
    if c["kind"] == "host-range":
        where = "outside any range" if c["name"] == NO_RANGE else f"in `{c['name']}`"
        return f"host busy {where} ({of}, {_ms(c['idle_ns'])})"
    if c["kind"] == "launch-overhead":
        return f"launch overhead{_launching_from(c)} ({of}: {c['detail']})"
    if c["kind"] == "communication":
        return f"waiting in communication not overlapped by compute ({of}, {_ms(c['idle_ns'])}): another rank is late, or the transfers are not overlapped"
    if c["kind"] == "sync":
        at = f" at {frame_words(c['frames'][0])}" if c.get("frames") else ""
        return f"synchronising calls ({c['name']}){at} emptied the GPU's queue ({of}, {_ms(c['idle_ns'])})"
    return f"{c['detail']} ({of})"
