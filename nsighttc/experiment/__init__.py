"""``nsighttc try``: run the program as it is and under variants applied from the launcher, and compare.

Every run is one pass of the cheapest timeline engine (torch.profiler inside the launcher, ~1.0-1.2x a plain
run): the median step, the Tensor Core share with its dtypes, GPU busy and the timeline verdict per variant,
plus the program's own metric (``--metric REGEX`` over its output). Tensor Core evidence comes from kernel
names, made hardware-true where the evidence cache of an earlier ``nsighttc profile`` on this GPU and driver
measured the kernel. A variant that crashes is reported as failed with the error's last line; the others
still run. The baseline runs first; ``--variant auto`` then picks what its verdict points to
(``experiment.auto``). ``A+B`` is one variant that applies both (``workers=8+pin-memory``).
"""
from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..runtime import variants as variants_mod
from ..errors import NsighttcError, UsageError

SCHEMA_ID = "nsighttc.try/1"


@dataclass
class TryOptions:
    variants: list[str] = field(default_factory=list)   # names as typed; "auto" expands after the baseline
    metric: str | None = None
    step_range: str | None = None
    out: Path | None = None
    timeout: float | None = None                         # per run
    annotate: str = "script"
    cache: bool = True
    workers: int | None = None                           # for auto's workers=N (default: min(8, cores))


@dataclass
class Outcome:
    run_dir: Path
    doc: dict
    exit_code: int = 0


def _last_error_line(*logs: Path) -> str | None:
    """The last line that looks like the error a crashed program printed (its traceback's last line)."""
    for log in logs:
        try:
            lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            continue
        lines = [ln for ln in lines if not ln.startswith(("nsighttc.launch:", "USDT:", "[W", "warnings.warn"))]
        if lines:
            return lines[-1][:300]
    return None


def read_metric(pattern: str, text: str) -> float | None:
    """The last match of ``pattern`` in the program's output: its first group (else the whole match) as a
    number; None when it never matched or is not a number."""
    matches = list(re.finditer(pattern, text, re.MULTILINE))
    if not matches:
        return None
    m = matches[-1]
    raw = m.group(1) if m.groups() else m.group(0)
    num = re.search(r"[-+]?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?", raw or "")
    try:
        return float(num.group(0).replace(",", "")) if num else None
    except ValueError:
        return None


def run_try(target, opts: TryOptions, say: Callable[[str], None] = lambda s: None) -> Outcome:
    """Baseline, then every variant; writes try.json, try.md and try.png in a new run directory."""
    from ..collect import gpu
    from ..profile import new_run_dir
    if not target.python_program or target.distributed:
        raise UsageError("nsighttc try runs single-process Python programs (SCRIPT.py or -- python -m MODULE): its "
                         "variants are applied by the Python launcher")
    if opts.metric:
        try:
            re.compile(opts.metric)
        except re.error as exc:
            raise UsageError(f"--metric {opts.metric!r} is not a regular expression ({exc})") from None
    names = list(dict.fromkeys(opts.variants or ["auto"]))
    for n in names:
        if n not in ("auto", "baseline"):
            try:
                [variants_mod.parse(part) for part in n.split("+")]
            except ValueError as exc:
                raise UsageError(str(exc)) from None
    gpus = gpu.list_gpus()
    run_dir = new_run_dir(opts.out, f"try-{target.label}")
    say(f"nsighttc try: run directory {run_dir}")
    notes = [] if gpus else ["no NVIDIA GPU here: every variant runs on the CPU (autocast variants use CPU autocast)"]
    cache = None
    if opts.cache and gpus:
        from ..collect.evidence_cache import EvidenceCache
        cache = EvidenceCache(gpus[0].name, gpus[0].driver or "")
        notes += cache.notes
    results = [_run_one(target, opts, "baseline", None, run_dir, cache, say)]
    planned: list[tuple[str, str | None]] = []
    for n in names:
        if n == "auto":
            from .auto import choose
            base = results[0]
            picked = choose(base.get("_verdict") or {}, base.get("_record"), opts.workers) \
                if base["status"] == "ok" else []
            if not picked:
                notes.append("--variant auto: the baseline's verdict points to no variant"
                             + ("" if base["status"] == "ok" else " (the baseline failed)"))
            planned += [(p, why) for p, why in picked]
        elif n != "baseline":
            planned.append((n, None))
    seen = set()
    for name, why in planned:
        if name in seen:
            continue
        seen.add(name)
        results.append(_run_one(target, opts, name, why, run_dir, cache, say))
    base_step = results[0].get("median_step_ns")
    for r in results:
        step = r.get("median_step_ns")
        r["speedup"] = (base_step / step) if (base_step and step and r["status"] == "ok") else None
    if base_step is None:
        notes.append("the baseline has no steps: no optimizer step, DataLoader iteration or model call was seen by the "
                     "launcher's hooks, and the program marks none; mark them with nsighttc.annotate.step() or "
                     "--step-range NAME: speed-ups need them")
    if any(r["name"] == "fp16-autocast" for r in results):
        notes.append(variants_mod.FP16_WARNING)
    doc = {"schema": SCHEMA_ID, "program": target.label,
           "command": shlex.join(target.argv if not target.module else ["python", "-m", *target.argv]),
           "gpu": [g.__dict__ for g in gpus], "metric_pattern": opts.metric, "notes": notes,
           "variants": [{k: v for k, v in r.items() if not k.startswith("_")} for r in results]}
    _write(run_dir, doc)
    return Outcome(run_dir, doc)


def _write(run_dir: Path, doc: dict) -> None:
    from ..render import try_report
    (run_dir / "try.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    plot = try_report.plot(doc, run_dir / "try.png")
    (run_dir / "try.md").write_text(try_report.markdown(doc, plot.name if plot else None))


def _run_one(target, opts: TryOptions, name: str, why: str | None, run_dir: Path, cache, say) -> dict:
    """One run of the program (the baseline, or one variant) under torch.profiler, then its verdict."""
    from ..collect import engines
    from ..profile import Pass, run_pass, safe_name
    d = run_dir / safe_name(name)
    d.mkdir()
    trace, applied = d / "torch_trace.json", d / "applied.json"
    argv = engines.launcher_argv(target.argv, module=target.module, annotate=opts.annotate, torch_trace=trace,
                                 variants=[] if name == "baseline" else name.split("+"), applied=applied)
    p = Pass("torch", argv, d / "program.log", torch_trace=trace)
    say(f"[try {name}] running ...")
    t0 = time.monotonic()
    run_pass(p, timeout=opts.timeout, say=say)
    row: dict = {"name": name, "status": "ok", "chosen_by": why, "applied": None, "median_step_ns": None,
                 "speedup": None, "tc_time_share": None, "by_dtype": None, "gpu_busy_share": None, "verdict": None,
                 "metric": None, "error": None, "seconds": round(time.monotonic() - t0, 2), "run_dir": d.name}
    try:
        record = json.loads(applied.read_text())
        row["applied"] = record.get("variants") or [{"variant": "baseline", "set": {}}]
        row["_record"] = record
    except (OSError, ValueError):
        record = None
    if p.timed_out or p.interrupted:
        row["status"], row["error"] = "failed", ("timed out" if p.timed_out else "interrupted")
    elif p.returncode != 0:
        row["status"] = "failed"
        row["error"] = _last_error_line(p.log.with_suffix(".stderr.log"), p.log) or f"exit code {p.returncode}"
    if opts.metric:
        try:
            row["metric"] = read_metric(opts.metric, p.log.read_text(errors="replace"))
        except OSError:
            pass
    (d / "run.json").write_text(json.dumps({"variant": name, "command": shlex.join(argv), "returncode": p.returncode,
                                            "seconds": row["seconds"], "applied": record}, indent=2) + "\n")
    if row["status"] != "ok":
        say(f"[try {name}] failed: {row['error']}")
        return row
    try:
        verdict = _analyse(trace, opts, cache)
    except NsighttcError as exc:
        row["status"], row["error"] = "failed", f"its trace could not be analysed: {exc}"
        return row
    doc = verdict.to_json()
    (d / "verdict.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    from ..render.markdown import write_report
    write_report(doc, d / "report.md")
    tc, tl = doc["tensor_cores"], doc.get("timeline") or {}
    steps = tl.get("steps") or {}
    # the step as the GPU finished it: a host running ahead of the GPU makes host iterations look short
    step_ns = steps.get("median_effective_ns") or steps.get("median_iteration_ns")
    row.update({"median_step_ns": step_ns, "median_host_iteration_ns": steps.get("median_iteration_ns"),
                "tc_time_share": tc.get("tc_time_share"),
                "by_dtype": tc.get("by_dtype"), "tc_verdict": tc.get("verdict"), "tc_evidence": tc.get("evidence"),
                "gpu_busy_share": tl.get("gpu_busy_share"), "verdict": tl.get("verdict"),
                "headline_cause": tl.get("headline_cause"), "_verdict": doc})
    want = {"bf16-autocast": "bf16", "fp16-autocast": "fp16"}
    missing = [d for part, d in want.items() if part in name.split("+") and d not in (row["by_dtype"] or {})]
    if missing:
        row["note"] = (f"applied, but no {'/'.join(missing)} Tensor Core work ran: the program's own "
                       "`torch.autocast(..., enabled=False)` or explicit casts override an outer autocast")
    say(f"[try {name}] median step {row['median_step_ns'] and row['median_step_ns'] / 1e6:.3g} ms, "
        f"Tensor Cores {100 * (row['tc_time_share'] or 0):.0f}%" if row["median_step_ns"] else
        f"[try {name}] done (no steps found)")
    return row


def _analyse(trace: Path, opts: TryOptions, cache):
    """The run's verdict; Tensor Core evidence from the cache where an earlier ncu pass measured the kernel."""
    from ..api import analyze
    from ..profile.evidence import planned_needs
    parsed: dict = {}
    evidence = None
    if cache is not None:  # what the default run's ncu pass would need, looked up instead of measured
        need = planned_needs([trace], parsed)
        if not need.empty:
            evidence = cache.lookup(need)
    return analyze([parsed.get(trace, trace)], step_range=opts.step_range, evidence=evidence)
