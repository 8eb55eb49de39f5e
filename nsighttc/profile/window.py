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

from ..record_format import HOOK_PHASE
from ..step_time import typical_step
from .passes import Options, Pass
from .unrecorded_steps import UNRECORDED_SLOW, unrecorded_steps

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
    if inf and u.get("decode_median_ms") and (churn.get("base_ns") or inf.get("tpot_ns")):
        unrec = u["decode_median_ms"] * 1e6  # (model calls: the decode calls are the steady ones)
        if not churn.get("base_ns"):  # (where shapes churn, the decode calls are at shapes seen before, against the
            # recorded call at one: the recorded time per output token holds the new shapes' cost too, which no
            # recording's speed measures, so no unrecorded one is said)
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
