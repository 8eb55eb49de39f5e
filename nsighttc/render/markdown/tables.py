"""The report's tables and sections: kernels, ranges, phases, ranks, and a generation loop's inference section;
cells escaped for Markdown tables, kernel names shortened with the full name on hover."""
from __future__ import annotations

import html

from ..fmt import ns, pct, tc_word
from ..names import short_name
from .headlines import recording_cost_words, verdict_word


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _kernel_cell(name: str, hover: bool = True) -> str:
    if not hover:
        return f"`{_cell(short_name(name))}`"
    return f'<span title="{html.escape(name, quote=True)}">`{_cell(short_name(name))}`</span>'


def _dtype_mix(by_dtype: dict) -> str:
    parts = [f"{d} {pct(s)}" for d, s in by_dtype.items() if s > 0]
    return ", ".join(parts) if parts else "none"


def _rank_table(ranks: list[dict]) -> str:
    lines = ["| rank | median step | own work / step | waits in comm / step | comm overlapped | GPU busy | compute busy "
             "| Tensor Cores | verdict | first cause |", "|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for r in ranks:
        ov = r.get("comm_overlapped_share")
        lines.append(f"| {r['rank']} | {ns(r.get('median_step_ns'))} | {ns(r.get('own_step_ns'))} | "
                     f"{ns(r.get('exposed_comm_per_step_ns'))} | {pct(ov) if ov is not None else '—'} | "
                     f"{pct(r.get('gpu_busy_share'))} | "
                     f"{pct(r.get('compute_busy_share'))} | {pct(r.get('tc_time_share'))} ({r.get('tc_verdict')}) | "
                     f"{verdict_word(r.get('verdict'), r.get('headline_cause'))} | {_cell(r.get('headline_cause') or '')} |")
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
    head = ("| Phase (step family) | Steps | Median iteration | Warm-up left out | GPU busy (time-weighted) | Verdict | "
            "First cause of idle time |\n|---|---:|---:|---:|---:|---|---|")
    rows = [f"| `{_cell(f['name'])}` | {f['count']} | {ns(f['median_iteration_ns'])} | {f.get('warmup_steps', 0)} | "
            f"{pct(f.get('steady_gpu_busy_share', f.get('median_gpu_busy_share')))} | "
            f"{verdict_word(f['verdict'], f.get('headline_cause'))} | "
            f"{_cause_cell(f.get('causes')) if f['verdict'] in ('cpu-bound', 'mixed') else ''} |" for f in fams]
    return "\n".join([head] + rows)


def _unrecorded_serving(inf: dict) -> str:
    """The serving numbers' recorded label and, where the run timed steps unrecorded after its window, the same at
    that speed (``profile.window.unrecorded_speed``)."""
    u = inf.get("unrecorded")
    if not u:
        return " (as recorded)"
    tps = f", {u['tokens_per_s']:,.1f} tokens/s" if u.get("tokens_per_s") else ""
    return (f" as recorded; unrecorded, time per output token **{ns(u['tpot_ns'])}**{tps} "
            f"({recording_cost_words(u['recording_slowdown'])}: {u['steps']} decode calls timed after the window, "
            "this run)")


def inference_section(inf: dict) -> list[str]:
    """``## Inference``: a generation loop's serving numbers and its prefill and decode phases, each judged apart."""
    tps = inf.get("tokens_per_s")
    out = ["## Inference", "",
           f"A generation loop: {inf.get('requests', 0)} request{'s' if inf.get('requests') != 1 else ''} in the steady "
           f"steps ({inf.get('request_source')}), {inf.get('model_calls', 0)} model calls recorded. Time to first token "
           f"**{ns(inf.get('ttft_ns'))}**, time per output token **{ns(inf.get('tpot_ns'))}**"
           + (f", {tps:,.1f} tokens/s per sequence" if tps else "") + _unrecorded_serving(inf) + ".", "",
           "| Phase | Calls | Median iteration | GPU busy | GPU per call | Kernels per call | On Tensor Cores | Verdict | "
           "First cause of idle time |", "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for name in ("prefill", "decode"):
        p = inf.get(name) or {}
        if not p.get("calls"):
            out.append(f"| {name} | 0 | | | | | | | |")
            continue
        out.append(f"| {name}{' (warm-up only)' if p.get('warmup_only') else ''} | {p['calls']:,} | {ns(p.get('median_ns'))} | "
                   f"{pct(p.get('gpu_busy_share'))} | {ns(p.get('gpu_ns_per_call'))} | {p.get('kernels_per_call') or 0:,.0f} | "
                   f"{pct(p.get('tc_time_share'))} | {verdict_word(p.get('verdict'), p.get('headline_cause')) or ''} | "
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
