"""The report's headlines: one sentence per question (Tensor Cores, the timeline's verdict, start-up, the ranks,
the first fix, where the evidence came from), worded from the verdict JSON; the terminal shows the same lines
(``headline_lines``)."""
from __future__ import annotations

from ...step_time import typical_step
from ..fmt import ns, pct


EVIDENCE_WORDS = {"hardware": "confirmed by hardware counters", "kernel-name": "inferred from kernel names",
                  "mixed": "hardware counters for some kernels, kernel names for others",
                  "none": "no evidence"}


def tc_line(tc: dict) -> str:
    """The Tensor Core headline every output shows: the one the verdict JSON carries (``tensor_cores.headline``,
    written beside ``verdict`` when the verdict is saved), or worded now for a verdict saved before it existed."""
    return tc.get("headline") or tc_headline(tc)


def tc_headline(tc: dict) -> str:
    """Words ``tensor_cores.verdict`` (never another answer: 'Tensor Cores: NO ...' is verdict ``no``)."""
    v = tc["verdict"]
    ev = EVIDENCE_WORDS.get(tc["evidence"], tc["evidence"])
    dtype_txt = dtype_words(tc)
    share = pct(tc["tc_time_share"], 0)
    comm = (tc.get("denominator") or {}).get("communication_share") or 0.0
    if comm >= 0.005:  # shares are of compute kernel time; communication is said apart
        return _tc_sentence(tc, v, ev, dtype_txt, share, "compute kernel time") + \
            f"; communication {pct(comm, 0)} of kernel time (collectives between GPUs), not counted"
    return _tc_sentence(tc, v, ev, dtype_txt, share, "GPU kernel time")


def dtype_words(tc: dict) -> str:
    """'bf16', 'fp16, bf16 (12% of it of unknown dtype)', 'dtype unknown', with where the dtype came from when
    instruction counts decided the Tensor Cores and kernel names the dtype; '' when nothing ran on them."""
    by = {d: s for d, s in (tc.get("by_dtype") or {}).items() if s > 0}
    known = [d for d in by if d != "unknown"]
    if not known:
        return "dtype unknown" if by else ""
    txt = ", ".join(known)
    unknown = by.get("unknown", 0.0) / sum(by.values())
    if unknown >= 0.005:
        txt += f" ({pct(unknown, 0)} of it of unknown dtype)"
    named = tc.get("dtype_from_names_share") or 0.0
    # (all by names: the evidence words say so once; instruction counts decide yes/no, the dtype is then the names')
    if named > 0.005 and tc.get("evidence") != "kernel-name":
        txt += (" (dtype from kernel names)" if named > 0.995 else
                f" (dtype of {pct(named, 0)} of it from kernel names)")
    return txt


def _tc_sentence(tc: dict, v: str, ev: str, dtype_txt: str, share: str, of: str) -> str:
    if tc.get("basis") == "sampled" and v in ("yes", "partial", "no"):
        # ncu sampled each kernel configuration once: shares are not GPU time shares
        word = {"yes": "YES", "partial": "PARTIAL", "no": "NO"}[v]
        kinds = f", {dtype_txt}" if dtype_txt else ""
        return (f"Tensor Cores: {word}{kinds} — {ev}, each kernel configuration profiled once "
                "(time shares: the default run, not --engine ncu)")
    on = min(tc.get("matrix_on_tc_share") or 0.0, 1.0)
    off = tc.get("matrix_off_tc_share") or 0.0
    unknown_matrix = tc.get("matrix_unknown_share") or 0.0
    dt = ", ".join(tc.get("off_tc_dtypes") or [])
    if v == "yes":  # the matrix work decides; its share of all kernel time says how much that is
        return f"Tensor Cores: YES — {pct(on, 0)} of the matrix work ({share} of {of}), {dtype_txt}, {ev}"
    if v == "partial":  # what ran on them first, then what did not and what cannot be told, each by its name
        rest = []
        if off >= 0.005:
            rest.append(f"{pct(off, 0)} ran on CUDA cores{' (' + dt + ')' if dt else ''}")
        if unknown_matrix >= 0.005:
            rest.append(f"{pct(unknown_matrix, 0)} unknown ({_unknown_why(tc)})")
        return (f"Tensor Cores: PARTIAL — {pct(on, 0)} of the matrix work ran on them ({share} of {of}, "
                f"{dtype_txt}); " + (", ".join(rest) or "the rest did not") + f", {ev}")
    unknown = tc.get("unknown_time_share") or 0.0
    if v == "no":
        if off >= 0.005 and unknown >= 0.005:  # the known part decides; what names cannot tell is said beside it
            return (f"Tensor Cores: NO for {pct(off, 0)} of the matrix work — {dt or 'it ran'} on CUDA cores, {ev}; "
                    f"{pct(unknown, 0)} of {of} unknown ({_unknown_why(tc)})")
        if off >= 0.005:
            return (f"Tensor Cores: NO — no kernel did Tensor Core math; the matrix work ({pct(tc.get('matrix_time_share'), 0)} "
                    f"of {of}) ran on CUDA cores{' (' + dt + ')' if dt else ''}, {ev}")
        return f"Tensor Cores: NO — no kernel did Tensor Core math, {ev}"
    if tc.get("launches", 0) == 0:
        return "Tensor Cores: UNKNOWN — the input holds no GPU kernels"
    if off >= 0.005:  # the known part is said, but it is not most of the matrix work
        return (f"Tensor Cores: UNKNOWN for {pct(tc.get('matrix_unknown_share'), 0)} of the matrix work "
                f"({_unknown_why(tc)}); {pct(off, 0)} of it ran on CUDA cores{' (' + dt + ')' if dt else ''}, {ev}")
    return (f"Tensor Cores: UNKNOWN — {pct(unknown, 0)} of {of} is in kernels "
            f"whose Tensor Core use cannot be told ({_unknown_why(tc)})")


def _unknown_why(tc: dict) -> str:
    """Why kernels are unknown, from the verdict's list of unknown kernels (``unknown_kernels``): the reason of the
    largest, or the generic one for verdicts saved before the list existed."""
    top = (tc.get("unknown_kernels") or [{}])[0]
    return top.get("why") or "names carry no signal, no hardware counters"


# the first cause of a rank waiting in collectives (``analysis.timeline.idle.headline``)
COMMUNICATION_CAUSE = "waiting in communication not overlapped by compute"
# the gpu-wait cause's words after its time, in saved verdicts too (``analysis.timeline.idle.causes.GPU_WAIT_WORDS``)
GPU_WAIT_WORDS = "with the next work already launched"
VERDICT_WORDS = {"cpu-bound": "CPU-bound", "gpu-bound": "GPU-bound", "mixed": "mixed",
                 "insufficient-data": "not enough data to judge", "no-gpu-work": "no GPU work"}


def verdict_word(verdict: str | None, cause: str | None) -> str:
    """The verdict in words, where its first cause is not the host's: a low busy share is "CPU-bound" only when the
    host kept the GPU waiting. Waiting for other ranks is neither the host's fault nor the GPU's: "communication-bound".
    An idle GPU with its next work already launched waited on something else (another stream, an event, a graph's node
    order, work launched before the recording began): TraceLens' vLLM decode trace (MI300, 56% busy, 94% of its idle
    time of that kind: copies queued behind work from before the recording) read "CPU-bound: the GPU idled 7.85 ms
    with the next work already launched", words that contradict each other; it reads "not host-bound" now."""
    word = VERDICT_WORDS.get(verdict, verdict)
    if verdict not in ("cpu-bound", "mixed") or not cause:
        return word
    if cause.startswith(COMMUNICATION_CAUSE):
        return "communication-bound" if verdict == "cpu-bound" else "mixed, communication first"
    if cause.startswith("the GPU idled ") and GPU_WAIT_WORDS in cause.split("(")[0]:
        return "not host-bound" if verdict == "cpu-bound" else "mixed, launched work waiting first"
    return word


def timeline_headline(tl: dict) -> str:
    v = tl.get("verdict", "insufficient-data")
    busy = pct(tl.get("gpu_busy_share"), 0)
    steps = tl.get("steps") or {}
    fams = tl.get("step_families") or []
    if steps.get("count"):
        scope = "of the steady steps"
        if len(fams) > 1:  # several phases: name the one that holds most of the wall time
            phase = steps.get("phase") or steps["name"]
            scope = (f"of the steady steps in phase `{phase}` ({pct(steps.get('wall_share_of_steps'), 0)} of the steady-state "
                     f"wall time of {len(fams)} phases)")
    else:
        scope = "of the profiled time"
    cause = tl.get("headline_cause")
    word = verdict_word(v, cause)
    held = steps.get("held_back_by")
    if held and v == "mixed":  # the median step is GPU-bound, but one cause holds the steps back (timeline._held_back)
        word = (f"mixed (the median step is GPU-bound, but one cause holds the steps back: up to "
                f"{held['gain_up_to']:.2f}x)")
    if v == "no-gpu-work":
        return "GPU busy: none — the workload launched no GPU work"
    comm = tl.get("communication") or {}
    if comm:  # a rank that communicates is judged on its compute (analysis/timeline/comm.py)
        busy += f" (compute {pct(comm.get('compute_busy_share'), 0)}, the rest communication)"
    return f"GPU busy {busy} {scope} — {word}" + (f": {cause}" if cause else "")


def recording_cost_words(slowdown: float) -> str:
    """The recording's slowdown as measured in the run; a ratio under 1 is no slowdown but the host's own speed moving
    between the window and the steps after it (the lent H100's host moved by a third between runs), said as such."""
    if slowdown >= 1.0:
        return f"the recording's slowdown {slowdown:.2f}x"
    return (f"the unrecorded steps were no faster ({slowdown:.2f}x): the host's own speed moved more than the "
            "recording cost")


SOURCE_OF_STEPS = {"explicit": "the program's step ranges", "hook": "nsighttc's hooks in the program",
                   "profiler-op": "torch.profiler's optimizer/DataLoader ranges",
                   "kernel-period": "the repeating kernel sequence",
                   "result-copy": "the copies of each iteration's result to the host",
                   "graph-replay": "the program's CUDA graph replays"}


def _unrecorded_slow_words(u: dict) -> str:
    """'; 4 of those after it over 1.5x their median (up to 195 ms): 359 ms beyond it, 22% of their 1.62 s, which no
    recorded step shows': time the verdict's window did not see, said where it was timed (``profile.window``)."""
    if not u.get("slow_steps") or not u.get("after_ns"):
        return ""
    n = u["slow_steps"]
    return (f"; {n} of those after it over {u.get('slow_factor', 1.5):g}x their median (up to "
            f"{ns(u['slow_max_ns'])}): {_seconds(u['slow_beyond_ns'])} beyond it, "
            f"{pct(u['slow_beyond_ns'] / u['after_ns'], 0)} of their {_seconds(u['after_ns'])}, which no recorded "
            "step shows")


def startup_line(tl: dict) -> str | None:
    """'Start-up 18.2 s (torch.compile 9.1 s), then 40 steps of 15.1 ms (steps from nsighttc's hooks; 2 warm-up
    steps left out)': what the steady-state verdict leaves out, and where the steps came from."""
    steps, st = tl.get("steps") or {}, tl.get("startup") or {}
    if not steps.get("count") or not st:
        return None
    comp = f" (torch.compile {st['compile_seconds']:.1f} s)" if st.get("compile_seconds", 0) >= 0.05 else ""
    if st.get("unrecorded_s") is not None:  # recorded from the window's start (profile.window.unrecorded_startup)
        comp += f" ({st['unrecorded_s']:.1f} s of it before the recording began at the window)"
    steady = steps["count"] - steps.get("warmup_steps", 0)
    warm = (f"; {steps['warmup_steps']} warm-up step{'s' if steps['warmup_steps'] > 1 else ''} left out"
            if steps.get("warmup_steps") else "")
    src = SOURCE_OF_STEPS.get(steps.get("source"), steps.get("source") or "")
    u = steps.get("unrecorded")
    known = (f" ({ns(u['known_shape_ns'])} at a shape seen before)", " at one") \
        if u and u.get("known_shape_ns") else ("", "")
    speed = (f" recorded{known[0]}, {ns(u['median_ns'])} unrecorded{known[1]} "
             f"({recording_cost_words(u['recording_slowdown'])}, {u['steps']} steps timed {u.get('when') or 'after'} "
             f"the window{_unrecorded_slow_words(u)})") if u else ""
    if not u and steps.get("unrecorded_left_out"):  # (timed, but no measure of the recording: ``profile.data_waits``)
        speed = f" recorded (no unrecorded speed to hold them against: {steps['unrecorded_left_out']})"
    step, gpu = typical_step(steps)
    ahead = f" as the GPU finished them (the host started one every {ns(steps.get('median_iteration_ns'))})" \
        if gpu else ""
    k, rec = steps.get("steps_per_cycle"), (tl.get("recordings") or {}).get("recordings")
    if k and rec and steps.get("count") == k * rec:  # (a profiler's cycles: ``parse.segments``)
        ahead += (f", a mean over every {k} steps (each recording's {k}: the profiler stops at its last, waiting for "
                  "the GPU)")
    elif k:  # (``step_cycle``: a long step, then short ones, round after round)
        ahead += (f", a mean over every {k} steps (they take turns, as DataLoader workers that "
                  "deliver their batches together make them)")
    return (f"Start-up {st['seconds']:.1f} s{comp}, then {steady} steady step{'s' if steady != 1 else ''} of "
            f"{ns(step)}{ahead}{speed} (steps from {src}{warm})")


def _seconds(v: float) -> str:
    return f"{v / 1e9:.2f} s" if v >= 1e8 else ns(v)


SLOW_CAUSE_SHARE = 0.05  # a cause under this share of the slow steps' excess is left out of the words


def slow_causes_words(sc: dict) -> str:
    """'data loading (`enumerate(DataLoader)#...`) 3.92 s, host work outside any range 0.10 s; 160 device-to-host
    copies of 412.0 MB in them (as many typical steps: 12, 48 kB)': the slow steps' excess by cause
    (``analysis.timeline.steps.slow_causes``), the largest first, and what they did that typical steps do not."""
    parts = [f"{r['words']} {_seconds(r['ns'])}" for r in sc["causes"] if r["share"] >= SLOW_CAUSE_SHARE][:4]
    c = sc.get("copies_to_host")
    if c:
        parts.append(f"{c['copies']:,} device-to-host copies of {_mb(c['bytes'])} in them (as many typical steps: "
                     f"{c['typical_copies']:g}, {_mb(c['typical_bytes'])}){_state_words(sc.get('checkpoint'))}")
    g = sc.get("allocator_growth")
    if g:
        parts.append(f"the CUDA allocator grew {g['calls']} times ({ns(g['ns'])})")
    return ", ".join(parts)


def _state_words(ck: dict | None) -> str:
    """What the slow steps' copies were, as the analysis read them (``slow_causes.checkpoint_steps``) and the host's
    stacks in them said (``state_copies_host``): nothing where they were no checkpoint steps."""
    if not ck:
        return ""
    host = ck.get("host") or {}
    if host.get("saved") is False:
        at = f" in `{host['program_frame']}` ({host['program_line']})" if host.get("program_line") else ""
        return f": copies to the host{at}, no save on the host's stacks"
    if host.get("saved"):
        return ": the model's state brought to the host and saved"
    return ": the model's state brought to the host, as a checkpoint (`torch.save`) or a `state_dict()` read does"


def _mb(b: float) -> str:
    return f"{b / 1e6:,.1f} MB" if b >= 1e5 else f"{b / 1e3:.0f} kB"


def loop_time_line(tl: dict) -> str | None:
    """'Where the recording's 2.25 s went: before the first step 0.48 s (21%), ..., 33 steady steps 0.30 s (13%),
    25 slow steps (over 1.5x the typical step of 9.3 ms) 1.34 s (59%: 1.11 s beyond it, 25 at new input shapes)': every
    second of the loop, so a reader sees when the median step is not where the time is. Parts under half a percent are left
    out of the sentence (not of the JSON)."""
    lt = tl.get("loop_time") or {}
    if not lt.get("total_ns"):
        return None
    words = []
    for p in lt["parts"]:
        if p["share"] < 0.005:
            continue
        label = p["part"]
        if label == "steady steps":
            label = f"{lt['steady_steps']} steady step{'s' if lt['steady_steps'] != 1 else ''}"
        elif label == "slow steps":
            label = (f"{lt['slow_steps']} slow step{'s' if lt['slow_steps'] != 1 else ''} (over "
                     f"{lt.get('slow_factor', 1.5):g}x the typical step of {ns(lt.get('typical_step_ns'))})")
        extra = ""
        if p["part"] == "warm-up steps" and lt.get("warmup_new_shape_steps"):
            extra = (f": {_seconds(lt['warmup_new_shape_beyond_ns'])} beyond a step at a known shape, "
                     f"{lt['warmup_new_shape_steps']} at new input shapes")
        if p["part"] == "slow steps":
            extra = f": {_seconds(lt['slow_beyond_median_ns'])} beyond it"
            if lt.get("new_shape_steps"):
                extra += f", {lt['new_shape_steps']} at new input shapes"
            sc = lt.get("slow_causes")
            if sc and sc.get("causes"):  # (why the slow steps at known shapes were slow: their excess by cause)
                extra += (f"; the {sc['steps']} at known shapes {_seconds(sc['excess_ns'])}: "
                          if lt.get("new_shape_steps") or sc["steps"] != lt["slow_steps"] else ": ") + \
                    slow_causes_words(sc)
        words.append(f"{label} {_seconds(p['ns'])} ({100 * p['share']:.0f}%{extra})")
    clock = " (steps as the GPU finished them: the host ran ahead)" if lt.get("clock") == "gpu" else ""
    rec = tl.get("recordings") or {}
    if rec.get("recordings"):  # (a profiler's cycles, joined: ``parse.segments``)
        clock += (f" ({rec['recordings']} recordings one after another; the {_seconds(rec['unrecorded_ns'])} between "
                  "them was not recorded and is left out)")
    return f"Where the recording's {_seconds(lt['total_ns'])} went{clock}: " + ", ".join(words)


def run_cost_line(doc: dict) -> str | None:
    """The run's own cost (``provenance.run_cost``, nsighttc.profile.run_cost): 'This run took 19.2 s to its verdict,
    1.30x a plain run of what the program ran (~14.8 s: ...): the program 16.4 s under the recording, then 2.8 s for
    the hardware evidence and the analysis'."""
    c = (doc.get("provenance") or {}).get("run_cost")
    if not c:
        return None
    head = f"This run took {c['elapsed_s']:.1f} s to its verdict"
    if c.get("ratio"):
        head += (f", {'at least ' if c.get('lower_bound') else ''}{c['ratio']:.2f}x a plain run of what the program "
                 f"ran (~{c['plain_estimate_s']:.1f} s: {c['how']})")
    return (head + f": the program {c['program_s']:.1f} s under the recording, then {c['after_program_s']:.1f} s for "
            "the hardware evidence and the analysis")


OWN_WAIT_SAID = 0.8  # the straggler's own excess under this share of the others' wait is said apart from it


def distributed_headline(doc: dict) -> str | None:
    """One line for the distributed question: who holds the job back, and how much waiting is exposed."""
    d = doc.get("distributed")
    if not d:
        return None
    ex = d.get("exposed_comm_share")
    tr = d.get("exposed_transfer") or {}
    # (what of it overlapping could hide: the transfers; the rest is the ranks waiting for each other's work, said
    # from 1 ms a step, as the findings' ``ranks.communication.waiting_words``)
    split = (f"; at most {ns(tr['transfer_per_step_ns'])} per step of it transfers, the rest the ranks waiting for "
             "each other"
             if tr and tr.get("waiting_per_step_ns", 0.0) >= 1e6 else "")
    comm = (f"communication not overlapped by compute: {pct(ex, 0)} of step time (mean over ranks{split})"
            if ex is not None else "no communication measured")
    missing = d.get("incomplete_ranks") or []
    gone = "".join(f"; rank {r['rank']} left out: {r.get('what') or 'incomplete'}" for r in missing)
    s = d.get("straggler")
    if missing and d["ranks"] - len(missing) < 2:  # nothing left to compare: no cross-rank claim at all
        return (f"Ranks: {d['ranks']} ranks, no cross-rank verdict — "
                + "; ".join(f"rank {r['rank']}: {r.get('what') or 'incomplete'} ({r.get('why') or r['reason']})"
                            for r in missing))
    if s:
        # what the others wait in communication holds their own transfers and turns too: the part that is the
        # straggler's own work beyond theirs is what its fix removes (two H200s, FSDP2 with identical ranks, first run:
        # the others waited 32.2 ms a step, 6.72 ms of it rank 0's own work; plain runs: 1.3-5.7 ms, at most ~1.13x)
        own = s.get("own_excess_ns")
        wait = (f"the other ranks wait {ns(s['others_wait_per_step_ns'])} per step in communication, {ns(own)} of it "
                "for its own work beyond theirs (what its fix removes)"
                if own is not None and own < OWN_WAIT_SAID * s["others_wait_per_step_ns"] else
                f"the other ranks wait {ns(s['others_wait_per_step_ns'])} per step for it")
        return f"Ranks: rank {s['rank']} is the straggler — {s['cause']}; {wait}; {comm}{gone}"
    idle = d.get("not_waited_for")
    if idle:
        return (f"Ranks: {d['ranks']} ranks, no straggler — rank {idle['rank']}'s own step is "
                f"{ns(idle['excess_ns'])} longer, but the other ranks did not wait for it on their hosts "
                f"({ns(idle['own_excess_ns'])} per step): host-bound ranks take turns waiting in NCCL; {comm}{gone}")
    unsure = d.get("no_consistent_straggler")
    if unsure:
        lag = unsure["lag_ns"]
        return (f"Ranks: {d['ranks']} ranks, no consistent straggler — rank {unsure['rank']} lagged by more than the "
                f"steps' spread in {pct(unsure['lagging_steps_share'], 0)} of {unsure['steps']} steps (lag per step "
                f"{ns(lag['q1'])} to {ns(lag['q3'])}); {comm}{gone}")
    li = d.get("launch_imbalance")
    if li:
        return (f"Ranks: {d['ranks']} ranks, no straggler named — rank {li['rank']}'s host launched kernels slower "
                f"(+{ns(li['launch_overhead_excess_ns'])} per step, profiler-sensitive: compare a plain run); {comm}{gone}")
    skew = d.get("step_skew") or {}
    sk = f", step skew {skew['median']:.2f}x median" if skew.get("median") else ""
    if missing:  # never "no straggler" of the whole job while a rank's window is missing: it may be that rank
        left = d["ranks"] - len(missing)
        return f"Ranks: no straggler among the {left} ranks recorded whole{sk}; {comm}{gone}"
    return f"Ranks: {d['ranks']} ranks, no straggler{sk}; {comm}{gone}"


SOURCE_WORDS = {"ncu_this_run": "ncu in this run", "ncu_cache": "ncu earlier (evidence cache)",
                "kernel_names": "kernel names only"}


def evidence_sources_text(src: dict) -> str:
    """'92% ncu in this run, 8% kernel names only': which evidence each share of the deciding time has."""
    parts = [f"{pct(v, 0)} {SOURCE_WORDS.get(k, k)}" for k, v in sorted(src.items(), key=lambda kv: -kv[1]) if v > 0]
    return ", ".join(parts) or "none"


def peak_text(peak: dict | None) -> str:
    """'; 35% of the H200 SXM's dense Tensor Core peak for each kernel's dtype (time-weighted; fp16 peak
    990 TFLOP/s; <datasheet>)', or why there is no percentage."""
    if not peak:
        return ""
    if not peak.get("gpu"):
        return f"; {peak.get('note', 'no peak known for this GPU')}"
    if peak.get("pct_of_peak") is None:
        return ""
    d = peak.get("main_dtype")
    ref = (peak.get("dense_tflops") or {}).get(d)
    return (f"; {pct(peak['pct_of_peak'], 0)} of the {peak['gpu']}'s dense Tensor Core peak for each kernel's dtype "
            f"(time-weighted" + (f"; {d} peak {ref:,.0f} TFLOP/s" if ref else "")
            + f"; {peak.get('source', 'datasheet')})")


def gain_text(g: dict | None) -> str:
    """'up to 1.63x' (an estimated gain, ``analysis.gain``), or '' when there is none worth saying."""
    if not g or not g.get("high") or g["high"] < 1.005:
        return ""
    return f"up to {g['high']:.3g}x"


def first_fix(doc: dict) -> str | None:
    """'First fix: <title> — up to 2.4x (est. 1.2x-2.4x of the steady step)': the finding with the largest gain."""
    best = next((f for f in doc.get("findings") or [] if gain_text(f.get("gain"))), None)
    if best is None:
        return None
    g = best["gain"]
    return (f"First fix: {best['title']} — {gain_text(g)} (estimated {g['low']:.2f}x to {g['high']:.2f}x of "
            f"{g.get('of', 'the steady step')}{width_words(g)})")


# A gain range wider than this (high over low) is one a user cannot act on without knowing why it is wide: the
# first fix's line then says what its ends assume, and that `nsighttc try` measures the fix.
WIDE_GAIN = 3.0


def width_words(g: dict) -> str:
    """'; 6.2x wide: the ends are <the gain's basis>; ... `nsighttc try` measures it' where the range is wider than
    ``WIDE_GAIN``: a recording tells the time a cause costs, not how much of it a fix removes (launch overhead: half
    of the launch gaps to all of them down to the GPU's own work; matrix work: a memory-bound GEMM's speed-up to the
    Tensor Cores' peak)."""
    if not g.get("low") or not g.get("high") or g["high"] / g["low"] <= WIDE_GAIN:
        return ""
    return (f"; {g['high'] / g['low']:.1f}x wide: the ends are {g['basis']}; a recording cannot tell which end the fix "
            "reaches, `nsighttc try` measures it")


def failed_line(doc: dict) -> str | None:
    """'The program failed (exit code 1: RuntimeError: ...): this verdict covers what it ran before that.' where the
    profiled program's own run failed by itself (``provenance.program_exit``): the verdict stands on a part of it."""
    ex = (doc.get("provenance") or {}).get("program_exit")
    if not ex:
        return None
    how = (f"died of signal {-ex['code']} ({ex['signal']})" if ex.get("signal") else f"exit code {ex['code']}")
    said = ex.get("said")
    if said and len(said) > 160:
        said = said[:159] + "…"
    return (f"The program failed ({how}{': ' + said if said else ''}): this verdict covers what it ran before that, "
            "not the program as it runs to its end.")


def headline_lines(doc: dict) -> list[str]:
    """The lines a terminal shows at the end of a run: one per question, and where the evidence came from (and first,
    where the program failed, that it did)."""
    tc = doc["tensor_cores"]
    failed = failed_line(doc)
    lines = ([failed] if failed else []) + [tc_line(tc)]
    if doc.get("timeline"):
        lines.append(timeline_headline(doc["timeline"]))
        if startup_line(doc["timeline"]):
            lines.append(startup_line(doc["timeline"]))
        slow = next((p for p in (doc["timeline"].get("loop_time") or {}).get("parts", [])
                     if p["part"] == "slow steps"), None)
        if slow and slow["share"] >= 0.1:  # the median step is not where the time is: say where it is
            lines.append(loop_time_line(doc["timeline"]))
    if distributed_headline(doc):
        lines.append(distributed_headline(doc))
    if first_fix(doc):
        lines.append(first_fix(doc))
    if tc.get("evidence_sources"):
        lines.append("Evidence for the matrix-work kernels: " + evidence_sources_text(tc["evidence_sources"]))
    return lines
