"""``nsighttc try``: run the program as it is and under variants applied from the launcher, and measure what each
bought, next to what the baseline's findings predicted.

A profiler distorts what it measures (torch.profiler's host time per operator made an fp32 Trainer fine-tune look
host-bound and ranked DataLoader workers above TF32, the other way round from plain runs), so speed is measured
**without one**: every run is plain, its steps timed by the launcher at the step boundaries it already sees (CUDA
events, ``runtime.step_timer``), and the speed-up is the ratio of the mean steady steps (``measure``). By
default a run stops once it has a window of steady steps (``runtime.window``: warm-up, then ~2 s of steps), as
``profile`` does; ``--metric`` or ``--full-run`` let each run finish.

1. The baseline is profiled once (torch.profiler, a window of steps): its verdict gives each finding's estimated
   gain (``analysis.gain``) and ``--variant auto`` its choices (``experiment.auto``); ``--verdict FILE`` takes
   an earlier ``profile``'s verdict instead. A profiled run of a variant happens only with ``--explain`` (its
   Tensor Core share, dtypes and timeline verdict explain the speed-up; its numbers never make it).
2. Plain runs: ``--repeat N`` rounds of the baseline then every variant, alternating; the spread of a speed-up is
   its lowest and highest round (one round: the steps' quartiles); a difference inside it is "no measurable
   change".
3. ``--variant auto``: the variants of the findings with the largest estimated gains, then the best two that made
   the program faster, combined (``A+B``).
4. Each variant's predicted range (from the baseline's verdict, its step times taken from the baseline's plain run)
   sits beside the measured speed-up in try.md / try.json; a prediction the measurement falls outside is said so.

A variant that crashes is reported as failed with the error's last line; the others still run.
"""
from __future__ import annotations

import shlex
from typing import Callable

from ..durations import duration
from ..runtime import variants as variants_mod
from .options import AUTOCASTS, SCHEMA_ID, Outcome, TryOptions, read_metric, validate
from .rows import apply_noise, best_two, row as make_row, schema_problem, unchanged_noise, write
from .runs import Runner

__all__ = ["AUTOCASTS", "SCHEMA_ID", "Outcome", "TryOptions", "read_metric", "run_try", "schema_problem"]


def run_try(target, opts: TryOptions, say: Callable[[str], None] = lambda s: None) -> Outcome:
    """The baseline's verdict, plain runs of the baseline and every variant (``opts.repeat`` rounds), profiled runs
    with ``--explain``; writes try.json, try.md and try.png in a new run directory (module docstring)."""
    from ..collect import gpu
    from ..profile import new_run_dir
    from ..verdict import load_json
    names = validate(target, opts)
    base_doc = load_json(opts.verdict) if opts.verdict else None  # a bad file fails before anything runs
    gpus = gpu.list_gpus()
    run_dir = new_run_dir(opts.out, f"try-{target.label}")
    say(f"nsighttc try: run directory {run_dir}")
    notes = [] if gpus else ["no NVIDIA GPU here: every variant runs on the CPU (autocast variants use CPU autocast)"]
    cache = None
    if opts.cache and gpus:
        from ..collect.evidence_cache import EvidenceCache
        cache = EvidenceCache(gpus[0].name, gpus[0].driver or "")
        notes += cache.notes
    ctx = Runner(target, opts, run_dir, cache, say)

    # 1. the baseline: one plain run, its verdict (profiled, or given)
    base_plain = [ctx.plain("baseline", 0)]
    explained: dict[str, dict] = {}
    if base_plain[0]["status"] != "ok":  # nothing can be compared with a program that does not run as it is
        notes.append(f"the baseline failed ({base_plain[0]['error']}): nothing else was run; a variant is measured "
                     "against the program as it is, which must run first")
        rows = [make_row("baseline", None, base_plain, base_plain, None, None, opts)]
        doc = _document(target, opts, gpus, notes, None, rows)
        write(run_dir, doc)
        return Outcome(run_dir, doc)
    if base_doc is None:
        explained["baseline"] = ctx.profiled("baseline")
        base_doc = explained["baseline"].get("_verdict")
        if base_doc is None:
            notes.append("the baseline's profiled run gave no verdict: no predictions"
                         + _why_no_verdict(explained["baseline"].get("error")))
    else:
        notes.append(f"predictions and auto's choices from the verdict {opts.verdict}")
    plain_steps = base_plain[0].get("_steps") or {}

    def predict(name: str) -> dict | None:
        if base_doc is None or name == "baseline":
            return None
        from ..analysis import variant_gain
        return variant_gain.for_variant(base_doc, name, plain_steps or None)

    # 2. what runs: the names given, auto's choices ordered by their predicted gain
    planned: list[tuple[str, str | None]] = []
    for n in names:
        if n == "auto":
            from .auto import choose
            picked = choose(base_doc or {}, base_plain[0].get("_record"), opts.workers) \
                if base_plain[0]["status"] == "ok" else []
            picked.sort(key=lambda p: -((predict(p[0]) or {}).get("high") or 0.0))
            if not picked:
                notes.append("--variant auto: the baseline's verdict points to no variant"
                             + ("" if base_plain[0]["status"] == "ok" else " (the baseline failed)"))
            planned += picked
        elif n != "baseline":
            planned.append((n, None))
    planned = list({n: (n, why) for n, why in reversed(planned)}.values())[::-1]  # first mention wins

    # 3. plain runs, rounds alternating baseline and variants
    runs: dict[str, list[dict]] = {n: [] for n, _ in planned}
    for r in range(opts.repeat):
        if r:
            base_plain.append(ctx.plain("baseline", r))
        for n, _ in planned:
            runs[n].append(ctx.plain(n, r))
    if "auto" in names and base_plain[0]["status"] == "ok":
        combo = best_two(base_plain, runs)
        if combo and combo not in runs:
            planned.append((combo, "--variant auto: the two variants that made the program fastest, combined"))
            runs[combo] = [ctx.plain(combo, r, pair=base_plain[r]) for r in range(opts.repeat)]
    if opts.explain:
        for n in ["baseline"] + [n for n, _ in planned]:
            if n not in explained:
                explained[n] = ctx.profiled(n)

    # 4. the rows
    rows = [make_row("baseline", None, base_plain, base_plain, explained.get("baseline"), None, opts)]
    for n, why in planned:
        rows.append(make_row(n, why, base_plain, runs[n], explained.get(n), predict(n), opts))
    noise = unchanged_noise(rows)
    if noise and opts.repeat == 1:
        apply_noise(rows, noise)
    if opts.repeat == 1 and len(rows) > 1:
        notes.append("one round: each speed-up is one run of the variant against one of the baseline; a change below "
                     "the runs' spread cannot be told from noise (unchanged launch-bound programs on the H100 measured "
                     "up to 1.76x apart in one round); --repeat 3 measures the spread")
    skipped = [r for r in rows if r["status"] == "not applied"]
    for r in skipped:
        notes.append(f"`{r['name']}` not applied: {r['not_applied']}; its run was the program unchanged, so no "
                     "speed-up is given" + (f" (it measured {r['unchanged_run']['speedup']:.2f}x against the "
                                            "baseline: run-to-run noise)" if r.get("unchanged_run") else ""))
    if rows[0]["step_ns"] is None and rows[0]["status"] == "ok":
        notes.append("the baseline has no steps: no optimizer step, DataLoader iteration or model call was seen by the "
                     "launcher's hooks, and the program marks none; mark them with nsighttc.annotate.step(): "
                     "speed-ups need them")
    if any(r["name"].split("+")[0] == "fp16-autocast" or "fp16-autocast" in r["name"].split("+") for r in rows):
        notes.append(variants_mod.FP16_WARNING)
    if opts.repeat > 1:
        meds = [b["step_ns"] for b in base_plain if b.get("step_ns")]
        if len(meds) >= 2:
            notes.append(f"the baseline's step over {len(meds)} rounds: {min(meds) / 1e6:.4g} to "
                         f"{duration(max(meds))} ({100 * (max(meds) / min(meds) - 1):.1f}% apart)")
    doc = _document(target, opts, gpus, notes, base_doc, rows)
    write(run_dir, doc)
    return Outcome(run_dir, doc)


def _document(target, opts: TryOptions, gpus, notes: list[str], base_doc: dict | None, rows: list[dict]) -> dict:
    """try.json's document (schema ``nsighttc.try/1``)."""
    return {"schema": SCHEMA_ID, "program": target.label,
            "command": shlex.join(target.argv if not target.module else ["python", "-m", *target.argv]),
            "gpu": [g.__dict__ for g in gpus], "metric_pattern": opts.metric, "repeat": opts.repeat,
            "measured": "plain runs, steps timed at their boundaries (CUDA events where the program uses CUDA)",
            "window": not (opts.full_run or opts.metric), "notes": notes,
            "findings": [{"id": f["id"], "title": f["title"], "severity": f["severity"], "gain": f.get("gain")}
                         for f in (base_doc or {}).get("findings") or []],
            "variants": rows}


def _why_no_verdict(error: str | None) -> str:
    """Why the profiled baseline gave no verdict, in the user's terms: a Python without PyTorch cannot record with
    torch.profiler, though the plain runs (which need none) measured the program."""
    if not error:
        return ""
    if "No module named 'torch'" in error:
        return (" (its recording uses torch.profiler, and this Python has no PyTorch; the plain runs need none: "
                "`pip install torch`, or --verdict FILE from a profile run elsewhere)")
    return f" ({error})"
