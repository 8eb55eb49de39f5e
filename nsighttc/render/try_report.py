"""The comparison of ``nsighttc try`` as Markdown and as a bar plot, from ``try.json`` alone."""
from __future__ import annotations

from pathlib import Path

from .fmt import ns, pct

VERDICT_WORDS = {"cpu-bound": "CPU-bound", "gpu-bound": "GPU-bound", "mixed": "mixed",
                 "insufficient-data": "not enough data", "no-gpu-work": "no GPU work"}


def _dtypes(by: dict | None) -> str:
    if not by:
        return "—"
    return ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(by.items(), key=lambda x: -x[1]))


def _applied(v: dict) -> str:
    items = v.get("applied") or []
    text = "; ".join(", ".join(f"{k}={val}" for k, val in (i.get("set") or {}).items() if k != "held")
                     for i in items) or "—"
    return text.replace("|", "\\|")


def step_ns(v: dict) -> float | None:
    """A variant's step: ``step_ns`` (the mean steady step of plain runs), or ``median_step_ns`` in a try.json written
    before try measured plain runs (reports/try/ has some)."""
    return v.get("step_ns", v.get("median_step_ns"))


def _speedup(v: dict) -> str:
    if not v.get("speedup"):
        return "—"
    sp = v.get("spread") or {}
    rng = f" ({sp['low']:.2f}-{sp['high']:.2f})" if sp.get("low") is not None and v["name"] != "baseline" else ""
    return f"{v['speedup']:.2f}x{rng}"


def _predicted(v: dict) -> str:
    p = v.get("predicted")
    if not p:
        return "—"
    return f"{p['low']:.2f}-{p['high']:.2f}x"


WIDE = 3.0  # a predicted range wider than this (high over low) says where its width comes from

PREDICTION_WORDS = {"within": "within", "below": "**below the range**", "above": "**above the range**"}


def markdown(doc: dict, plot: str | None = None) -> str:
    vs = doc["variants"]
    base = next((v for v in vs if v["name"] == "baseline"), None)
    ok = [v for v in vs if v["status"] == "ok" and v.get("speedup") and v["name"] != "baseline"
          and v.get("change") != "no measurable change"]
    best = max(ok, key=lambda v: v["speedup"], default=None)
    lines = [f"# nsighttc try: `{doc['program']}`", "", f"Command: `{doc['command']}`", ""]
    if best and base and step_ns(base) and best["speedup"] > 1:
        lines += [f"**Fastest: `{best['name']}` — {best['speedup']:.2f}x the baseline's step "
                  f"({ns(step_ns(base))} → {ns(step_ns(best))})**", ""]
    rounds = doc.get("repeat", 1)
    rule = f"; {doc['rounds_rule']}" if doc.get("rounds_rule") else ""
    lines += [f"Speed from plain runs ({rounds} round{'s' if rounds != 1 else ''}{rule}, baseline and variants "
              "alternating; steps timed at their boundaries, no profiler); predicted: the baseline's findings' "
              "estimated gain (`analysis.gain`).", ""]
    nxt = doc.get("next")
    if nxt:
        then = ""
        if nxt.get("variant"):
            combo = f"{nxt['after']}+{nxt['variant']}"
            then = (f" → `{combo}` measured {nxt['measured_speedup']:.2f}x ({nxt.get('measured_change')})"
                    if nxt.get("measured_speedup") else f" → the fix: `{nxt['variant']}`")
        elif nxt.get("advice"):
            then = f" → {nxt['advice']}"
        lines += [f"**Next bottleneck after `{nxt['after']}`: {nxt['cause']}** — {nxt['evidence']} "
                  f"(from {nxt['measured']}){then}", ""]
    has_metric = any(v.get("metric") is not None for v in vs)
    has_gen = any(v.get("inference") for v in vs)
    has_compile = any((v.get("compile") or {}).get("compile_s") for v in vs)
    explained = any(v.get("explained") for v in vs)
    head = "| variant | status | step | speed-up (spread) | change | predicted | prediction |"
    sep = "|---|---|---:|---:|---|---:|---|"
    if has_metric:
        head, sep = head + " metric |", sep + "---:|"
    if has_gen:
        head, sep = head + " tokens/s | TTFT | TPOT |", sep + "---:|---:|---:|"
    if has_compile:
        head, sep = head + " compile (before the timed steps) |", sep + "---:|"
    if explained:
        head, sep = head + " Tensor Cores (dtypes) | GPU busy | verdict |", sep + "---|---:|---|"
    lines += [head + " applied |", sep + "---|"]
    for v in vs:
        if v["status"] == "ok":
            status = "ok"
        elif v["status"] == "not applied":
            status = f"**not applied**: {(v.get('not_applied') or '').replace('|', '/')}"
        else:
            status = f"**failed**: {(v.get('error') or '').replace('|', '/')}"
        row = (f"| `{v['name']}` | {status} | {ns(step_ns(v)) if v['status'] != 'not applied' else '—'} | {_speedup(v)} | "
               f"{v.get('change') or '—' if v['name'] != 'baseline' else '—'} | {_predicted(v)} | "
               f"{PREDICTION_WORDS.get(v.get('prediction'), '—')} |")
        if has_metric:
            row += f" {'%g' % v['metric'] if v.get('metric') is not None else '—'} |"
        if has_gen:
            g = v.get("inference") or {}
            row += (f" {format(round(g['tokens_per_s']), ',') if g.get('tokens_per_s') else '—'} | "
                    f"{ns(g.get('ttft_ns')) if g.get('ttft_ns') else '—'} | {ns(g.get('tpot_ns')) if g.get('tpot_ns') else '—'} |")
        if has_compile:
            c = v.get("compile") or {}
            row += (f" {c['compile_s']:.1f} s, {c.get('graphs', 0)} graph(s) |" if c.get("compile_s") else " — |")
        if explained:
            e = v.get("explained") or {}
            row += (f" {pct(e.get('tc_time_share')) if e.get('tc_time_share') is not None else '—'} "
                    f"({_dtypes(e.get('by_dtype'))}) | "
                    f"{pct(e.get('gpu_busy_share')) if e.get('gpu_busy_share') is not None else '—'} | "
                    f"{VERDICT_WORDS.get(e.get('verdict'), e.get('verdict') or '—')} |")
        lines.append(row + f" {_applied(v)} |")
    lines.append("")
    missed = [v for v in vs if v.get("prediction") in ("below", "above")]
    if missed:
        lines += ["Predictions the measurement fell outside: " + "; ".join(
            f"`{v['name']}` measured {v['speedup']:.2f}x, predicted {_predicted(v)}" for v in missed), ""]
    changed = metric_changes(doc)
    if changed:
        lines += ["Metric changed by more than 5% (a speed metric should; an accuracy or a loss should not, or the "
                  "variant changed what the program computes): "
                  + "; ".join(f"`{n}` {b:g} → {m:g}" for n, b, m in changed), ""]
    patched = [v for v in vs if v.get("patch")]
    if patched:
        lines += ["## Patches", "", "Each edit made to a copy of the program (the program's own files untouched), run "
                  "in the same rounds as the baseline; kept where it ran and made the program measurably faster. "
                  "`nsighttc fix --apply` writes the kept ones into the program's files, each with a backup.", ""]
        for v in patched:
            p = v["patch"]
            measured = (f"{v['speedup']:.2f}x ({v['spread']['low']:.2f}-{v['spread']['high']:.2f}), {v.get('change')}"
                        if v.get("speedup") and v.get("spread") else (v.get("error") or v.get("status")))
            lines += [f"### `{p['variant']}` — {'**kept**' if p.get('kept') else 'not kept'}: {measured}", ""]
            lines += [f"- {e}" for e in p["edits"]] + [""]
            lines += ["```diff", p["diff"].rstrip("\n"), "```", ""]
    noted = [v for v in vs if v.get("note")]
    if noted:
        lines += [f"- `{v['name']}`: {v['note']}" for v in noted] + [""]
    chosen = [v for v in vs if v.get("chosen_by") and not v.get("patch")]  # (a patch row's is its edit, shown above)
    if chosen:
        lines += ["Chosen by `--variant auto`:", ""] + [f"- `{v['name']}`: {v['chosen_by']}" for v in chosen] + [""]
    preds = [v for v in vs if v.get("predicted")]
    if preds:
        wide = [v for v in preds if v["predicted"]["high"] > WIDE * v["predicted"]["low"]]
        if wide:
            lines += ["Predictions wider than 3x (" + ", ".join(f"`{v['name']}`" for v in wide) + "): the recording "
                      "does not say how much faster those kernels get (the low end: small or memory-bound work; the "
                      "high end: the ratio of the peaks) nor how much of the idle time a fix removes; the measured "
                      "speed-up beside each is what to rank by.", ""]
        lines += ["<details><summary>How each prediction was made</summary>", ""] + [
            f"- `{v['name']}`: {v['predicted']['basis']}" for v in preds] + ["", "</details>", ""]
    if doc.get("findings"):
        ranked = [f for f in doc["findings"] if (f.get("gain") or {}).get("high")]
        if ranked:
            lines += ["The baseline's findings by estimated gain: " + "; ".join(
                f"{f['title']} ({f['gain']['low']:.2f}-{f['gain']['high']:.2f}x)" for f in ranked[:6]), ""]
    if plot:
        lines += [f"![speed-up per variant]({plot})", ""]
    if doc.get("metric_pattern"):
        lines += [f"Metric: the last match of `{doc['metric_pattern']}` in each run's output (median over rounds).", ""]
    if doc.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    lines += ["<sub>Speed-up: the baseline's mean steady step over the variant's (several phases: weighed by the "
              "baseline's steps), from plain runs; several rounds: the geometric mean of the rounds' speed-ups, its spread the "
              "90% interval of that mean (never narrower than the baseline's own run-to-run noise); one round: the steps' "
              "quartiles. A spread that holds 1.00x is no measurable change. Not applied: the variant changed nothing in "
              "its runs, so they measured the program unchanged (no speed-up). tokens/s, TTFT (the prefill call), "
              "TPOT (the decode calls' mean): a generation loop's steady model calls. Compile: torch.compile's time in "
              "the run, all of it before the timed steps unless a note says it kept recompiling. Tensor Core columns: a profiled run with "
              "`--explain`. Per-run logs and step times are in each variant's directory. Generated by "
              "nsighttc.</sub>", ""]
    return "\n".join(lines)


def metric_changes(doc: dict, tolerance: float = 0.05) -> list[tuple[str, float, float]]:
    """Variants whose metric differs from the baseline's by more than ``tolerance`` (relative): a speed-up that
    costs accuracy must not read as a win (H100: bf16-autocast on the large MNIST MLP, accuracy 1.0 -> 0.067)."""
    vs = doc["variants"]
    base = next((v.get("metric") for v in vs if v["name"] == "baseline"), None)
    if base is None:
        return []
    out = []
    for v in vs:
        m = v.get("metric")
        if v["name"] != "baseline" and m is not None and abs(m - base) > tolerance * max(abs(base), 1e-12):
            out.append((v["name"], base, m))
    return out


def plot(doc: dict, dest: Path) -> Path | None:
    """Bar plot of the speed-up over the baseline per variant (failed variants left out)."""
    rows = [v for v in doc["variants"] if v["status"] == "ok" and v.get("speedup")]
    if len(rows) < 2:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(rows) + 1.5), 3.2))
    names = [v["name"] for v in rows]
    vals = [v["speedup"] for v in rows]
    colors = ["#888888" if n == "baseline" else ("#2a9d8f" if s >= 1 else "#e76f51") for n, s in zip(names, vals)]
    ax.bar(names, vals, color=colors)
    ax.axhline(1.0, color="black", linewidth=0.8)
    for i, s in enumerate(vals):
        ax.text(i, s, f"{s:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("speed-up over baseline (steady step)")
    ax.set_title(f"nsighttc try: {doc['program']}", fontsize=10)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(dest, dpi=110)
    plt.close(fig)
    return dest
