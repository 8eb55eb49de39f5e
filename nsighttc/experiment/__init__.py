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
from pathlib import Path
from typing import Callable

from ..durations import duration
from ..runtime import variants as variants_mod
from . import measure, rounds as rounds_mod
from .options import AUTOCASTS, PATCH, SCHEMA_ID, Outcome, TryOptions, read_metric, validate
from .rows import add_note, apply_noise, best_two, row as make_row, schema_problem, unchanged_noise, write
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
            picked = choose(base_doc or {}, base_plain[0].get("_record"), opts.workers, base_plain[0].get("_steps")) \
                if base_plain[0]["status"] == "ok" else []
            picked.sort(key=lambda p: -((predict(p[0]) or {}).get("high") or 0.0))
            if not picked:
                notes.append("--variant auto: the baseline's verdict points to no variant"
                             + ("" if base_plain[0]["status"] == "ok" else " (the baseline failed)"))
            planned += picked
        elif n != "baseline":
            planned.append((n, None))
    planned = list({n: (n, why) for n, why in reversed(planned)}.values())[::-1]  # first mention wins
    patches = _patches(ctx, opts, planned, run_dir, notes) if opts.fix else {}

    # 3. plain runs in rounds (baseline, then each variant), the next bottleneck after the first round
    base_runs: dict[int, dict] = {0: base_plain[0]}
    runs: dict[str, dict[int, dict]] = {n: {} for n, _ in planned}
    for n, _ in planned:
        runs[n][0] = ctx.plain(n, 0)
    auto = "auto" in names
    nxt = None
    if base_plain[0]["status"] == "ok":
        nxt, combo, why = _next_bottleneck(ctx, opts, base_runs, runs, auto, explained)
        if combo and combo not in runs:
            planned.append((combo, why))
            runs[combo] = {0: ctx.plain(combo, 0, pair=base_runs[0])}
    rounds_run, stopped = _more_rounds(ctx, opts, base_runs, runs, [n for n, _ in planned], notes)
    if opts.explain:
        for n in ["baseline"] + [n for n, _ in planned]:
            if n not in explained:
                explained[n] = ctx.profiled(n)

    # 4. the rows
    base_list = [base_runs[r] for r in sorted(base_runs)]
    rows = [make_row("baseline", None, base_list, base_list, explained.get("baseline"), None, opts)]
    for n, why in planned:
        b, v = _aligned(base_runs, runs[n])
        rows.append(make_row(n, why, b, v, explained.get(n), predict(n), opts))
    for r in rows:
        if r["name"] in patches:
            _patch_row(r, patches[r["name"]], rows)
    if nxt is not None:
        done = next((r for r in rows if r["name"] == f"{nxt['after']}+{nxt.get('variant')}"), None)
        if done is not None and done.get("speedup"):
            nxt["measured_speedup"] = round(done["speedup"], 4)
            nxt["measured_change"] = done.get("change")
    noise = unchanged_noise(rows)
    if noise and rounds_run == 1:
        apply_noise(rows, noise)
    if rounds_run == 1 and len(rows) > 1:
        notes.append("one round: each speed-up is one run of the variant against one of the baseline; a change below "
                     "the runs' spread cannot be told from noise (unchanged launch-bound programs on the H100 measured "
                     "up to 1.76x apart in one round); without --repeat, try runs rounds until each answer is clear")
    if stopped:
        notes.append(stopped)
    skipped = [r for r in rows if r["status"] == "not applied"]
    for r in skipped:
        notes.append(f"`{r['name']}` not applied: {r['not_applied']}; its run was the program unchanged, so no "
                     "speed-up is given" + (f" (it measured {r['unchanged_run']['speedup']:.2f}x against the "
                                            "baseline: run-to-run noise)" if r.get("unchanged_run") else ""))
    if rows[0]["step_ns"] is None and rows[0]["status"] == "ok":
        notes.append("the baseline's steps were still getting faster when its runs ended (no steady rate after the "
                     "last fall): no speed-up can be given; run it longer (more steps, or --full-run)"
                     if rows[0].get("change") == "never settled" else
                     "the baseline has no steps: no optimizer step, DataLoader iteration or model call was seen by the "
                     "launcher's hooks, and the program marks none; mark them with nsighttc.annotate.step(): "
                     "speed-ups need them")
    if any(r["name"].split("+")[0] == "fp16-autocast" or "fp16-autocast" in r["name"].split("+") for r in rows):
        notes.append(variants_mod.FP16_WARNING)
    if rounds_run > 1:
        meds = [b["step_ns"] for b in base_list if b.get("step_ns")]
        if len(meds) >= 2:
            notes.append(f"the baseline's step over {len(meds)} rounds: {min(meds) / 1e6:.4g} to "
                         f"{duration(max(meds))} ({100 * (max(meds) / min(meds) - 1):.1f}% apart)")
    doc = _document(target, opts, gpus, notes, base_doc, rows, rounds_run)
    doc["next"] = nxt
    write(run_dir, doc)
    return Outcome(run_dir, doc)


def _patches(ctx: Runner, opts: TryOptions, planned: list, run_dir, notes: list[str]) -> dict:
    """``--fix``: each planned variant's source edit (``nsighttc.fix``), a patched copy of the program to run as a
    row of its own (``patch:V``) beside the variant; where no safe edit exists, a note says why."""
    from .. import fix
    from ..profile import resolve_target, safe_name
    if ctx.target.module or not ctx.target.argv or not str(ctx.target.argv[0]).endswith(".py"):
        notes.append("--fix: the program is run as a module or a command, not a script: no file to patch")
        return {}
    out = {}
    for n, _ in list(planned):
        if "+" in n:
            continue
        p = fix.plan(Path(ctx.target.argv[0]), n, opts.workers)
        if not p.changed:
            notes.append(f"--fix `{n}`: no patch: " + "; ".join(p.skipped or ["nothing to edit"]))
            continue
        script = fix.materialize(p, run_dir / "patched" / safe_name(n))
        (run_dir / "patched" / f"{safe_name(n)}.diff").write_text(p.diff())
        name = f"{PATCH}{n}"
        ctx.patched[name] = resolve_target(str(script), list(ctx.target.argv[1:]), None)
        planned.append((name, f"--fix: the edit for `{n}`: " + "; ".join(p.done)))
        out[name] = p
    return out


def _patch_row(row: dict, patch, rows: list[dict]) -> None:
    """A patch row's diff, whether it is kept (it ran and made the program measurably faster), and where the edit
    and the launcher's variant measured apart."""
    row["patch"] = patch.to_json()
    row["patch"]["kept"] = row["status"] == "ok" and row.get("change") == "faster"
    twin = next((r for r in rows if r["name"] == patch.variant), None)
    sp, tsp = row.get("spread") or {}, (twin or {}).get("spread") or {}
    if twin and row.get("speedup") and twin.get("speedup") and sp and tsp and \
            (sp["high"] < tsp["low"] or tsp["high"] < sp["low"]):
        add_note(row, f"the edit measured {row['speedup']:.2f}x and the launcher's `{patch.variant}` "
                      f"{twin['speedup']:.2f}x: they do not do the same (the variant applies from the start to every "
                      "loader and flag; the edit where the program sets it)")


def _aligned(base_runs: dict[int, dict], runs: dict[int, dict]) -> tuple[list[dict], list[dict]]:
    """The baseline's and a variant's runs of the rounds the variant ran in, in round order (paired)."""
    rs = sorted(runs)
    return [base_runs[r] for r in rs if r in base_runs], [runs[r] for r in rs if r in base_runs]


def _unclear(base_runs: dict[int, dict], runs: dict[int, dict]) -> bool:
    """Whether another round would tell more about a variant: it ran and changed something in every round so far,
    and its speed-up's interval neither excludes 1.00x nor lies within the no-change band (``rounds.state``)."""
    from .rows import not_applied
    b, v = _aligned(base_runs, runs)
    if not v or any(r["status"] != "ok" for r in v) or not_applied(v[0].get("applied")):
        return False
    m = measure.compare([x.get("_steps") for x in b], [x.get("_steps") for x in v])
    return m.get("speedup") is not None and not m.get("clear")


def _more_rounds(ctx: Runner, opts: TryOptions, base_runs: dict, runs: dict, names: list[str],
                 notes: list[str]) -> tuple[int, str | None]:
    """Rounds after the first: ``--repeat N`` runs N in all; without it, rounds run while a variant is not clear
    (``experiment.rounds``), at most ``MAX_ROUNDS``, each only if it still ends within ``--budget``. Returns the
    rounds run and why they stopped short, where they did."""
    budget = opts.budget if opts.budget is not None else rounds_mod.DEFAULT_BUDGET_S
    spent = sum(r.get("seconds") or 0 for r in base_runs.values()) + \
        sum(r.get("seconds") or 0 for rs in runs.values() for r in rs.values())
    r = 1
    while True:
        if opts.repeat is not None:
            if r >= opts.repeat:
                return r, None
            active = [n for n in names if runs[n] and all(x["status"] == "ok" for x in runs[n].values())]
        else:
            active = [n for n in names if _unclear(base_runs, runs[n])]
            if not active:
                return r, None
            if r >= rounds_mod.MAX_ROUNDS:
                return r, (f"stopped after {r} rounds (the most try runs): still not clear: "
                           + ", ".join(f"`{n}`" for n in active))
            last = (base_runs[r - 1].get("seconds") or 0) + sum(
                (runs[n][max(runs[n])].get("seconds") or 0) for n in active)
            if not rounds_mod.another_round(spent, last, budget):
                return r, (f"stopped after {r} round(s): another (~{last:.0f} s) would pass the budget of "
                           f"{budget:.0f} s (--budget); still not clear: " + ", ".join(f"`{n}`" for n in active))
        base_runs[r] = ctx.plain("baseline", r)
        if base_runs[r]["status"] != "ok":
            notes.append(f"round {r + 1}: the baseline failed ({base_runs[r]['error']}); the rounds stopped there")
            del base_runs[r]
            return r, None
        for n in active:
            runs[n][r] = ctx.plain(n, r, pair=base_runs[r])
        spent += (base_runs[r].get("seconds") or 0) + sum(runs[n][r].get("seconds") or 0 for n in active)
        r += 1


def _next_bottleneck(ctx: Runner, opts: TryOptions, base_runs: dict, runs: dict, auto: bool,
                     explained: dict) -> tuple[dict | None, str | None, str | None]:
    """After the first round: the best variant, what limits its steps next (``next_cause``), and auto's
    combination, the best variant plus the fix for that cause (else the best two of different causes):
    (next bottleneck or None, combination or None, why it was chosen)."""
    from . import next_cause
    from .rows import ranked
    first = {n: [rs[0]] for n, rs in runs.items() if 0 in rs}
    order = ranked([base_runs[0]], first)
    if not order:
        return None, None, None
    best = order[0][1]
    nxt = next_cause.from_plain(best, first[best], opts.workers)
    if nxt is None and auto:  # nothing the plain runs measure: the best variant's own profiled run says
        if best not in explained:
            explained[best] = ctx.profiled(best)
        doc = explained[best].get("_verdict")
        if doc:
            nxt = next_cause.from_verdict(best, doc, explained[best].get("_record"), opts.workers)
    if not auto:
        return nxt, None, None
    if nxt and nxt.get("variant") and next_cause.family(nxt["variant"]) not in next_cause.families(best):
        combo = f"{best}+{nxt['variant']}"
        return nxt, combo, (f"--variant auto: the fastest variant, `{best}`, then what holds its steps: "
                            f"{nxt['cause']} ({nxt['evidence']})")
    combo = best_two([base_runs[0]], first)
    return nxt, combo, ("--variant auto: the two variants that made the program fastest (different causes), combined"
                        if combo else None)


def _document(target, opts: TryOptions, gpus, notes: list[str], base_doc: dict | None, rows: list[dict],
              rounds_run: int = 1) -> dict:
    """try.json's document (schema ``nsighttc.try/1``)."""
    return {"schema": SCHEMA_ID, "program": target.label,
            "command": shlex.join(target.argv if not target.module else ["python", "-m", *target.argv]),
            "gpu": [g.__dict__ for g in gpus], "metric_pattern": opts.metric, "repeat": rounds_run,
            "rounds_rule": (f"--repeat {opts.repeat}" if opts.repeat is not None else
                            f"until clear (at most {rounds_mod.MAX_ROUNDS} rounds, --budget "
                            f"{opts.budget if opts.budget is not None else rounds_mod.DEFAULT_BUDGET_S:.0f} s)"),
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
