"""What a loop's new input shapes cost before its window: the steps the launcher timed and flagged there, counted in the
shape-churn gain where the recording started at the window (``churn_before_window``)."""
from __future__ import annotations

from .passes import Pass
from .window import HOOK_PHASE_NAME, UNRECORDED_SLOW  # (a step over this many times the known-shape step is slow)


def churn_before_window(verdict, done: list[Pass]) -> bool:
    """A loop of changing input shapes (``timeline.steps.shape_churn``) recorded from its window: the steps before it
    met most of its new shapes, and the launcher timed them (the window's start event: ``warmup_ms``, ``warmup_new``,
    ``runtime.window_events.warmup_shapes``). Their time and what their new shapes cost beyond the step at a known
    shape go into ``shape_churn.before_window`` (the first step left out: the process' own set-up), which the
    shape-churn gain counts (``analysis.wide_gain.loop``). True where it set it (the gains are then estimated again).
    Why: BERT-base at 36 lengths on an H200, a first run recorded from its 10th step: its steady steps gave up to
    2.23x where bucketing measured 2.3-2.5x over the whole plain loop (reports/steps_time)."""
    tl = getattr(verdict, "timeline", None)
    p = next((p for p in done if p.mode == "timeline"), None)
    if not tl or p is None or not p.recorded_from_s:
        return False
    churn = (tl.get("steps") or {}).get("shape_churn") or {}
    base = float(churn.get("base_ns") or 0.0)
    phase = HOOK_PHASE_NAME if tl["steps"].get("source") == "hook" else None
    start = next((e for e in p.window_events or [] if e.get("event") == "start" and e.get("warmup_ms")
                  and (phase is None or e.get("phase") == phase)), None)
    if not base or start is None:
        return False
    d = [float(x) * 1e6 for x in start["warmup_ms"]][1:]
    new = [bool(x) for x in start.get("warmup_new") or []][1:]
    if not d or len(new) != len(d):
        return False
    slow = UNRECORDED_SLOW * base
    paid = [x - base for x, n in zip(d, new) if n and x > slow]
    before = {"steps": len(d), "ns": sum(d), "new_shape_steps": len(paid), "new_shape_excess_ns": sum(paid),
              "new_shape_excess_each_ns": sorted(int(x) for x in paid),
              # a first run records every operator with its arguments during the warm-up (for the replay): those
              # steps ran slower than the program's own; a run recording from its window timed its last ones unrecorded
              "recorded": not start.get("unrecorded_before_ms"),
              "how": "the launcher's times of the steps before the window (the first left out), at new input shapes "
                     "where the main model's first call of the step met shapes not seen before"}
    for fam in [tl["steps"]] + [f for f in tl.get("step_families") or [] if f.get("name") == tl["steps"].get("name")]:
        if fam.get("shape_churn") is not None:
            fam["shape_churn"]["before_window"] = before
    return True
