"""The window of steady steps, seen from the profile run: what the launchers are told (``--window-*``, the ncu
pass's gate), what they said they did (``runtime.window``'s event lines), and how the report words it.

- The timeline pass records the program through its warm-up and a window of steady steps, then stops it
  (``--full-run``: lets it run on unrecorded). ``--warmup``/``--steps`` fix the counts; ``--whole-program``
  records everything as before.
- The Nsight Compute pass on the program (when the replay did not measure every kernel) profiles one steady step
  per phase: ``--profile-from-start off`` and the launcher's cudaProfilerStart/Stop around the step that follows
  as many warm-up steps as the timeline run's window waited for. A timeline run whose window never started (no
  steps, or a program shorter than its warm-up) gives the pass no window: it profiles from the start.
"""
from __future__ import annotations

from ..runtime.unrecorded import BEFORE_WINDOW_MIN  # unrecorded warm-up steps enough for a median
from . import data_waits
from ..record_format import HOOK_PHASE
from ..step_time import typical_step
from .passes import Options, Pass

HOOK_PHASE_NAME = "/".join(HOOK_PHASE)  # (the step hooks' phase, as the window's events name it)


def timeline_window(opts: Options, python_program: bool, from_window: bool = False,
                    warmup_max: int | None = None, steps_max: int | None = None,
                    last_optimizer_step: int | None = None) -> dict | None:
    """The timeline launcher's window settings, or None (recorded whole). ``from_window``: torch.profiler records
    from the first window's start (``--record-from window``), not from the program's start. ``warmup_max``: the
    warm-up steps the program's last run waited for (the evidence cache's): an automatic warm-up ends there at the
    latest (``--window-warmup-max``); ``steps_max``: the steps its last run's window held, the most an automatic
    window holds (``--window-steps-max``, ``runtime.window.Window._window_steps`` says why). ``last_optimizer_step``:
    after how many optimizer steps the program's last run ended, inside its window (``last_optimizer_step_seen``):
    with ``from_window``, this run's window ends with that optimizer step's step, and the program's end runs
    unrecorded (``--window-last-optimizer-step``, ``runtime.window.Window._at_last_step``).

    Why a bound: the warm-up's end is decided from this run's own step times, and a host whose speed moves makes a
    run settle later than the last one did. Then a program that ends inside its window keeps fewer window steps, or
    none (a torchrun job of two CPU ranks, STEPS = last warm-up + 8: 1 step recorded per rank, 1 CI run in 7), and
    the first and cached runs record different stretches of the program (69.8 against 80.9 ms steps)."""
    if not opts.window or not python_program:
        return None
    bound = {"warmup_max": int(warmup_max)} if warmup_max is not None and opts.warmup is None else {}
    if steps_max is not None and opts.steps is None:
        bound["steps_max"] = int(steps_max)
    if last_optimizer_step is not None and from_window and opts.steps is None:
        bound["last_optimizer_step"] = int(last_optimizer_step)
    return {"warmup": opts.warmup, "steps": opts.steps, "end": "continue" if opts.full_run else "stop",
            **({"record_from": "window"} if from_window else {}), **bound}


def recorded_from_window(opts: Options, record: dict | None) -> bool:
    """Whether the timeline records from the window's start: the evidence cache knows every kernel of the program
    (no replay needs operator arguments, no ncu pass is started beside) and that its last run had a window.
    Then the start-up and warm-up, which the steady-state verdict leaves out anyway, are not recorded, written or
    parsed (torch 2.11 on H100: a second run's fixed cost fell 0.4-1.1 s with the report made during the exit; the
    profiler's stop itself hardly shrank, 1.2-1.4 s for ResNet-50 AMP: reports/window call9-10). A program whose
    window no longer starts is recorded again whole (``profile.default``)."""
    return bool(opts.window and record and record.get("complete") and record.get("window"))


def had_window(p: Pass) -> bool:
    """The timeline pass' window started (what the evidence cache remembers for ``recorded_from_window``)."""
    return p.window is not None and warmup_seen(p.window_events) is not None


def _starts(events: list[dict]) -> list[dict]:
    """The phases' window starts, less the hooks' window that the program's own steps replaced ("dropped")."""
    dropped = {e.get("phase") for e in events if e.get("event") == "dropped"}
    return [e for e in events if e.get("event") == "start" and e.get("phase") not in dropped]


def warmup_seen(events: list[dict]) -> int | None:
    """How many warm-up steps the timeline run's window waited for (the most over its phases), or None when no
    window started."""
    starts = [int(e.get("warmup") or 0) for e in _starts(events)]
    return max(starts) if starts else None


def last_optimizer_step_seen(events: list[dict]) -> int | None:
    """After how many optimizer steps the program ended by itself inside the window of the hooks' steps, or during
    its unrecorded steps after it, or at the step where its last run had (``runtime.window``'s ``ended`` event; every
    rank's, the same in a distributed job), or None: where no program ended so, or it had windows of other phases
    too."""
    ended = [e for e in events if e.get("event") == "ended" and e.get("optimizer_steps")]
    phases = {e.get("phase") for e in _starts(events)}
    if not ended or phases != {HOOK_PHASE_NAME}:
        return None
    return max(int(e["optimizer_steps"]) for e in ended)


def window_steps_seen(events: list[dict]) -> int | None:
    """How many steps the timeline run's windows were to hold (the most over its phases), or None."""
    # (a window shortened because the program's end was known says what it would have held: ``sized_steps``,
    # runtime.window.Window._end_known; that is the bound a run whose end is not known needs)
    steps = [int(e.get("sized_steps") or e["steps"]) for e in _starts(events) if e.get("steps")]
    return max(steps) if steps else None


def ncu_window(opts: Options, python_program: bool, events: list[dict] | None) -> dict | None:
    """The Nsight Compute pass's window: one steady step per phase after the timeline's warm-up. ``events``
    None: not known yet (the pass starts beside the timeline; its gate tells it later, ``gate_words``)."""
    if not opts.window or not python_program:
        return None
    warmup = opts.warmup if events is None else warmup_seen(events)
    if events is not None and warmup is None:
        return None
    return {"warmup": warmup, "steps": 1, "end": "stop", "cuda_profiler": True}


def gate_words(opts: Options, events: list[dict]) -> str:
    """What the gate of an ncu pass started beside the timeline says with its 'go'."""
    if not opts.window:
        return ""
    warmup = warmup_seen(events)
    return "window=off" if warmup is None else f"window-warmup={warmup}"


def summary(p: Pass) -> dict | None:
    """run.json's and the report's account of the timeline pass' window."""
    if p.window is None:
        return None
    ev = p.window_events
    starts = _starts(ev)
    ends = [e for e in ev if e.get("event") == "end"]
    return {"requested": {k: p.window.get(k) for k in ("warmup", "steps", "end")},
            # the steps a window held: its end's count (a generation loop's window holds whole requests, not the
            # count planned at its start), else the planned count
            "phases": [{"phase": e.get("phase"), "warmup_steps": e.get("warmup"),
                        "steps": next((x.get("steps") for x in ends if x.get("phase") == e.get("phase")), e.get("steps")),
                        "median_ms": e.get("median_ms"),
                        "complete": any(x.get("phase") == e.get("phase") for x in ends),
                        **({"program_end": True} if any(x.get("phase") == e.get("phase") and x.get("program_end")
                                                         for x in ends) else {})} for e in starts],
            "stopped_after_window": p.stopped_after_window,
            **({"ended_by_itself": True} if p.ended_by_itself else {}),
            "recorded_from": "window" if p.window.get("record_from") == "window" or p.operators_until_s is not None
            else "start",
            **({"recorded_from_s": p.recorded_from_s} if p.recorded_from_s is not None else {}),
            **({"operators_until_s": p.operators_until_s} if p.operators_until_s is not None else {}),
            **({"ranks": {k: p.ranks_recorded[k] for k in sorted(p.ranks_recorded, key=int)}}
               if p.ranks_recorded else {}),
            **({"unrecorded": u} if (u := unrecorded_steps(ev)) else {})}


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


# Why a run's steps have no unrecorded speed beside them where its program ended inside the window: every step it
# timed was recorded, so how much the recording slowed them is not measured. Lightning with accumulate_grad_batches=4
# (an H200, 2026-12-01, benchmarks/gpu/user_programs/lit_accum.py, 40 optimizer steps): the first run's window was
# extended to the program's end and read "35 steady steps of 71.6 ms", with no word that a plain run takes 46.8 ms.
ENDED_INSIDE = ("the program ended inside the window, so every step it ran after its warm-up was recorded; a next run "
                "of it (the evidence cache then knows its length) ends its window sooner and times the rest")


def _ended_inside(p: Pass) -> bool:
    """Whether a window of this pass began and the program ended before any window of it closed."""
    s = summary(p) if getattr(p, "window", None) is not None else None
    return bool(s and s["phases"]) and not any(ph["complete"] and not ph.get("program_end") for ph in s["phases"])


def unrecorded_speed(verdict, done: list[Pass]) -> bool:
    """The recording's own slowdown, measured in the run: the steady step as recorded against the steps the program
    ran after its window unrecorded (``unrecorded_steps``). Sets ``timeline.steps.unrecorded`` (median, steps, the
    recording's slowdown) and, for a generation loop, ``timeline.inference.unrecorded`` (time per output token and
    tokens/s at the unrecorded speed); the recorded numbers stay as they are, labelled recorded by the report. True
    where it set them (the findings' gains are then estimated again: a straggler's fix is judged at that speed)."""
    tl = getattr(verdict, "timeline", None)
    p = next((p for p in done if p.mode == "timeline"), None)
    if not tl or p is None or not (tl.get("steps") or {}).get("median_iteration_ns"):
        return False
    st = tl["steps"]
    recorded, ahead = typical_step(st)  # (the GPU's step where the host ran ahead of it: ``step_time``)
    churn = st.get("shape_churn") or {}
    if churn.get("base_ns"):  # a loop of changing shapes: its step at a known shape against the unrecorded ones'
        recorded = float(churn["base_ns"])
    u = unrecorded_steps(p.window_events or [], recorded_ahead=ahead,
                         known_under_ms=UNRECORDED_SLOW * recorded / 1e6 if churn.get("base_ns") else None,
                         per_step=int(st.get("replays_per_step") or 1))
    if u and u.get("left_out"):  # (timed, but no measure of the recording: said beside the recorded step)
        st["unrecorded_left_out"] = u["left_out"]
    elif not u and _ended_inside(p):
        st["unrecorded_left_out"] = ENDED_INSIDE
    if not u or u.get("left_out"):
        return False
    unrec = u["median_ms"] * 1e6
    inf = tl.get("inference") or {}
    if inf and u.get("decode_median_ms") and churn.get("base_ns"):
        # decode calls at shapes seen before, against the recorded call at one: the recorded time per output token
        # holds the new shapes' cost too, which no recording's speed measures, so no unrecorded one is said
        unrec = u["decode_median_ms"] * 1e6
    elif inf and u.get("decode_median_ms") and inf.get("tpot_ns"):
        unrec = u["decode_median_ms"] * 1e6  # (model calls: the decode calls are the steady ones)
        slow = float(inf["tpot_ns"]) / unrec
        inf["unrecorded"] = {"tpot_ns": unrec, "steps": u["steps"], "recording_slowdown": round(slow, 3),
                             **({"tokens_per_s": round(float(inf["tokens_per_s"]) * slow, 2)}
                                if inf.get("tokens_per_s") else {})}
    st["unrecorded"] = {"median_ns": unrec, "steps": u["steps"], "recording_slowdown": round(recorded / unrec, 3),
                        "when": u["when"], "how": u["how"],  # when: the steps timed "after" the window or "before" it
                        **({"known_shape_ns": recorded} if churn.get("base_ns") else {}),  # (the recorded step so
                        # compared: at a shape seen before)
                        **({"slow_steps": u["slow_steps"], "slow_beyond_ns": u["slow_beyond_ms"] * 1e6,
                            "slow_max_ns": u["slow_max_ms"] * 1e6, "after_ns": u["after_ms"] * 1e6,
                            "slow_factor": UNRECORDED_SLOW} if u.get("slow_steps") else {})}
    return True


# What a first run's recording of every operator with its arguments (the replay's, ``--record-shapes``) did to the
# steps it timed, against a second run's ranges-only recording of the same program (runtime.recording). H100, torch
# 2.11, benchmarks/gpu/gpu_profile_overhead.py, reports/window/call14: Lightning 12.9 ms/step against 7.0 ms (plain run:
# 5.5 ms; the first run said cpu-bound, the second mixed), the DataLoader program 44.1 against 39.0 ms, ResNet-50
# AMP 49.9 against 46.3 ms (plain 32.2 ms).
SHAPES_SLOWDOWN_SEEN = "H100: Lightning 12.9 ms/step against 7.0 ms recording the ranges only, 5.5 ms plain"


def note(p: Pass) -> str | None:
    """One sentence for the report about what the timeline pass recorded."""
    s = summary(p)
    if s is None:
        return None
    if not s["phases"]:
        said = ("recorded the whole program: no steady window started (the program showed no steps, or ended "
                "within its warm-up)")
        if "--record-shapes" in p.argv:  # a first run: every operator with its arguments, start to end
            said += ("; every operator was recorded with its arguments for the replay, which can make such a run "
                     "much slower than a plain one (" + SHAPES_SLOWDOWN_SEEN + "). To bound it: mark the steps "
                     "(`with nsighttc.annotate.step():`), record the ranges only (`--no-replay`), or stop it "
                     "(`--timeout SECONDS`); a next run, once this one measured every kernel, records the ranges only")
        return said
    parts = [f"{ph['steps']} steps of `{ph['phase']}` after {ph['warmup_steps']} warm-up steps"
             + ("" if ph["complete"] else " (the program ended first)")
             + (" (ending at the step where the program's last run ended: its end ran unrecorded)"
                if ph.get("program_end") else "") for ph in s["phases"]]
    ended = [ph for ph in s["phases"] if ph["complete"] and not ph.get("program_end")]
    how = ("then nsighttc stopped the program (`--full-run` lets it finish)" if s["stopped_after_window"]
           else "the program ran on unrecorded" if s["requested"]["end"] == "continue" and ended
           else "then the program ran on unrecorded until it ended by itself, as its last run did"
           if ended and p.ended_by_itself
           else "the recording went on to the program's end (a new phase began within each grace)" if ended else "")
    said = "recorded a window of steady steps: " + "; ".join(parts) + (f"; {how}" if how else "")
    if p.window.get("record_from") == "window":
        said += ("; recorded from the window's start (the evidence cache knows this program: its start-up and "
                 "warm-up ran unrecorded)")
    lead = (getattr(p, "ranks_recorded", None) or {}).get("0", {})
    if "--record-shapes" in p.argv and p.operators_until_s is not None and lead.get("dropped_until_s") is not None:
        # a distributed first run's rank 0: the operators for a few steps only (runtime.recording.OPERATOR_STEPS)
        said += (f"; rank 0 recorded every operator with its arguments for the replay in the steps just before the "
                 f"window only ({lead['dropped_until_s']:.1f}-{p.operators_until_s:.1f} s into the program), the "
                 "ranges only before and after them, as the other ranks")
    elif "--record-shapes" in p.argv and p.operators_until_s is not None:
        said += (f"; every operator was recorded with its arguments for the replay during the warm-up, until its "
                 f"steps were steady ({p.operators_until_s:.1f} s into the program), the rest with the ranges only "
                 "(recording arguments slows launch-heavy steps: " + SHAPES_SLOWDOWN_SEEN + ")")
    elif "--record-shapes" in p.argv:
        said += ("; every operator was recorded with its arguments for the replay, which slows launch-heavy steps "
                 "(" + SHAPES_SLOWDOWN_SEEN + "): the next run of this program records the ranges only and times "
                 "its steps closer to a plain run")
    return said


def unrecorded_startup(verdict, done: list[Pass]) -> None:
    """A timeline recorded from the window's start begins at the window: its start-up as the analysis sees it is
    only what came between the recording's start and the steady steps. Add the seconds the program ran before
    the recording (the launcher's ``recorded from X s``), and say so (``startup.unrecorded_s``)."""
    tl = getattr(verdict, "timeline", None)
    p = next((p for p in done if p.mode == "timeline"), None)
    if not tl or p is None or p.recorded_from_s is None or not tl.get("startup"):
        return
    st = tl["startup"]
    st["unrecorded_s"] = p.recorded_from_s
    st["seconds"] = float(st.get("seconds") or 0.0) + p.recorded_from_s
