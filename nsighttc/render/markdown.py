"""Markdown for a pull-request comment, rendered from the verdict JSON (computes nothing itself).

Shape: one headline per question first (a reviewer reads nothing else), then the summary table, the top
kernels, the per-range table, findings ordered by the time they cost, and long tables folded in
``<details>``. Every claim carries its evidence level ("hardware counters" / "kernel names").

Size: GitHub refuses a comment over 65,536 characters, and an eleven-phase program's report was 101 KB with every
kernel's demangled template name repeated in a ``title`` attribute. The default (``detail="summary"``) keeps
``report.md`` within ``LIMIT`` whatever the program: the top kernels by short name, the top ranges, the findings
with at most ``FINDING_KERNELS`` kernels each; the full tables go to ``kernels.md`` and ``ranges.md`` beside it
(``render_kernels``, ``render_ranges``: full names, once each), linked from the report. A last guard (``_fit``)
cuts anything still over the limit at a line and says where the rest is. ``detail="full"``: everything in one file.
"""
from __future__ import annotations

import html

from . import host_frames_md
from .fmt import flop, ns, pct, tc_word
from .names import short_name

EVIDENCE_WORDS = {"hardware": "confirmed by hardware counters", "kernel-name": "inferred from kernel names",
                  "mixed": "hardware counters for some kernels, kernel names for others",
                  "none": "no evidence"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _kernel_cell(name: str, hover: bool = True) -> str:
    if not hover:
        return f"`{_cell(short_name(name))}`"
    return f'<span title="{html.escape(name, quote=True)}">`{_cell(short_name(name))}`</span>'


def _dtype_mix(by_dtype: dict) -> str:
    parts = [f"{d} {pct(s)}" for d, s in by_dtype.items() if s > 0]
    return ", ".join(parts) if parts else "none"


def tc_line(tc: dict) -> str:
    """The Tensor Core headline every output shows: the one the verdict JSON carries (``tensor_cores.headline``,
    written beside ``verdict`` when the verdict is saved), or worded now for a verdict saved before it existed."""
    return tc.get("headline") or tc_headline(tc)


def tc_headline(tc: dict) -> str:
    """Words ``tensor_cores.verdict`` (never another answer: 'Tensor Cores: NO ...' is verdict ``no``)."""
    v = tc["verdict"]
    ev = EVIDENCE_WORDS.get(tc["evidence"], tc["evidence"])
    dtypes = [d if d != "unknown" else "dtype unknown" for d, s in tc.get("by_dtype", {}).items() if s > 0]
    dtype_txt = ", ".join(dtypes) if dtypes else ""
    named = tc.get("dtype_from_names_share") or 0.0
    if dtype_txt and named > 0.005 and tc.get("evidence") != "kernel-name":  # (all names: said once, below)
        # instruction counts decide yes/no; the dtype is then the names' word
        dtype_txt += (" (dtype from kernel names)" if named > 0.995 else
                      f" (dtype of {pct(named, 0)} of it from kernel names)")
    share = pct(tc["tc_time_share"], 0)
    comm = (tc.get("denominator") or {}).get("communication_share") or 0.0
    if comm >= 0.005:  # shares are of compute kernel time; communication is said apart
        return _tc_sentence(tc, v, ev, dtype_txt, share, "compute kernel time") + \
            f"; communication (NCCL) {pct(comm, 0)} of kernel time, not counted"
    return _tc_sentence(tc, v, ev, dtype_txt, share, "GPU kernel time")


def _tc_sentence(tc: dict, v: str, ev: str, dtype_txt: str, share: str, of: str) -> str:
    if tc.get("basis") == "sampled" and v in ("yes", "partial", "no"):
        # ncu sampled each kernel configuration once: shares are not GPU time shares
        word = {"yes": "YES", "partial": "PARTIAL", "no": "NO"}[v]
        kinds = f", {dtype_txt}" if dtype_txt else ""
        return (f"Tensor Cores: {word}{kinds} — {ev}, each kernel configuration profiled once "
                "(time shares: the default run, not --engine ncu)")
    if v == "yes":
        return f"Tensor Cores: YES — {share} of {of}, {dtype_txt}, {ev}"
    if v == "partial":
        off = 1 - tc.get("matrix_on_tc_share", 0)
        return (f"Tensor Cores: PARTIAL — {share} of {of} ({dtype_txt}); {pct(off, 0)} of matrix "
                f"work did not use them, {ev}")
    off = tc.get("matrix_off_tc_share") or 0.0
    unknown = tc.get("unknown_time_share") or 0.0
    dt = ", ".join(tc.get("off_tc_dtypes") or [])
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


VERDICT_WORDS = {"cpu-bound": "CPU-bound", "gpu-bound": "GPU-bound", "mixed": "mixed",
                 "insufficient-data": "not enough data to judge", "no-gpu-work": "no GPU work"}


def timeline_headline(tl: dict) -> str:
    v = tl.get("verdict", "insufficient-data")
    busy = pct(tl.get("gpu_busy_share"), 0)
    steps = tl.get("steps") or {}
    fams = tl.get("step_families") or []
    if steps.get("count"):
        scope = "of the step"
        if len(fams) > 1:  # several phases: name the one that holds most of the wall time
            phase = steps.get("phase") or steps["name"]
            scope = (f"of the step in phase `{phase}` ({pct(steps.get('wall_share_of_steps'), 0)} of the steady-state "
                     f"wall time of {len(fams)} phases)")
    else:
        scope = "of the profiled time"
    cause = tl.get("headline_cause")
    word = VERDICT_WORDS.get(v, v)
    if v == "no-gpu-work":
        return "GPU busy: none — the workload launched no GPU work"
    comm = tl.get("communication") or {}
    if comm:  # a rank that communicates is judged on its compute (analysis/timeline/comm.py)
        busy += f" (compute {pct(comm.get('compute_busy_share'), 0)}, the rest communication)"
    return f"GPU busy {busy} {scope} — {word}" + (f": {cause}" if cause else "")


SOURCE_OF_STEPS = {"explicit": "the program's step ranges", "hook": "nsighttc's hooks in the program",
                   "profiler-op": "torch.profiler's optimizer/DataLoader ranges",
                   "kernel-period": "the repeating kernel sequence"}


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
    return (f"Start-up {st['seconds']:.1f} s{comp}, then {steady} steady step{'s' if steady != 1 else ''} of "
            f"{ns(steps.get('median_iteration_ns'))} (steps from {src}{warm})")


def distributed_headline(doc: dict) -> str | None:
    """One line for the distributed question: who holds the job back, and how much waiting is exposed."""
    d = doc.get("distributed")
    if not d:
        return None
    ex = d.get("exposed_comm_share")
    comm = (f"communication not overlapped by compute: {pct(ex, 0)} of step time (mean over ranks)"
            if ex is not None else "no communication measured")
    missing = d.get("incomplete_ranks") or []
    gone = (f"; rank{'s' if len(missing) > 1 else ''} {', '.join(str(r['rank']) for r in missing)} recorded no GPU "
            "work and {} left out".format("are" if len(missing) > 1 else "is")) if missing else ""
    s = d.get("straggler")
    if s:
        return (f"Ranks: rank {s['rank']} is the straggler — {s['cause']}; the other ranks wait "
                f"{ns(s['others_wait_per_step_ns'])} per step for it; {comm}{gone}")
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
    return f"Ranks: {d['ranks']} ranks, no straggler{sk}; {comm}{gone}"


def _rank_table(ranks: list[dict]) -> str:
    lines = ["| rank | median step | own work / step | waits in comm / step | GPU busy | compute busy | Tensor Cores "
             "| verdict | first cause |", "|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for r in ranks:
        lines.append(f"| {r['rank']} | {ns(r.get('median_step_ns'))} | {ns(r.get('own_step_ns'))} | "
                     f"{ns(r.get('exposed_comm_per_step_ns'))} | {pct(r.get('gpu_busy_share'))} | "
                     f"{pct(r.get('compute_busy_share'))} | {pct(r.get('tc_time_share'))} ({r.get('tc_verdict')}) | "
                     f"{VERDICT_WORDS.get(r.get('verdict'), r.get('verdict'))} | {_cell(r.get('headline_cause') or '')} |")
    return "\n".join(lines)


def _cause_cell(causes: list[dict] | None) -> str:
    c = next((c for c in causes or [] if c.get("idle_ns", 0) > 0), None)
    if c is None:
        return ""
    what = {"host-range": f"host in `{_cell(c['name'])}`", "sync": f"sync ({_cell(c['name'])})",
            "launch-overhead": "launch overhead", "pageable-copy": "pageable copies",
            "gpu-wait": "GPU waiting on launched work",
            "communication": "waiting in communication"}.get(c["kind"], _cell(c["name"]))
    return f"{what}, {ns(c['idle_ns'])}"


def _phase_table(fams: list[dict]) -> str:
    head = ("| Phase (step family) | Steps | Median iteration | Warm-up left out | GPU busy | Verdict | First cause of idle time |\n"
            "|---|---:|---:|---:|---:|---|---|")
    rows = [f"| `{_cell(f['name'])}` | {f['count']} | {ns(f['median_iteration_ns'])} | {f.get('warmup_steps', 0)} | "
            f"{pct(f.get('median_gpu_busy_share'))} | {VERDICT_WORDS.get(f['verdict'], f['verdict'])} | "
            f"{_cause_cell(f.get('causes')) if f['verdict'] in ('cpu-bound', 'mixed') else ''} |" for f in fams]
    return "\n".join([head] + rows)


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
    return (f"First fix: {best['title']} — {gain_text(g)} (estimated {g['low']:.2f}x to {g['high']:.2f}x of the "
            "steady step)")


def headline_lines(doc: dict) -> list[str]:
    """The lines a terminal shows at the end of a run: one per question, and where the evidence came from."""
    tc = doc["tensor_cores"]
    lines = [tc_line(tc)]
    if doc.get("timeline"):
        lines.append(timeline_headline(doc["timeline"]))
        if startup_line(doc["timeline"]):
            lines.append(startup_line(doc["timeline"]))
    if distributed_headline(doc):
        lines.append(distributed_headline(doc))
    if first_fix(doc):
        lines.append(first_fix(doc))
    if tc.get("evidence_sources"):
        lines.append("Evidence for the matrix-work kernels: " + evidence_sources_text(tc["evidence_sources"]))
    return lines


LIMIT = 60_000          # characters: a GitHub comment holds 65,536
TOP_RANGES = 25          # ranges in the summary's table (all of them in ranges.md)
FINDING_KERNELS = 10     # kernels listed under a finding in the summary
UNKNOWN_SHOWN = 10       # unknown kernels listed, with why, in the summary
NOTE_CHARS = 800         # one note in the summary
COMMAND_CHARS = 400      # one command in the summary's provenance (run.json has them whole)
BESIDE = {"kernels": "kernels.md", "ranges": "ranges.md"}


def _more(what: str, n: int, beside: dict | None, key: str) -> str:
    """Where the rest of a cut table is."""
    where = f"[{beside[key]}]({beside[key]})" if beside and key in beside else "`--detail full`, or verdict.json"
    return f"{n} more {what}: {where}"


def render(doc: dict, top: int = 15, plots: dict | None = None, detail: str = "summary",
           beside: dict | None = None) -> str:
    """The report. ``detail``: "summary" (PR-sized, within ``LIMIT``) or "full" (every table whole, one file).
    ``beside``: the files written next to the report ({"kernels": "kernels.md", "ranges": "ranges.md"}), linked."""
    full = detail == "full"
    text = _render(doc, top, plots, full, beside)
    return text if full else _fit(text, beside)


def _fit(text: str, beside: dict | None) -> str:
    """The last guard: a summary still over ``LIMIT`` (a program with hundreds of findings or notes) is cut at a
    line, with where the rest is."""
    if len(text) <= LIMIT:
        return text
    tail = ("\n\n*This report was cut at " + f"{LIMIT:,}" + " characters to fit a pull-request comment; the whole of it: "
            + (", ".join(f"[{f}]({f})" for f in (beside or {}).values()) + ", " if beside else "")
            + "`nsighttc analyze --detail full`, verdict.json.*\n")
    cut = text.rfind("\n", 0, LIMIT - len(tail) - 20)  # (room for a closing </details>)
    head = text[:cut]
    if head.count("<details>") > head.count("</details>"):
        head += "\n\n</details>"
    return head + tail


def render_kernels(doc: dict) -> str:
    """``kernels.md``: every kernel, with its full name once."""
    kernels = doc["kernels"]
    return "\n".join([f"# All {len(kernels)} kernels", "", "Ordered by GPU time; short names in the table, the full "
                      "name in the last column.", "", _kernel_table(kernels, hover=False, full_names=True), ""])


def render_ranges(doc: dict) -> str:
    """``ranges.md``: every range."""
    ranges = doc.get("ranges") or []
    return "\n".join([f"# All {len(ranges)} ranges", "", _range_table(ranges, bool(doc.get("timeline"))), ""])


def write_beside(doc: dict, directory, prefix: str = "", top: int = 15) -> dict:
    """Write kernels.md and ranges.md (``prefix`` before each name: a report written with ``-o NAME.md`` gets
    NAME.kernels.md beside it, never another file of the user's) into ``directory`` where the summary cuts their
    tables; returns what was written ({"kernels": "kernels.md", ...}) for ``render(beside=...)``."""
    from pathlib import Path
    made = {}
    if len(doc["kernels"]) > top:
        made["kernels"] = prefix + BESIDE["kernels"]
        (Path(directory) / made["kernels"]).write_text(render_kernels(doc))
    if len(doc.get("ranges") or []) > TOP_RANGES:
        made["ranges"] = prefix + BESIDE["ranges"]
        (Path(directory) / made["ranges"]).write_text(render_ranges(doc))
    return made


def beside_prefix(path) -> str:
    """What the tables beside a report are named after: none for a run directory's report.md (kernels.md), the
    report's own name otherwise (``-o pr.md``: pr.kernels.md), so no other file of the user's is written over."""
    from pathlib import Path
    return "" if Path(path).name == "report.md" else Path(path).stem + "."


def write_report(doc: dict, path, plots: dict | None = None, detail: str = "summary", beside: bool = True) -> None:
    """report.md (or ``-o FILE``) with its kernels.md / ranges.md beside it (summary detail)."""
    from pathlib import Path
    path = Path(path)
    made = {}
    if detail != "full" and beside:
        made = write_beside(doc, path.resolve().parent, beside_prefix(path))
    path.write_text(render(doc, plots=plots, detail=detail, beside=made))


def _render(doc: dict, top: int, plots: dict | None, full: bool, beside: dict | None) -> str:
    tc = doc["tensor_cores"]
    out = ["# nsighttc verdict", "", f"**{tc_line(tc)}**", ""]
    tl = doc.get("timeline")
    if tl:
        out += [f"**{timeline_headline(tl)}**", ""]
        if startup_line(tl):
            out += [startup_line(tl), ""]
    if distributed_headline(doc):
        out += [f"**{distributed_headline(doc)}**", ""]
    if first_fix(doc):
        out += [first_fix(doc), ""]
    dev = doc.get("device") or {}
    kernels = doc["kernels"]
    rows = [("Device", f"{dev.get('name') or 'unknown GPU'} (compute capability {dev.get('compute_capability') or '?'})"
             if dev else "not recorded in the input"),
            ("Inputs", ", ".join(f"`{i['path']}` ({i['kind']})" for i in doc["inputs"])),
            ("GPU kernel time", f"{ns(tc['kernel_time_ns'])} in {tc['launches']:,} launches of {len(kernels)} kernels"),
            ("On Tensor Cores", f"{pct(tc['tc_time_share'])} of kernel time ({_dtype_mix(tc.get('by_dtype', {}))})"
             + (" — of the sampled kernels, not of the run" if tc.get("basis") == "sampled" else "")),
            ("Matrix work on Tensor Cores", pct(tc.get("matrix_on_tc_share")) + f" of {pct(tc.get('matrix_time_share'))} "
             "of kernel time that is GEMM/conv/attention"),
            ("Evidence", EVIDENCE_WORDS.get(tc["evidence"], tc["evidence"])
             + (f" ({tc['sampling']})" if tc.get("sampling") else "")
             + (f"; matrix-work time: {evidence_sources_text(tc['evidence_sources'])}" if tc.get("evidence_sources") else ""))]
    if tc.get("flop"):
        rows.append(("Tensor Core math", f"{flop(tc['flop'])} at {tc['tflops']:.1f} TFLOP/s while those kernels ran"
                     + peak_text(tc.get("peak"))))
    if tc.get("unknown_time_share"):
        unk = tc.get("unknown_kernels") or []
        rows.append(("Unknown", f"{pct(tc['unknown_time_share'])} of kernel time"
                     + (f" in {len(unk)}{'+' if len(unk) >= 20 else ''} kernel{'s' if len(unk) != 1 else ''} "
                        "(listed below with why)" if unk else ": names carry no signal")))
    if tl:
        win = tl.get("window") or {}
        rows.append(("GPU busy (profiled window)", f"{pct(win.get('gpu_busy_share'))} of {ns(win.get('wall_ns'))}"))
        steps = tl.get("steps") or {}
        if steps.get("count"):
            warm = f"; first {steps['warmup_steps']} left out as warm-up" if steps.get("warmup_steps") else ""
            found = f"; found by {steps['found_by']}" if steps.get("found_by") else ""
            rows.append(("Steps", f"{steps['count']} × `{steps['name']}`: median iteration {ns(steps['median_iteration_ns'])} "
                                  f"(step range {ns(steps['median_ns'])}), GPU busy {pct(steps.get('median_gpu_busy_share'))} "
                                  f"of it{warm}{found}"))
    out += ["| | |", "|---|---|"] + [f"| {k} | {_cell(v)} |" for k, v in rows] + [""]
    if plots:
        out += [f"![{alt}]({path})" for alt, path in plots.items()] + [""]

    if doc.get("ranks"):
        d = doc.get("distributed") or {}
        out += ["## Ranks", "", "Each rank judged on its own. *Own work* is the median step minus the time the rank "
                "waited in communication with no compute beside it: the straggler is the rank whose own work is "
                "longest; the others wait for it. NCCL kernels are "
                f"{pct(d.get('nccl_time_share'))} of all kernel time; the timeline sections below are rank "
                f"{d.get('timeline_rank')}'s.", "", _rank_table(doc["ranks"]), ""]
        s_ = d.get("straggler") or d.get("launch_imbalance")
        if s_ and s_.get("excess_by_cause"):
            out += [f"Rank {s_['rank']} against the median of the others, per step: "
                    + "; ".join(f"{c['cause']} +{ns(c['per_step_ns'])}" for c in s_["excess_by_cause"]), ""]
        if d.get("no_consistent_straggler"):
            out += [f"No consistent straggler: {d['no_consistent_straggler']['note']}.", ""]
        out += [f"Rank {r['rank']} is left out of the job's verdict: {r['reason']}." for r in
                d.get("incomplete_ranks") or []] + ([""] if d.get("incomplete_ranks") else [])
    inf = (tl or {}).get("inference")
    if inf:
        out += inference_section(inf)
    out += host_frames_md.section((tl or {}).get("host_frames"), full)
    fams = (tl or {}).get("step_families") or []
    if fams:
        rule = ((tl or {}).get("steps") or {}).get("rule")
        out += ["## Phases", "", "Each step family judged on its own: median iteration after warm-up, GPU busy share "
                "of it, verdict, and what the GPU waited for most." + (f" The {rule}." if rule else ""), "",
                _phase_table(fams), ""]
    graphs = (tl or {}).get("graphs") or {}
    if graphs.get("launches"):
        how = {"node": "traced node by node: their kernels are judged like any other",
               "graph": "traced as whole graphs: their kernels have no names here (record with "
                        "`nsys --cuda-graph-trace=node`)"}.get(graphs.get("trace"), "")
        out += [f"CUDA graphs: {graphs['launches']:,} graph launches held {pct(graphs.get('share_of_gpu_busy'))} of GPU "
                f"busy time{'; ' + how if how else ''}.", ""]
    out += ["## Top kernels by GPU time", "", _kernel_table(kernels[:top], hover=full), ""]
    unknown = tc.get("unknown_kernels") or []
    if unknown:
        shown = unknown if full else unknown[:UNKNOWN_SHOWN]
        out += ["<details><summary>Kernels whose Tensor Core use is unknown, and why</summary>", "",
                "| Kernel | Share | Matrix work | Why unknown |", "|---|---:|---|---|"]
        out += [f"| {_kernel_cell(u['name'], hover=full)} | {pct(u.get('time_share'))} | "
                f"{'yes' if u.get('matrix_work') else 'no'} | {_cell(u.get('why') or '')} |" for u in shown]
        if len(shown) < len(unknown):
            out.append(f"\n{_more('unknown kernels', len(unknown) - len(shown), beside, 'kernels')}")
        out += ["", "</details>", ""]
    if len(kernels) > top and full:
        out += [f"<details><summary>All {len(kernels)} kernels</summary>", "", _kernel_table(kernels), "",
                "</details>", ""]
    elif len(kernels) > top:
        out += [_more("kernels", len(kernels) - top, beside, "kernels"), ""]

    ranges = doc.get("ranges") or []
    more_ranges = 0
    if ranges and not full and len(ranges) > TOP_RANGES:
        more_ranges, ranges = len(ranges) - TOP_RANGES, ranges[:TOP_RANGES]
    if ranges:
        scoped = any(r.get("scope") == "steady steps" for r in ranges)
        out += ["## NVTX ranges", ""] + (["Count, wall time, GPU busy, verdict and causes of each range are its time "
                                          "within the steady steps (a range with none there: its whole time); kernel "
                                          "time and Tensor Core shares cover the whole run.", ""] if scoped else []) \
            + [_range_table(ranges, bool(tl)), ""]
        if more_ranges:
            out += [_more("ranges", more_ranges, beside, "ranges"), ""]

    findings = doc.get("findings") or []
    out += ["## Findings", ""]
    if not findings:
        out += ["Nothing to report: no matrix work missed the Tensor Cores.", ""]
    for i, f in enumerate(findings, 1):
        g = f.get("gain") or {}
        up = gain_text(g)
        out += [f"### {i}. {f['title']} ({f['severity']})" + (f" — {up}" if up else ""), "",
                f"- **Evidence:** {f['evidence']}", f"- **Fix:** {f['advice']}"]
        if up:
            out.append(f"- **Estimated gain:** {g['low']:.2f}x to {g['high']:.2f}x of the steady step ({g['basis']})")
        out.append("")
        if f.get("kernels"):
            ks = f["kernels"] if full else f["kernels"][:FINDING_KERNELS]
            out += ["<details><summary>Kernels</summary>", ""] + [
                f"- `{_cell(k if full else short_name(k, 120))}`" for k in ks]
            if len(ks) < len(f["kernels"]):
                out.append(f"- {_more('kernels', len(f['kernels']) - len(ks), beside, 'kernels')}")
            out += ["", "</details>", ""]
    if doc.get("warnings"):
        out += ["## Notes", ""] + [f"- {w if full or len(w) <= NOTE_CHARS else w[:NOTE_CHARS - 1] + '…'}"
                                   for w in doc["warnings"]] + [""]
    prov = doc.get("provenance")
    if prov:
        gpus = ", ".join(f"{g.get('name')} (CC {g.get('compute_capability')}, driver {g.get('driver')})"
                         for g in prov.get("gpu", []))
        vers = ", ".join(f"{k} {v}" for k, v in (prov.get("versions") or {}).items() if v)
        out += ["<details><summary>Provenance</summary>", "",
                f"- GPU: {gpus or 'unknown'}", f"- Engines: {', '.join(prov.get('engines', []))} "
                f"({', '.join(f'{k} {v:.1f} s' for k, v in (prov.get('seconds') or {}).items())})",
                f"- Versions: {vers}"]
        out += [f"- Command: `{c if full or len(c) <= COMMAND_CHARS else c[:COMMAND_CHARS - 1] + '…'}`"
                for c in prov.get("commands", [])] + ([] if full else ["- The whole commands: run.json"])
        if prov.get("reanalysed"):
            out.append(f"- {prov['reanalysed']}")
        out += ["", "</details>", ""]
    out += ["<sub>Hardware counters decide; kernel names only guess and say *unknown* when they cannot tell. "
            "ncu durations are measured under replay. Generated by nsighttc.</sub>", ""]
    return "\n".join(out)


def inference_section(inf: dict) -> list[str]:
    """``## Inference``: a generation loop's serving numbers and its prefill and decode phases, each judged apart."""
    tps = inf.get("tokens_per_s")
    out = ["## Inference", "",
           f"A generation loop: {inf.get('requests', 0)} request{'s' if inf.get('requests') != 1 else ''} in the steady "
           f"steps ({inf.get('request_source')}), {inf.get('model_calls', 0)} model calls recorded. Time to first token "
           f"**{ns(inf.get('ttft_ns'))}**, time per output token **{ns(inf.get('tpot_ns'))}**"
           + (f", {tps:,.1f} tokens/s per sequence" if tps else "") + ".", "",
           "| Phase | Calls | Median iteration | GPU busy | GPU per call | Kernels per call | On Tensor Cores | Verdict | "
           "First cause of idle time |", "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for name in ("prefill", "decode"):
        p = inf.get(name) or {}
        if not p.get("calls"):
            out.append(f"| {name} | 0 | | | | | | | |")
            continue
        out.append(f"| {name}{' (warm-up only)' if p.get('warmup_only') else ''} | {p['calls']:,} | {ns(p.get('median_ns'))} | "
                   f"{pct(p.get('gpu_busy_share'))} | {ns(p.get('gpu_ns_per_call'))} | {p.get('kernels_per_call') or 0:,.0f} | "
                   f"{pct(p.get('tc_time_share'))} | {VERDICT_WORDS.get(p.get('verdict'), p.get('verdict') or '')} | "
                   f"{_cell(p.get('headline_cause') or '')} |")
    if inf.get("found_by"):  # a recording without the hooks' marks: say how the calls were told apart
        out += ["", f"<sub>No marks in the recording: {inf['found_by']}. Time to first token runs from the prefill "
                    "call's first launch, not from the request's arrival.</sub>"]
    return out + [""]


def _dtype_cell(k: dict) -> str:
    """The dtype, marked where it is the kernel name's word beside hardware evidence (instruction counts say
    "Tensor Core math" but carry no dtype)."""
    if not k.get("dtype"):
        return ""
    named = k["evidence"] == "hardware" and "dtype from the kernel name" in str(k.get("evidence_detail") or "")
    return f"{k['dtype']} (by name)" if named else k["dtype"]


def _kernel_table(kernels: list[dict], hover: bool = True, full_names: bool = False) -> str:
    head = ("| # | Kernel | Time | Share | Calls | Tensor Cores | dtype | Evidence | TFLOP/s | Pipe |"
            + (" Full name |" if full_names else "") + "\n"
            "|---:|---|---:|---:|---:|---|---|---|---:|---:|" + ("---|" if full_names else ""))
    lines = [head]
    for i, k in enumerate(kernels, 1):
        verdict = tc_word(k["tensor_core"])
        says = k.get("name_says")
        if k["evidence"] == "hardware" and says is not None and says != k["tensor_core"]:
            verdict += f" (name says {tc_word(says)})"
        if k.get("variant"):
            verdict += f" · variant {k['variant']}"
        lines.append("| {} | {} | {} | {} | {:,} | {} | {} | {} | {} | {} |".format(
            i, _kernel_cell(k["name"], hover), ns(k["total_time_ns"]), pct(k["time_share"]), k["calls"], verdict,
            _dtype_cell(k), k["evidence"], "" if k.get("tflops") is None else f"{k['tflops']:.1f}",
            "" if k.get("tensor_pipe_pct") is None else f"{k['tensor_pipe_pct']:.0f}%")
            + (f" `{_cell(k['name'])}` |" if full_names else ""))
    return "\n".join(lines)


def _range_table(ranges: list[dict], timeline: bool) -> str:
    if timeline:
        head = ("| Range | Count | Wall time | GPU busy | Kernel time | On Tensor Cores | Verdict | First cause of idle time |\n"
                "|---|---:|---:|---:|---:|---:|---|---|")
        rows = [f"| `{_cell(r['name'])}`{' (truncated: never closed)' if r.get('truncated') else ''}"
                f"{' (outside the steady steps)' if r.get('scope') == 'outside the steady steps' else ''} | "
                f"{r.get('count') or ''} | {ns(r.get('wall_ns'))} | "
                f"{pct(r.get('gpu_busy_share'))} | {ns(r['kernel_time_ns'])} | {pct(r['tc_time_share'])} | "
                f"{r.get('verdict') or ''} | {_cause_cell(r.get('causes')) if r.get('verdict') in ('cpu-bound', 'mixed') else ''} |"
                for r in ranges]
    else:
        head = ("| Range | Kernel time | On Tensor Cores | Tensor Cores | dtype | Evidence |\n"
                "|---|---:|---:|---|---|---|")
        rows = [f"| `{_cell(r['name'])}` | {ns(r['kernel_time_ns'])} | {pct(r['tc_time_share'])} | "
                f"{r.get('tc_verdict', '')} | {_dtype_mix(r.get('by_dtype') or {})} | {r.get('tc_evidence', '')} |"
                for r in ranges]
    return "\n".join([head] + rows)
