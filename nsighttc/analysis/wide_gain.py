"""Gains on more than one step (``gain.estimate`` for findings of ``gain.KIND`` "loop" and "job"): a loop's new input
shapes on the loop's whole time (what the median step leaves out), a job's straggler and exposed communication on the
slowest rank's step. Each ``{low, high, basis}`` as ``gain``'s."""
from __future__ import annotations

import numpy as np

from ..durations import duration
from .ranks.communication import hideable  # (what overlapping could hide: the transfers)


def loop(f: dict, doc: dict) -> dict:
    """What a loop gains from a few input shapes instead of one per batch (``shape-churn``), on the loop's whole time
    (what the median step leaves out): the same steps, each at a known shape's speed, and a few shapes' cost paid once.

    The loop: its steady steps, the warm-up steps after the first (``slow._warm_new_shapes``: a loop meets most of its
    new shapes first) and the steps the launcher timed before the recording (``before_window``), not the program's
    first step (it sets the process up and, compiled, compiles: a cost of its own); the steps at known shapes at the
    program's unrecorded speed where the launcher timed it. After the fix, at the high end: every step at the known-shape
    steps' mean (no padding cost) and no shape paid in the loop (a loop that runs on pays its few shapes once, and
    the recording's loop is as long as its window), as far as the range stays within ``WIDTH`` (else ``BUCKETS`` - 1
    shapes paid at the median cost of a new one: the first step met one); at the low end: every step at the longest
    known-shape steps' time (``slow.KNOWN_HIGH``: each padded to the longest shape) and ``BUCKETS`` shapes at the
    costliest new one's cost (padded shapes are the longest ones, whose preparation costs the most: an image loop
    padded to three sizes measured 5.2x where its costliest size set the low end at 4.6x and the 90th percentile at
    5.3x), less outliers (``OUTLIER``: a compiled loop's 433 ms step beside 50-80 ms for its other new lengths), and
    never under 1x. A first run's warm-up steps before its window, recorded with the operators' arguments for the
    replay (``before_window.recorded``), count at a known-shape step's speed, not as they ran. What the width comes
    from is said in the basis.

    Why a model of the fix, not "half to all of the new shapes' cost removed": that gave 1.9-24x for an image loop at
    25 sizes under cudnn.benchmark where padding to three sizes measured 3.8-4.5x (H200, wrappers/varlen_conv.py,
    reports/steps_time); all removed is what the shapes' cost alone bounds, and the basis says it."""
    tl = doc.get("timeline") or {}
    fam = next((x for x in tl.get("step_families") or []
                if x.get("shape_churn") and f"`{x['name']}`" in f.get("title", "")), None)
    acc = (fam or {}).get("shape_churn")
    if not acc or not acc.get("loop_ns"):
        return {"low": None, "high": None, "basis": "no loop accounting in this verdict"}
    loop, cost = acc["loop_ns"], acc["new_shape_excess_ns"]
    warm_ns, warm_cost = float(acc.get("warmup_ns") or 0.0), float(acc.get("warmup_new_shape_excess_ns") or 0.0)
    pre = acc.get("before_window") or {}
    pre_ns, pre_cost = float(pre.get("ns") or 0.0), float(pre.get("new_shape_excess_ns") or 0.0)
    # the program's other step families run on as they are: the gain is on all the steps' time, not this loop's
    others = sum(float(x.get("steady_wall_ns") or 0.0) for x in tl.get("step_families") or [] if x is not fam)
    paid = cost + warm_cost + pre_cost
    known = loop + warm_ns - cost - warm_cost  # the recorded steps' time at a known shape's speed
    # the steps at known shapes at the program's unrecorded speed, where the launcher timed it (``profile.window``):
    # the recording slows their launches, not the new shapes' preparation (H200, BERT-base at 36 lengths, a cached
    # run: 8.81 ms recorded, 6.67 ms unrecorded, at a length seen before)
    scale, u = 1.0, (tl.get("steps") or {}).get("unrecorded") or {}
    if u.get("known_shape_ns") and u.get("median_ns") and (tl.get("steps") or {}).get("name") == fam["name"] and \
            1.0 < float(u["known_shape_ns"]) / float(u["median_ns"]) <= MAX_RECORDING_COST:
        scale = float(u["median_ns"]) / float(u["known_shape_ns"])
    def at_speed(k: float) -> float:
        """All the steps' time with the known-shape steps at ``k`` times their recorded time."""
        pre_known = pre_ns - pre_cost  # (the launcher timed those unrecorded, in a run recording from its window)
        if pre.get("recorded"):  # ... a first run's warm-up ran under the operators' recording: at a known step's speed
            pre_known = min(pre_known, int(pre.get("steps") or 0) * float(acc.get("base_ns") or 0.0) * k)
        return others + known * k + pre_known + paid

    whole = at_speed(scale)
    each = sorted(list(acc.get("new_shape_excess_each_ns") or []) + list(acc.get("warmup_new_shape_excess_each_ns") or [])
                  + list(pre.get("new_shape_excess_each_ns") or []))
    n = int(acc["steps"]) + int(acc.get("warmup_later_steps") or 0) + int(pre.get("steps") or 0)
    of = _loop_words(acc, loop, warm_ns, warm_cost, pre, pre_ns, pre_cost, others)
    all_removed = whole / max(whole - paid, 1.0)
    speed = (f"; the steps at known shapes at the program's unrecorded speed ({duration(u['median_ns'])} a step "
             f"against {duration(u['known_shape_ns'])} recorded)") if scale < 1.0 else ""
    before = BEFORE_STEADY if fam.get("warmup_steps") and not warm_cost and not pre_ns else ""
    if not each or not acc.get("known_mean_ns") or not n:  # (a verdict saved before the model's inputs were kept)
        return {"low": round(whole / max(whole - 0.5 * paid, 1.0), 3), "high": round(all_removed, 3),
                "basis": f"`shape-churn`: half to all of the {duration(paid)} the steps at new shapes took beyond a "
                         f"step at a known shape removed, of {of}" + before + speed}
    mean, longest = float(acc["known_mean_ns"]) * scale, float(acc.get("known_high_ns") or acc["known_mean_ns"]) * scale
    median, tenth = float(np.median(each)), float(np.percentile(each, 90))
    costliest = max(x for x in each if x <= OUTLIER * tenth)  # (the costliest, less outliers)
    per, requests = _shapes_per_length(tl, fam, len(each))
    more = (BUCKETS - 1) * per  # (the shapes the fixed loop pays beyond the first step's)
    fast = others + n * mean + more * median
    slow = others + n * longest + BUCKETS * per * costliest
    paid_in_loop = min(whole / max(fast, 1.0), all_removed)
    low = max(min(whole / max(slow, 1.0), paid_in_loop), 1.0)  # (a fix that pays more shapes than the loop did: none)
    # The high end at the program's own speed where no unrecorded step measured it (a first run, or a run whose window
    # ran to the program's end): the known-shape steps up to ``UNMEASURED_RECORDING_COST`` faster than recorded, never
    # faster than their GPU work (the family's median busy share). The shapes' own cost is the host's preparation,
    # which the recording slows little, so the loop without it is faster still than the recorded steps say.
    # Steps timed unrecorded that were no faster than the recorded ones measured the host's speed moving, not the
    # recording's cost (``probe_encoder_varlen.py``, H200, a cached run: 4 steps of 5.93 ms unrecorded against 5.08 ms
    # recorded, where plain runs' batches at a seen length took 3.3-3.8 ms and bucketing measured 4.2x against the
    # range's 3.99x high end): the high end then takes the unmeasured rule, as where nothing was timed.
    fast_scale = 1.0 if scale < 1.0 else max(1.0 / UNMEASURED_RECORDING_COST,
                                             min(float(fam.get("median_gpu_busy_share") or 0.0), 1.0))
    if fast_scale < 1.0:  # (``scale`` is 1 here: nothing unrecorded measured it)
        whole_fast = at_speed(fast_scale)
        all_removed = whole_fast / max(whole_fast - paid, 1.0)
        paid_in_loop = min(whole_fast / max(others + n * mean * fast_scale + (BUCKETS - 1) * median, 1.0), all_removed)
    # the high end: no new shape paid in the loop, each step at the known-shape mean, where that stays within
    # ``WIDTH`` x the low end (else the few shapes paid in the loop, or the end ``WIDTH`` x the low end allows)
    high = min(all_removed, max(paid_in_loop, WIDTH * low))
    first = _first_meeting(acc, paid, whole_fast if fast_scale < 1.0 else whole)
    if first is not None and min(first, WIDTH * round(low, 3)) > high * 1.001:
        high = min(first, WIDTH * round(low, 3))  # (of the low end as said: the range within WIDTH as shown)
    no_faster = bool(u.get("median_ns") and u.get("known_shape_ns")) and \
        float(u["median_ns"]) >= float(u["known_shape_ns"])
    slower = (f"; the {u.get('steps')} steps timed unrecorded ({duration(float(u['median_ns']))} a step) were no "
              "faster: the host's own speed moved more than the recording cost") if no_faster else ""
    at = (" as recorded (the recording's cost on them was not measured: at the high end up to "
          f"{1 / fast_scale:.2f}x faster, {UNMEASURED_WORDS}{slower})") if fast_scale < 1.0 else \
        " as recorded (the recording's cost on them was not measured: a plain run's can be faster)" \
        if not u.get("median_ns") else ""  # (at the unrecorded speed: said after, with both speeds)
    total = f" ({duration(whole)})" if abs(whole - loop) > 0.01 * loop else ""
    paid_words = f"{BUCKETS} shapes" if per == 1 else \
        f"{BUCKETS} lengths of {per} new shapes each ({BUCKETS * per} shapes: {GENERATION_WORDS})"
    basis = (f"`shape-churn`: {of}{total}, against the same {n} steps at a few shapes: from each padded to the "
             f"longest known-shape step ({duration(longest)}) and {paid_words} paid at the costliest new shape's "
             f"cost ({duration(costliest)}), to each at the known-shape steps' mean{at} ({duration(mean)}) and ")
    none_paid = high >= all_removed * 0.999
    if none_paid:
        basis += (f"no shape paid in the loop, as a loop that runs on pays its few shapes once or the per-shape work "
                  f"turned off (as the fix below may allow) pays none ({more} more paid in it at a new "
                  f"shape's median cost ({duration(median)}): {paid_in_loop:.2f}x)")
    elif high > paid_in_loop * 1.001:
        basis += (f"fewer than {more} more shapes paid in the loop ({more} at a new shape's median cost "
                  f"({duration(median)}): {paid_in_loop:.2f}x; none: {all_removed:.2f}x; the range kept within "
                  f"{WIDTH:g}x)")
    else:
        basis += f"{more} more shapes paid at a new shape's median cost ({duration(median)})"
    basis += speed + before
    if per > 1 and low <= 1.0:
        basis += (f"; a loop as short as the recorded one ({requests} requests) pays as many shapes at a few lengths "
                  f"as it did at its own, so the fix gains with the number of requests the program serves")
    basis += (f". The width is the padding's cost ({longest / mean:.2f}x a step), the spread of what a new shape "
              f"costs ({duration(each[0])} to {duration(each[-1])}, {len(each)} seen) and how many shapes the fixed "
              f"loop pays while it runs")
    if not none_paid:
        basis += (f"; with no shape paid at all (the per-shape work turned off, as the fix below may allow) up to "
                  f"{all_removed:.1f}x")
    if first is not None:
        basis += (f"; a machine meeting these shapes for the first time pays more for each ({FIRST_MEETING:g}x "
                  f"counted, up to {first:.2f}x" + (f", the range kept within {WIDTH:g}x" if first > high * 1.001
                                                     else "") + f"): {FIRST_MEETING_WORDS}")
    return {"low": round(low, 3), "high": round(high, 3), "basis": basis}


# A generation loop's steps are its model calls, and a request at a prompt length new to the loop meets a new shape at
# each of them: its key/value length grows a token a call from the prompt's. Padded to a few lengths, the loop still
# pays every call's shape once a length. Llama-shaped generate() over prompts of 16-600 tokens, 32 new tokens, cuDNN's
# attention planning each new length (an H200, benchmarks/gpu/user_programs/gen_varlen.py): a range that paid 3 shapes
# read 1.79-4.65x and 1.75-5.26x where bucketing to multiples of 128 measured 1.47-1.92x over 40 requests.
GENERATION_WORDS = ("a request's calls each meet a new key/value length, its cache growing a token a call from the "
                    "prompt's")


def _shapes_per_length(tl: dict, fam: dict, new: int) -> tuple[int, int]:
    """(new shapes a new length costs, requests recorded): a generation loop's model calls per request where its
    steps are those calls and they met more new shapes than it had requests (its decode calls met them, not only
    its prefills), else 1."""
    inf = tl.get("inference") or {}
    requests, calls = int(inf.get("requests_recorded") or 0), int(inf.get("model_calls") or 0)
    if inf.get("kind") != "generation" or not requests or not calls or new <= requests or \
            (tl.get("steps") or {}).get("name") != fam.get("name"):
        return 1, requests
    return max(1, round(calls / requests)), requests


# A new shape's cost paid in kernels a library compiles at run time for each shape, kept on disk by CUDA's JIT cache:
# a machine (or a cache) meeting the shapes for the first time pays it again, slower. cuDNN's generated attention
# kernels (``cudnn_generated_fort_native_sdpa_*``): a transformers pipeline over texts of 12-250 words on fresh H200s
# ran 330, 311 and 296 texts/s plain, later runs on two of those machines 527 and 427 (the same lengths; padded to 256:
# 955-1,066), so the lengths cost about twice as much the first time; BERT's variable-length loop, about 2.1x (~400
# against ~190 ms a new length). The range's high end counts each new shape at ``FIRST_MEETING`` x its cost here
# (benchmarks/gpu/user_programs/pipe_varlen.py, gpu_steps_time.sh users3/users3b/users3c; reports/steps_time).
RUNTIME_COMPILED = ("cudnn_generated_",)
FIRST_MEETING = 2.0
FIRST_MEETING_WORDS = ("cuDNN compiles its generated kernels (`cudnn_generated_*`) for each new shape at run time "
                       "and CUDA keeps them in its JIT cache on disk, so a run that meets the shapes first (a fresh "
                       "machine or container) pays about twice what a later run does; plain runs of a pipeline on "
                       "fresh H200s were 1.4-1.7x slower than a later one at the same lengths")


def _first_meeting(acc: dict, paid: float, whole: float) -> float | None:
    """The loop's gain with no shape paid, where the new shapes' cost was paid in run-time-compiled kernels
    (``RUNTIME_COMPILED``, their share of the host's pauses before new shapes' kernels, ``paid_before``) counted at
    ``FIRST_MEETING`` x: what a fresh machine's run gains. None where no such kernel paid."""
    before = acc.get("paid_before") or []
    total = sum(float(x.get("ns") or 0.0) for x in before)
    compiled = sum(float(x.get("ns") or 0.0) for x in before if str(x.get("name") or "").startswith(RUNTIME_COMPILED))
    if total <= 0 or compiled <= 0 or paid <= 0 or whole <= paid:
        return None
    extra = (FIRST_MEETING - 1.0) * paid * compiled / total
    return (whole + extra) / max(whole - paid, 1.0)


def _loop_words(acc, loop, warm_ns, warm_cost, pre, pre_ns, pre_cost, others) -> str:
    return (f"the loop's {duration(loop)} over {acc['steps']} steady steps" +
            (f", its {duration(warm_ns)} of warm-up steps after the first ({duration(warm_cost)} of it at "
             f"{_n_shapes(acc.get('warmup_new_shape_steps', 0))})" if warm_cost > 0 else "") +
            (f", the {duration(pre_ns)} of {pre.get('steps')} steps the program ran before the recording "
             f"({duration(pre_cost)} beyond a step at a known shape, {pre.get('new_shape_steps')} of them at new "
             "shapes" + ("; the rest at a known-shape step's speed: the operators' recording for the replay slowed "
                         "them" if pre.get("recorded") else "") + ")" if pre_ns > 0 else "") +
            (f" and the other step families' {duration(others)}" if others > 0.01 * loop else ""))


# The steps before the steady ones meet a loop's first lengths, most of them new: a gain judged on the steady steps
# leaves them out. BERT-base at 36 lengths on an H200 (reports/steps_time): bucketing measured 2.3-2.5x over the
# whole plain run (5.6-6.1x on a fresh machine, the driver's JIT cache empty), where a first run's steady steps gave
# up to 2.23x.
BEFORE_STEADY = ("; the steps before the steady ones (warm-up, start-up) are left out, and a loop meets most of its "
                 "new shapes first, so a whole run can gain more")
OUTLIER = 2.0  # a new shape's cost over this many times the 90th percentile of them is no padded shape's
# The high end's fixed loop pays its few shapes once, where a loop runs on: a fine-tune on texts of 66 lengths (H200,
# wrappers/varlen_train.py) measured 2.72x bucketed over 150 steps, where the same steps with 2 shapes paid at the
# median cost gave 2.51x: a recording's loop is as long as its window, shorter than the program's, which nsighttc
# stopped; a compiled loop's bucketed rate after its first batches (no shape paid) measured 8.0x, where its
# torch.profiler recording gave up to 5.69x with two shapes paid in the loop, 8.74x with none
# (tests/fixtures/steps/varlen_compiled).
WIDTH = 3.0  # ... within this many times the low end: a range a user can act on
BUCKETS = 3  # the shapes a padded loop keeps: "a few lengths" (BERT-base padded to 64/128/256, an image loop to
             # 192/256/320 pixels: wrappers/varlen_infer.py, wrappers/varlen_conv.py)
# What a recording of the ranges only cost the steps at a shape seen before, where the launcher timed them unrecorded
# too (H200, cached runs at lengths seen before, recorded -> unrecorded): BERT-base 8.57 -> 7.25 ms (1.18x) and 8.81 ->
# 6.67 ms (1.32x), GPT-2 small 10.7 -> 6.95 ms (1.54x). A first run times no step unrecorded (it records from the
# start, and an inference loop's window runs to its end), so its high end takes them this much faster at most: its
# ranges missed the warm pairs by 2-3% (GPT-2: 1.92-2.49x against 2.57x; the fine-tune's 2.55x against 2.59x)
UNMEASURED_RECORDING_COST = 1.5
UNMEASURED_WORDS = "as a recording of the ranges slowed such steps 1.18-1.54x where it was measured, never under their GPU work"
MAX_RECORDING_COST = 3.0  # an unrecorded step this much faster than the recorded one is another program state, not
                         # the recording's cost: the known-shape steps are not rescaled


def _n_shapes(n: int) -> str:
    return f"{n} new shape{'s' if n != 1 else ''}"


def _own_excess(s: dict) -> float:
    """What a straggler's fix can remove per step (``ranks.own_excess``); a verdict saved before it had only the
    own-step gap (``excess_ns``), which also holds the other ranks' host time they waited through."""
    return float(s.get("own_excess_ns", s.get("excess_ns")) or 0.0)


def _of_transfers(dist: dict) -> str:
    return ", its transfers only (not the ranks' waits for each other)" if dist.get("exposed_transfer") else ""


def job(f: dict, doc: dict, low_fraction: float) -> dict:
    """``low_fraction``: the share of the wait the low end removes (``gain.HOST_LOW_FRACTION``)."""
    dist = doc.get("distributed") or {}
    T = dist.get("slowest_rank_step_ns")
    if not T:
        return {"low": None, "high": None, "basis": "no step time of the job"}
    if f["id"] == "straggler-rank":
        s = dist.get("straggler") or {}
        wait = min(_own_excess(s), T)
        what = "the straggler's own work beyond the median rank's"
    elif f["id"] == "exposed-sharded-communication":  # the gathers and scatters the finding names (its top three)
        wait = min(hideable(sum(x["exposed_per_step_ns"] for x in (dist.get("sharded_collectives") or [])[:3]),
                              dist), T)
        what = "the exposed all-gathers and reduce-scatters" + _of_transfers(dist)
    elif dist.get("straggler"):  # what stays exposed after the straggler's fix, on the step that fix leaves
        s = dist["straggler"]
        T = max(T - min(_own_excess(s), T), 1.0)
        wait = min(s.get("own_wait_per_step_ns") or 0.0, T)
        what = "the communication the straggler itself waits in, once it is fixed"
    else:
        wait = hideable(T * (dist.get("exposed_comm_share") or 0.0), dist)
        what = "the communication no compute overlaps" + _of_transfers(dist)
    if wait <= 0:
        return {"low": None, "high": None, "basis": f"{what}: none"}
    low, high = T / (T - low_fraction * wait), T / max(T - wait, 1.0)
    basis = f"half to all of {what} ({duration(wait)} of the slowest rank's {duration(T)} step) removed"
    u = ((((doc.get("timeline") or {}).get("steps") or {}).get("unrecorded")) or {}).get("median_ns")
    if f["id"] == "straggler-rank" and u and wait < u < T:
        # the recording slowed the step (its launches, CUPTI) but not all of the excess (a sleep, Python work): the
        # step it leaves, at the program's own speed, is between the recorded rest scaled down and the unrecorded
        # step less the whole excess (DDP with a 30 ms sleep on a rank, two H200s: 92 ms recorded, 67 ms plain,
        # 28 ms balanced: 2.4x, where the recorded step alone bounds it at 1.7x)
        high = u / (u - wait)
        basis += f"; at the program's unrecorded step ({duration(u)}, measured in this run) up to {high:.2f}x"
    return {"low": round(low, 3), "high": round(max(high, low), 3), "basis": basis}


# The low end of a checkpoint's fix: half of what the checkpoints cost the loop goes (saved half as often); the high
# end: all of it (saved rarely enough not to count, or wholly off the loop). H200, wrappers/checkpoint_loop.py
# (reports/steps_time/checkpoint): a first run put it at 1.66-4.95x, a cached run at 1.69-5.53x, where plain runs
# measured 1.72-1.98x saving half as often and 5.0-5.8x saving none; a writer thread (an asynchronous save whose
# copies and write still share the machine with the loop) measured 1.44-1.65x, under the low end: the advice says it.
CHECKPOINT_LOW_FRACTION = 0.5


def checkpoint(f: dict, doc: dict) -> dict:
    """What a loop gains from checkpoints saved less often or off its critical path (``checkpoint-in-loop``), on the
    loop's whole time (its steady steps, the other step families' too): their cost (``slow_causes``' ``checkpoint``:
    their time beyond the typical step, less their data loading) half removed to all removed. Where the launcher timed
    the program's steps after its window unrecorded (``steps.unrecorded``), those steps count too, and their slow steps'
    time beyond their median in the share the checkpoints held of the recorded slow steps' (a window of 12 steps holds
    one checkpoint of a program that saves every 15: the recording alone would put it at one in 12)."""
    tl = doc.get("timeline") or {}
    sc = (tl.get("loop_time") or {}).get("slow_causes") or {}
    ck = sc.get("checkpoint")
    fams = tl.get("step_families") or []
    if not ck or not fams or not ck.get("cost_ns"):
        return {"low": None, "high": None, "basis": "no checkpoint account in this verdict"}
    fam = fams[0]
    loop = float((fam.get("time_accounting") or {}).get("loop_ns") or 0.0)
    others = sum(float(x.get("steady_wall_ns") or 0.0) for x in fams[1:])
    whole, paid = loop + others, float(ck["cost_ns"])
    done, kind, many, act = ("copied", "copying", "copying steps", "copying") if f["id"] == "host-copies-in-loop" \
        else ("saved", "checkpoint", "checkpoints", "save")
    basis = (f"`{f['id']}`: {100 * CHECKPOINT_LOW_FRACTION:.0f}% ({done} half as often) to all ({done} rarely "
             f"enough not to count, or wholly off the loop) of the {duration(paid)} its "
             f"{ck['steps']} {kind} step{'s' if ck['steps'] != 1 else ''} took beyond the typical step, less their "
             f"data loading, of the loop's {duration(loop)} over its steady steps"
             + (f" and the other step families' {duration(others)}" if others > 0.01 * loop else ""))
    u = (tl.get("steps") or {}).get("unrecorded") or {}
    if (tl.get("steps") or {}).get("name") == fam["name"] and u.get("after_ns") and sc.get("excess_ns"):
        share = min(paid / float(sc["excess_ns"]), 1.0)
        more = share * float(u.get("slow_beyond_ns") or 0.0)
        whole += float(u["after_ns"])
        paid += more
        basis += (f"; with the {duration(float(u['after_ns']))} of the steps timed unrecorded after the window, "
                  f"{duration(more)} of them {many} ({100 * share:.0f}% of their slow steps' time beyond their "
                  "median, as in the recorded slow steps)")
    if whole <= 0 or paid <= 0:
        return {"low": None, "high": None, "basis": basis + ": nothing to remove"}
    paid = min(paid, 0.999 * whole)
    low = whole / (whole - CHECKPOINT_LOW_FRACTION * paid)
    high = whole / (whole - paid)
    if high > WIDTH * low:
        basis += (f". Wider than {WIDTH:g}x: the {many} hold {100 * paid / whole:.0f}% of the loop, so the gain "
                  f"turns on how much of them the fix takes out of it (how much rarer, and how much of the {act} "
                  "leaves it), which one recording cannot tell")
    return {"low": round(low, 3), "high": round(high, 3), "basis": basis}
