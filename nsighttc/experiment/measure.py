"""Speed from plain runs: the steady step of each phase (``runtime.step_timer``'s times), the program's step as the
phases weighed together, speed-ups with their spread, and whether a difference is a measurable change.

- Steady steps: the window's warm-up rule on the step times as they came (``step_timer.steady``), less their
  first half where it ran at another rate than the second (a drained prefetch buffer: ``step_timer.settled``);
  a phase's step is their **mean** (the time the steps took over their number), not their median: a loader whose
  workers deliver batches in bursts makes most steps short and every Nth long, and the median missed the long ones
  (H100, ``dataloader_bound.py`` with 8 workers: median 7.2 ms, mean 44 ms, the program's own rate 64 ms/step).
- Several phases: the program's step is the mean of the phases' steps weighted by how many steady steps
  the *baseline* ran in each, so a variant is weighed on the baseline's mix and a phase it ran more steps of does
  not count more.
- Speed-up and spread: with two rounds or more, the geometric mean of the rounds' speed-ups (each against the
  baseline run of the same round) and its 90% interval (``experiment.rounds``: the stopping rule); with one run, the
  ratio of the mean steps and the quartiles of the steps (baseline's upper quartile over the variant's lower, and the
  other way round), widened to hold the ratio: a change inside it is not claimed.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..runtime.step_timer import median, quartiles, settled, settled_at_end, steady
from . import rounds as rounds_mod


def read(path: Path) -> dict | None:
    """Per phase ``{step_ns (the steady steps' mean), q1_ns, q3_ns, steps, warmup, clock}`` of a plain run's step
    times, or None (no file, not readable, no step seen)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    out = {}
    for name, ph in (doc.get("phases") or {}).items():
        times, warm = steady(ph)
        if not times:
            continue
        if not settled_at_end(ph.get("gpu_ns") or ph.get("host_ns") or [], warm):
            out[name] = {"step_ns": None, "steps": len(times), "warmup": warm, "settled": False,
                         "clock": "gpu" if ph.get("gpu_ns") else "host"}
            continue
        n_steady = len(times)
        times, first_half = settled(times)
        first = warm + n_steady - len(times)  # index of the first step kept
        q = quartiles(times) or (times[0], times[0])
        all_times = ph.get("gpu_ns") or ph.get("host_ns") or []
        out[name] = {"step_ns": sum(times) / len(times), "q1_ns": q[0], "q3_ns": q[1], "steps": len(times),
                     "warmup": warm, "clock": "gpu" if ph.get("gpu_ns") else "host",
                     "warmup_ns": float(sum(all_times[:first]))}
        if all_times and sum(all_times) > 0:  # every step of the loop: new shapes, warm-up and slow steps included
            slow = sum(t for t in all_times if t > SLOW_STEP * q[1])
            out[name].update({"loop_ns": sum(all_times) / len(all_times), "loop_steps": len(all_times),
                              "slow_share": round(slow / sum(all_times), 4)})
            out[name].update(new_shapes(ph.get("shapes") or [], all_times, q[1]))
        if first_half is not None:  # the steady steps' first half ran at another rate: left out
            out[name]["first_half_ratio"] = round(first_half, 3)
        data = ph.get("data_ns") or []
        if len(data) == len(all_times) and sum(times) > 0:  # the host's wait in DataLoader fetches, those steps
            kept = data[first:first + len(times)]
            out[name]["data_share"] = round(min(1.0, sum(kept) / sum(times)), 4)
            fetched = (ph.get("fetches_gpu") or [])[first:first + len(times)]
            idle = (ph.get("fetches_gpu_idle") or [])[first:first + len(times)]
            if sum(fetched):  # the share of fetches after which the GPU had run dry: it waited on them
                out[name]["data_starved"] = round(sum(idle) / sum(fetched), 4)
        compiled = (ph.get("compiled") or [])[first:first + len(times)]
        if any(compiled):  # torch.compile compiled again during the timed steps: it never stopped
            out[name]["compiled_steps"] = int(sum(1 for c in compiled if c))
        gen = generation(times, (ph.get("kinds") or [])[first:first + len(times)],
                         (ph.get("batch") or [])[first:first + len(times)])
        if gen:
            out[name]["inference"] = gen
    return out or None


def new_shapes(shapes: list, times: list[float], typical: float) -> dict:
    """Where the step timer saw the main model's inputs change shape (``runtime.step_timer``'s ``shapes``): how many
    shapes, and the share of the loop the slow steps (over ``SLOW_STEP`` x ``typical``) at a shape not seen before
    took beyond a typical step: a loop held back by its new input shapes, told without a profiler."""
    if len(shapes) != len(times) or not times or sum(times) <= 0:
        return {}
    seen: set = set()
    excess = 0.0
    for x, t in zip(shapes, times):
        if x is not None and x not in seen and t > SLOW_STEP * typical:
            excess += t - typical
        seen.add(x)
    seen.discard(None)
    return {"shapes": len(seen), "new_shape_share": round(excess / sum(times), 4)}


def generation(times: list[float], kinds: list, batch: list) -> dict | None:
    """A generation loop's serving numbers from its steady model-call steps (``runtime.step_timer``'s kinds and
    sequences per call): time to first token (the prefill call's step, median), time per output token (the decode
    calls' mean step), tokens/s (each call makes one token per sequence, over the steps' time), and how many requests
    (prefills) the steps held. None when the steps are not model calls of a generation loop."""
    if len(kinds) != len(times) or not any(k == "decode" for k in kinds):
        return None
    dec = [t for t, k in zip(times, kinds) if k == "decode"]
    pre = [t for t, k in zip(times, kinds) if k == "prefill"]
    seqs = [(b or 0) for b in batch] if len(batch) == len(times) else []
    total = sum(times)
    out = {"tpot_ns": sum(dec) / len(dec), "ttft_ns": median(pre), "requests": len(pre), "calls": len(times),
           "tokens_per_s": (sum(seqs) / total * 1e9) if seqs and all(seqs) and total > 0 else None}
    return out


def program_step(phases: dict, weights: dict[str, int], whole: bool = False) -> tuple[float, float, float] | None:
    """(step, lower quartile, upper quartile) of the program's step: the phases' weighted by ``weights`` (the
    baseline's steady step counts); None when a weighted phase is missing. ``whole``: every step of the loop
    (``loop_ns``), its quartiles the step itself (the loop's slow steps are the point, not noise around a typical
    one)."""
    total = sum(weights.values())
    key = "loop_ns" if whole else "step_ns"
    if not total or any(p not in phases or phases[p].get(key) is None for p in weights):
        return None
    step = sum(w * phases[p][key] for p, w in weights.items()) / total
    if whole:
        return step, step, step
    q1 = sum(w * phases[p]["q1_ns"] for p, w in weights.items()) / total
    q3 = sum(w * phases[p]["q3_ns"] for p, w in weights.items()) / total
    return step, q1, q3


def weights_of(base: dict, whole: bool = False) -> dict[str, int]:
    return {p: v["loop_steps" if whole else "steps"] for p, v in base.items()}


# A step over SLOW_STEP times the steady steps' upper quartile is a slow one (a new input shape's first batch, a
# stall, a recompile); where slow steps hold at least WHOLE_LOOP_SHARE of the baseline's loop in every round, its
# steady step is not what the program costs: a BERT loop over 36 batch lengths on the H200 ran steady steps of 13 ms
# and a new length's first batch in 0.1-1.1 s (77-87% of the loop); padded to 4 lengths it ran 2.4-12x faster by its
# requests/s while its steady step moved 1.22x (reports/fix). A generate() loop's prefills and warm-up held 12% of
# its loop (H100): steady steps stay the measure there.
SLOW_STEP = 3.0
WHOLE_LOOP_SHARE = 0.2
SAME_LOOP = 0.02  # two runs whose step counts differ by at most this share ran the same loop


def whole_loop(pairs: list[tuple[dict, dict]]) -> str | None:
    """Why the rounds compare whole loops (every step's time, not the steady ones'): in every round the baseline's
    slow steps hold at least ``WHOLE_LOOP_SHARE`` of its loop in a phase, and every run ran the same steps (full runs:
    same count); None otherwise (window runs stop after their own steady window: their loops are not the same work)."""
    shares: dict[str, list[float]] = {}
    for b, v in pairs:
        for p, ph in b.items():
            n, m = ph.get("loop_steps"), (v.get(p) or {}).get("loop_steps")
            if not n or not m or abs(n - m) > SAME_LOOP * max(n, m):
                return None
            shares.setdefault(p, []).append(ph.get("slow_share") or 0.0)
    slow = {p: min(v) for p, v in shares.items() if min(v) >= WHOLE_LOOP_SHARE}
    if not slow:
        return None
    p, share = max(slow.items(), key=lambda kv: kv[1])
    return (f"the baseline's slow steps (over {SLOW_STEP:g}x a steady one: new input shapes, stalls, recompiles) held "
            f"{100 * share:.0f}%+ of its loop (`{p}`): every step of the same loop is compared, not the steady ones")


def compare(base_runs: list[dict | None], runs: list[dict | None]) -> dict:
    """A variant's speed-up over the baseline from paired rounds (round i of each): ``speedup`` (ratio of the
    median program steps over the rounds), ``spread`` ``{low, high, basis}``, ``change`` and each round's numbers."""
    pairs = [(b, v) for b, v in zip(base_runs, runs) if b and v]
    if not pairs:
        return {"speedup": None, "spread": None, "change": None, "rounds": [], "step_ns": None}
    unsettled = sorted({p for b, v in pairs for side in (b, v) for p, ph in side.items() if ph.get("settled") is False})
    if unsettled:  # a rate still falling when the run stopped is no rate: say so instead of giving a number
        return {"speedup": None, "spread": None, "change": "never settled", "rounds": [], "step_ns": None,
                "note": "the steps of " + ", ".join(f"`{p}`" for p in unsettled) + " were still getting faster when "
                        "the run ended (no steady rate after the last fall): no speed-up is given; run longer "
                        "(--full-run, or a program with more steps)"}
    whole = whole_loop(pairs)
    w = weights_of(pairs[0][0], bool(whole))
    rounds = []
    for b, v in pairs:
        bs, vs = program_step(b, w, bool(whole)), program_step(v, w, bool(whole))
        if bs and vs:
            rounds.append({"baseline_step_ns": bs[0], "step_ns": vs[0], "speedup": bs[0] / vs[0],
                           "_q": (bs[1] / vs[2], bs[2] / vs[1])})
    if not rounds:
        return {"speedup": None, "spread": None, "change": None, "rounds": [], "step_ns": None,
                "note": "the variant did not run every phase the baseline ran"}
    note = None
    if len(rounds) >= 2:
        # the geometric mean of the rounds' ratios and its 90% interval, never narrower than the baseline's own
        # run-to-run noise (``experiment.rounds``)
        noise = rounds_mod.run_noise([r["baseline_step_ns"] for r in rounds])
        sp, lo, hi = rounds_mod.interval([r["speedup"] for r in rounds], noise)
        step = median([r["step_ns"] for r in rounds])
        spread = {"low": lo, "high": hi, "basis": f"90% interval of the mean of {len(rounds)} rounds"}
        change = rounds_mod.state(lo, hi, len(rounds))
        clear = change is not None
        if change is None:  # not clear when the rounds stopped: the interval holds 1.00x
            change = "no measurable change"
            note = (f"not clear after {len(rounds)} rounds: the interval {lo:.2f}-{hi:.2f}x holds 1.00x (the runs "
                    "varied too much to tell; --budget or --repeat runs more rounds)")
    else:
        sp = rounds[0]["speedup"]
        step = rounds[0]["step_ns"]
        lo, hi = rounds[0]["_q"]
        # (the steps' quartiles say how steady each run was; the speed-up itself, a ratio of means, is kept inside)
        spread = {"low": min(lo, hi, sp), "high": max(lo, hi, sp), "basis": "quartiles of the steps (one run each)"}
        clear = False
        if spread["low"] <= 1.0 <= spread["high"]:
            change = "no measurable change"
        elif abs(sp - 1.0) < ONE_ROUND_NOISE:
            # one run of each: the steps' quartiles say how steady each run was, not how far two runs of the same
            # program land apart (plain runs of one program on the H100 moved 2-10% between runs)
            change = "no measurable change"
            note = (f"one round: a change under {ONE_ROUND_NOISE:.0%} cannot be told from run-to-run noise "
                    "(--repeat 3 measures it)")
        else:
            change = "faster" if sp > 1 else "slower"
    out = {"speedup": sp, "spread": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in spread.items()},
           "change": change, "step_ns": step, "clear": clear,
           "rounds": [{k: v for k, v in r.items() if not k.startswith("_")} for r in rounds]}
    if whole:
        out["whole_loop"] = whole
        out["spread"]["basis"] += "; whole loops"
    if note:
        out["note"] = note
    return out


# One round (one run of the baseline, one of the variant): a speed-up closer to 1.0 than this is not called a change,
# whatever the steps' own spread within each run.
ONE_ROUND_NOISE = 0.10
