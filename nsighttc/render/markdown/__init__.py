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

from .. import host_frames_md
from ..fmt import flop, ns, pct
from ..names import short_name
from .headlines import (EVIDENCE_WORDS, distributed_headline, evidence_sources_text, failed_line, first_fix,
                        gain_text, headline_lines, loop_time_line, peak_text, run_cost_line, startup_line, tc_headline,
                        tc_line, timeline_headline)
from .tables import (_cell, _dtype_mix, _kernel_cell, _kernel_table, _phase_table, _range_table, _rank_table,
                     inference_section)

# What other modules read from here (the report's sentences and sections live in headlines and tables)
__all__ = ["LIMIT", "beside_prefix", "distributed_headline", "first_fix", "gain_text", "headline_lines",
           "inference_section", "ns", "pct", "render", "render_kernels", "render_ranges", "tc_headline", "tc_line",
           "write_beside", "write_report"]


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


STACKS_FILE = "host_idle_stacks.collapsed"  # the idle samples' stacks, for speedscope and flame graphs


def write_beside(doc: dict, directory, prefix: str = "", top: int = 15, stacks: str = "") -> dict:
    """Write kernels.md and ranges.md (``prefix`` before each name: a report written with ``-o NAME.md`` gets
    NAME.kernels.md beside it, never another file of the user's) into ``directory`` where the summary cuts their
    tables, and the idle samples' ``stacks`` where there are any; returns what was written ({"kernels":
    "kernels.md", ...}) for ``render(beside=...)``: a report names no file it does not have beside it."""
    from pathlib import Path
    made = {}
    if stacks:
        made["stacks"] = prefix + STACKS_FILE
        (Path(directory) / made["stacks"]).write_text(stacks)
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


def write_report(doc: dict, path, plots: dict | None = None, detail: str = "summary", beside: bool = True,
                 stacks: str = "") -> None:
    """report.md (or ``-o FILE``) with its kernels.md / ranges.md beside it (summary detail), and the idle samples'
    ``stacks`` (``host_idle_stacks.collapsed``)."""
    from pathlib import Path
    path = Path(path)
    made = {}
    if detail != "full" and beside:
        made = write_beside(doc, path.resolve().parent, beside_prefix(path), stacks=stacks)
    elif stacks:
        made = {"stacks": beside_prefix(path) + STACKS_FILE}
        (path.resolve().parent / made["stacks"]).write_text(stacks)
    path.write_text(render(doc, plots=plots, detail=detail, beside=made))


def _render(doc: dict, top: int, plots: dict | None, full: bool, beside: dict | None) -> str:
    tc = doc["tensor_cores"]
    failed = failed_line(doc)
    out = ["# nsighttc verdict", ""] + ([f"**{failed}**", ""] if failed else []) + [f"**{tc_line(tc)}**", ""]
    tl = doc.get("timeline")
    if tl:
        out += [f"**{timeline_headline(tl)}**", ""]
        if startup_line(tl):
            out += [startup_line(tl), ""]
        if loop_time_line(tl):
            out += [loop_time_line(tl), ""]
    if run_cost_line(doc):
        out += [run_cost_line(doc), ""]
    if distributed_headline(doc):
        out += [f"**{distributed_headline(doc)}**", ""]
    if first_fix(doc):
        out += [first_fix(doc), ""]
    dev = doc.get("device") or {}
    kernels = doc["kernels"]
    rows = [("Device", (f"{dev.get('name') or 'unknown GPU'} ({dev['vendor']}: no compute capability)" if dev.get("vendor")
                        else f"{dev.get('name') or 'unknown GPU'} (compute capability {dev.get('compute_capability') or '?'})"
                        + _arch_from_names(dev))
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
                                  f"(step range {ns(steps['median_ns'])}), GPU busy "
                                  f"{pct(steps.get('steady_gpu_busy_share', steps.get('median_gpu_busy_share')))} of the "
                                  f"steady steps' time (median step {pct(steps.get('median_gpu_busy_share'))}){warm}{found}"))
    out += ["| | |", "|---|---|"] + [f"| {k} | {_cell(v)} |" for k, v in rows] + [""]
    if plots:
        out += [f"![{alt}]({path})" for alt, path in plots.items()] + [""]

    if doc.get("ranks"):
        d = doc.get("distributed") or {}
        out += ["## Ranks", "", "Each rank judged on its own. *Own work* is the median step minus the time the rank "
                "waited in communication with no compute beside it: the straggler is the rank whose own work is "
                "longest; the others wait for it. Communication kernels (NCCL and other collectives) are "
                f"{pct(d.get('nccl_time_share'), 0)} of all kernel time; the timeline sections below are rank "
                f"{d.get('timeline_rank')}'s" + (f" ({d['timeline_rank_why']})" if d.get("timeline_rank_why") else "")
                + ".", "", _rank_table(doc["ranks"]), ""]
        s_ = d.get("straggler") or d.get("launch_imbalance")
        if s_ and s_.get("excess_by_cause"):
            out += [f"Rank {s_['rank']} against the median of the others, per step: "
                    + "; ".join(f"{c['cause']} +{ns(c['per_step_ns'])}" for c in s_["excess_by_cause"]), ""]
        if d.get("no_consistent_straggler"):
            out += [f"No consistent straggler: {d['no_consistent_straggler']['note']}.", ""]
        if d.get("not_waited_for"):
            out += [f"No straggler: {d['not_waited_for']['note']}.", ""]
        w = d.get("headline_waits_apart")
        if w:  # (analysis/ranks/headline.py)
            out += [f"The headline's cause is rank {w['rank']}'s first cause once its waits for the other ranks are "
                    f"set apart: {pct(w['communication_share'], 0)} of its time without compute is communication; "
                    f"at most {pct(w['transfer_share'], 0)} of that time can be transfers (the least any rank waited, "
                    f"step by step), and the rest, {pct(w['communication_share'] - w['transfer_share'], 0)}, is it "
                    "waiting for the other ranks' work, which overlapping cannot hide. Its own row's first cause is "
                    "that communication.", ""]
        out += [f"Rank {r['rank']} is left out of the job's verdict: {r['reason']}." for r in
                d.get("incomplete_ranks") or []] + ([""] if d.get("incomplete_ranks") else [])
    inf = (tl or {}).get("inference")
    if inf:
        out += inference_section(inf)
    out += host_frames_md.section((tl or {}).get("host_frames"), full, stacks=(beside or {}).get("stacks"))
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
            out.append(f"- **Estimated gain:** {g['low']:.2f}x to {g['high']:.2f}x of {g.get('of', 'the steady step')} "
                       f"({g['basis']})")
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


def _arch_from_names(dev: dict) -> str:
    """What the kernels' names say of a GPU the recording does not name (``analysis.kernel_arch``), said as a guess."""
    arch = dev.get("from_kernel_names")
    if not arch:
        return ""
    return (f"; its kernels were built for {arch['architecture']} ({arch['compute_capability']}) at newest, e.g. "
            f"`{arch['example'][:60]}`: taken as that GPU's for the fixes")
