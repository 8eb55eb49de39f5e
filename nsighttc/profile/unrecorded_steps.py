"""The steps a program ran unrecorded, as the launcher's window lines said them: after its window, or in the warm-up
of a run recording from its window (``runtime.unrecorded``). How many, their typical time, which count (steps at new
input shapes, a stretch that waited for its data unlike the window, a host running ahead of the GPU: left out), and
the slow ones among them. ``profile.window`` sets the recording's slowdown from them (``unrecorded_speed``).
Split from ``profile.window`` by question: what the unrecorded stretches measured, apart from what the window did."""
from __future__ import annotations

from ..runtime.unrecorded import BEFORE_WINDOW_MIN  # unrecorded warm-up steps enough for a median
from . import data_waits

AHEAD = 0.5  # warm-up steps timed under this share of the synchronised steps after the window: launch times only
# A synchronised stretch after the window whose host times covered under this share of its span: the host ran ahead of
# the GPU, and each scaled step is a launch time stretched, not a step. Its steps' time is their span over their count
# (the graph-replaying loop on an H200, 2026-11-29: host times 585-752 us a replay; the median of the scaled times 977
# us and one "slow" step of 3.58 ms, their mean 1.12 ms, the plain run's 1.120 ms; reports/steps_time/graph_ahead).
HOST_AHEAD_SHARE = 0.8
# An unrecorded step this many times the median is slow: the bar the recorded loop's slow steps are held to
# (analysis.timeline.steps.slow.SLOW_FACTOR; a test keeps the two equal).
UNRECORDED_SLOW = 1.5


def _slow_after(durations_ms: list[float], median_ms: float) -> dict:
    """The slow ones among one rank's steps timed after the window: how many, their time beyond the median, and the
    time of all of them. A window of a dozen steps holds no periodic cost (a DataLoader restarting its workers every
    epoch: Lightning's ResNet-18 on an H200, 2026-11-29, 182 and 195 ms steps among 62 of 20 ms after a 12-step
    window), and the report would say nothing of it: these numbers let it say how much of the time it did not see."""
    from .. import step_cycle  # (numpy: not before the program starts, ``collect`` tests)
    d = [float(x) for x in durations_ms]
    slow = [x for x in d if x > UNRECORDED_SLOW * step_cycle.slow_against(d, median_ms)]
    if not slow:
        return {}
    return {"slow_steps": len(slow), "slow_beyond_ms": round(sum(x - median_ms for x in slow), 4),
            "after_ms": round(sum(d), 4), "slow_max_ms": round(max(slow), 4)}


def _host_ahead(ranks: list[dict], recorded_ahead: bool) -> bool:
    """Whether the steps timed after the window were the host's launches rather than the GPU's steps: synchronised
    on every rank, and each rank's host times under ``HOST_AHEAD_SHARE`` of its span (``host_share``; events without
    it: where the recorded steps' host ran ahead of the GPU, ``recorded_ahead``)."""
    if not ranks or not all(r.get("synced") for r in ranks):
        return False
    shares = [r.get("host_share") for r in ranks]
    if all(x is not None for x in shares):
        return all(float(x) < HOST_AHEAD_SHARE for x in shares)
    return recorded_ahead


AFTER, BEFORE = "the steps timed after the window", "the warm-up's unrecorded steps"  # (the two unrecorded stretches)


def _per_step(durations: list[float], n: int) -> list[float]:
    """The launcher's step times summed ``n`` at a time: the analysis' step holds ``n`` of them (graphs replayed in
    turn, ``timeline.steps.replays_per_step``; the launcher times each replay). Any ``n`` in a row hold one of each."""
    return durations if n <= 1 else [sum(durations[i:i + n]) for i in range(0, len(durations) - n + 1, n)]


def unrecorded_steps(events: list[dict], recorded_ahead: bool = False,
                     known_under_ms: float | None = None, per_step: int = 1) -> dict | None:
    """The steps the program ran after its window with the recording stopped (``runtime.window``'s ``unrecorded``
    event): how many, their median, and a generation loop's decode calls' median apart. Where the host ran ahead of
    the GPU in them (``_host_ahead``; ``recorded_ahead``: the recorded steps' host did) their time is their mean: the
    synchronised span over the steps, no step's own time said. ``known_under_ms``: a loop of changing input shapes
    (its recorded slow steps are its new shapes): only the steps under it count, the steps at shapes already seen
    (a new shape's cost is no recording's)."""
    import statistics
    e = next((e for e in events if e.get("event") == "unrecorded" and e.get("durations_ms")), None)
    if e is None:
        return before_window(events, known_under_ms, per_step)
    ranks = [x for x in events if x.get("event") == "unrecorded" and x.get("durations_ms")
             and x.get("phase") == e.get("phase")]  # (a distributed job: every rank's, the same steps in lock-step)
    d = [x for r in ranks for x in _per_step([float(v) for v in r["durations_ms"]], per_step)]
    if not d:  # (fewer replays timed after the window than one step holds: the warm-up's steps, if any)
        return before_window(events, known_under_ms, per_step)
    kinds = [k for r in ranks for k in (r.get("kinds") or [None] * len(r["durations_ms"]))][:len(d)]
    decode = [x for x, k in zip(d, kinds) if k == "decode"]
    # a run recording from its window timed a few steps after it, as many as make enough with the warm-up's last
    # unrecorded steps (runtime.unrecorded): both stretches count; a generation loop's decode calls after it only (the
    # hooks call a training step's model call "prefill" too: two H200s, FSDP2's cached runs, call 9)
    before = [] if decode else _before_ms(events, e.get("phase"), per_step)
    # the warm-up's host times were launch times where they are far under the synchronised steps after the window
    # (the host ran ahead of the GPU there): the synchronised stretch only
    ahead = bool(before) and all(r.get("synced") for r in ranks) and \
        statistics.median(before) < AHEAD * statistics.median(d)
    before = [] if ahead else before
    # a stretch whose steps waited for their data unlike the window's measures the loader, not the recording
    # (``profile.data_waits``): left out; where neither is left, no unrecorded speed, and the verdict says why
    phase = e.get("phase")
    window = data_waits.window_waits(events, phase)
    waited = {AFTER: None if decode else data_waits.after_waits(ranks),
              BEFORE: data_waits.before_waits(_starts_before(events, phase)) if before else None}
    left = [(what, ms) for what, ms in waited.items() if ms is not None and data_waits.shifted(window, ms)]
    why = {what: data_waits.words(window, [(what, ms)]) for what, ms in left}
    before = [] if BEFORE in why else before
    if AFTER in why:
        if len(before) < BEFORE_WINDOW_MIN:  # (too few alone for a median)
            return {"left_out": data_waits.words(window, left)}
        d, ranks, before = before, [], []  # (the warm-up's stretch alone)
    known = None
    if known_under_ms is not None and decode:
        # a generation loop's decode calls meet new shapes too where each request's cache starts at its own prompt
        # length (a grown key/value length a call): the launcher cannot tell which (it tracks no shapes in a
        # generation loop), so the calls over the known-shape bound are left out as in a training loop. Llama-shaped
        # generate() over prompts of 16-600 tokens, an H200: 3 decode calls of ~18 ms, then 12 of ~82 ms at the next
        # request's new lengths, once read "81.6 ms unrecorded at a shape seen before ... no faster (0.33x)"
        kept = [x for x in decode if x <= known_under_ms]
        if not kept:
            return None
        known = (len(kept), len(decode))
        d, decode = [x for x in d if x <= known_under_ms], kept
    elif known_under_ms is not None:
        kept, kept_before = [x for x in d if x <= known_under_ms], [x for x in before if x <= known_under_ms]
        if not kept and not kept_before:
            return None  # (every unrecorded step met a new shape: nothing to compare the recorded steps with)
        known = (len(kept) + len(kept_before), len(d) + len(before))
        d, before = (kept, kept_before) if kept else (kept_before, [])
    launches = not decode and _host_ahead(ranks, recorded_ahead)
    from .. import step_cycle  # (steps taking turns: their cycle's mean)
    mid = statistics.fmean(d) if launches else step_cycle.typical(before + d)
    if AFTER in why:  # the warm-up's steps only
        return {"phase": phase, "steps": len(d) // max(1, len(_starts_before(events, phase))),
                "median_ms": round(mid, 4), "when": "before",
                "how": f"the warm-up's last steps before the window, unrecorded, this run; left out: {why[AFTER]}"}
    own = _per_step([float(v) for v in e["durations_ms"]], per_step)  # (this rank's, as the analysis' steps)
    out = {"phase": e.get("phase"), "steps": len(own) + len(before) // max(1, len(ranks)),
           "median_ms": round(mid, 4), "when": "before and after" if before else "after",
           "how": ("the warm-up's last steps before the window and the steps after it, unrecorded, this run"
                   if before else "steps the program ran after its window with the recording stopped, this run")
                  + (f", {len(ranks)} ranks" if len(ranks) > 1 else "")}
    if per_step > 1:
        out["how"] += f"; {per_step} CUDA graph replays a step, their times summed"
    if BEFORE in why:
        out["how"] += f"; left out: {why[BEFORE]}"
    if ahead:
        out["how"] += ("; the warm-up's unrecorded steps left out: the host ran ahead of the GPU there (their host "
                       "times were under half the synchronised steps')")
    if known is not None:
        out["how"] += (f"; the {known[0]} of those {known[1]} steps at shapes already seen (the others met new input "
                       "shapes, whose cost is the program's, not the recording's)")
        out["steps"] = known[0] // max(1, len(ranks))
    if launches:
        out["how"] += ("; the host ran ahead of the GPU in them, so their time is their span between two device "
                       "synchronisations over their count")
        out["span_mean"] = True
    if decode:
        out["decode_median_ms"] = round(statistics.median(decode), 4)
    elif not launches and known is None:  # (one rank's: a job's ranks time the same steps in lock-step; no step's
        # own time where the host ran ahead (its scaled launch times), nor slow ones among a new shape's steps)
        out.update(_slow_after(own, out["median_ms"]))
    return out


def _starts_before(events: list[dict], phase) -> list[dict]:
    """Every rank's window start of ``phase`` that said its unrecorded warm-up steps, less those whose window then
    turned into the program's CUDA graph replays (a ``replays`` event: the steps before were its eager calls, no
    measure of a replay; ``runtime.window.Window.replays_begin``)."""
    replayed = any(e.get("event") == "replays" and e.get("phase") == phase and not e.get("warmup_again")
                   for e in events)  # (a warm-up started again on the replays timed replays before its window)
    return [e for e in events if e.get("event") == "start" and e.get("phase") == phase
            and e.get("unrecorded_before_ms") and not replayed]


def _before_ms(events: list[dict], phase, per_step: int = 1) -> list[float]:
    """Every rank's unrecorded warm-up steps said at the window's start of ``phase`` (milliseconds), each rank's
    summed ``per_step`` at a time (``_per_step``)."""
    return _summed(_starts_before(events, phase), per_step)


def _summed(starts: list[dict], per_step: int) -> list[float]:
    """The unrecorded warm-up steps of these window-start events, each event's summed ``per_step`` at a time."""
    return [x for e in starts for x in _per_step([float(v) for v in e["unrecorded_before_ms"]], per_step)]


def before_window(events: list[dict], known_under_ms: float | None = None, per_step: int = 1) -> dict | None:
    """Where no steps ran after the window (a distributed job, whose ranks stop together; a window that ran to the
    program's end): the warm-up's last steps before the first window, where the recording started with the window
    (``runtime.unrecorded.before_window``; every rank's, a job's ranks running in lock-step), at least
    ``BEFORE_WINDOW_MIN`` of them; in a loop of changing shapes, those under ``known_under_ms`` only (an image loop's
    cached run: 8 such steps, 5 of them new sizes at 173-309 ms, read "207 ms unrecorded ... no faster (0.01x)" against
    1.69 ms recorded; H200, reports/steps_time/final3). ``per_step``: the launcher's times summed as many at a time
    (``_before_ms``)."""
    import statistics
    first = next((e for e in events if e.get("event") == "start" and e.get("unrecorded_before_ms")), None)
    if first is None:
        return None
    phase = first.get("phase")
    starts = _starts_before(events, phase)
    if not starts:
        return None
    d = _summed(starts, per_step)
    if known_under_ms is not None:
        d = [x for x in d if x <= known_under_ms]
    if len(d) < BEFORE_WINDOW_MIN:
        return None
    window, waited = data_waits.window_waits(events, phase), data_waits.before_waits(starts)
    if data_waits.shifted(window, waited):
        return {"left_out": data_waits.words(window, [(BEFORE, waited)])}
    return {"phase": phase, "steps": len(d), "median_ms": round(statistics.median(d), 4), "when": "before",
            "how": "the warm-up's last steps before the window, unrecorded (the recording started with the window), "
                   "this run" + (f", {len(starts)} ranks" if len(starts) > 1 else "")}
