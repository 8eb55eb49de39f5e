"""``## Where the host time went``: the host's Python frames while the GPU idled (``timeline.host_frames``), as a
table a reviewer reads in a pull request: site, what it calls, the program's line, the idle time and its share."""
from __future__ import annotations

from .fmt import ns, pct

ROWS_SHOWN = 6     # a PR-sized report; verdict.json keeps more
SOURCE_CHARS = 60


def _code(text: str | None) -> str:
    if not text:
        return ""
    text = text if len(text) <= SOURCE_CHARS else text[:SOURCE_CHARS - 1] + "…"
    return f"`{text.replace('|', '∣').replace('`', 'ʼ')}`"


def _kind(row: dict) -> str:
    """The row's kind of work, or where its samples fell mostly while the GPU waited on work already launched, that:
    the host was not what the GPU waited for (TraceLens' vLLM decode trace: 81% of its idle moments at "(no Python
    frame)", after the host's recording had ended, beside queued copies)."""
    if row.get("topic"):
        return row["topic"]
    return "(the GPU waited on launched work)" if (row.get("idle_kinds") or {}).get("gpu-wait", 0.0) >= 0.5 else ""


def section(hf: dict | None, full: bool = False, stacks: str | None = None) -> list[str]:
    """The section; ``stacks``: the file the idle samples' stacks were written to beside the report, if any."""
    if not hf:
        return []
    rows = hf.get("rows") or []
    out = ["## Where the host time went", ""]
    cost = hf.get("sampler_cost_share")
    # a sampler samples every so often; torch.profiler's with_stack records every call, read at the idle moments
    sampled = not str(hf.get("source") or "").startswith("torch.profiler")
    how = (f"samples ({hf.get('source')}, every {ns(hf.get('interval_ns'))}" if sampled else
           f"moments read from the Python calls it recorded ({hf.get('source')}")
    said = (f"{hf.get('idle_samples', 0):,} of {hf.get('samples', 0):,} host stack {how}"
            + (f", {pct(cost)} of the program's time" if cost is not None else "")
            + f") fell in the GPU's idle time of the {hf.get('basis')}.")
    if not rows:
        return out + [said + " " + " ".join(hf.get("notes") or ["No sample fell in the GPU's idle time."]), ""]
    out += [said + " Each row is where the program's loop was (file:line), the function it had called and the "
            "program's own line it led to; the share is of the idle time, each sample standing for its part of the "
            "idle time of its kind in its range, ± its 95% error from the sample counts (the headline's numbers)."
            + (f" The stacks: {stacks} (speedscope)." if stacks else ""), "",
            "| Where (file:line) | Calls | Program line | Idle | Share | Kind of work |", "|---|---|---|---:|---:|---|"]
    shown = rows if full else rows[:ROWS_SHOWN]
    for r in shown:
        where = f"`{r['frame']}` {r['file']}:{r['line']}" + (f" {_code(r.get('source'))}" if r.get("source") else "")
        calls = f"`{r['calls']}`" if r.get("calls") else ""
        prog = (r.get("program_line") or "") + (f" {_code(r.get('program_source'))}" if r.get("program_source") else "")
        err = r.get("share_error")
        share = pct(r.get("share")) + (f" ± {100 * err:.0f}" if err is not None and err >= 0.005 else "")
        out.append(f"| {where} | {calls} | {prog} | {ns(r.get('idle_ns'))} | {share} | {_kind(r)} |")
    if len(shown) < len(rows):
        out.append(f"\n{len(rows) - len(shown)} more rows in verdict.json (`timeline.host_frames`).")
    return out + [""] + [f"- {n}" for n in hf.get("notes") or []] + ([""] if hf.get("notes") else [])
