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

import json
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..durations import duration
from ..runtime import variants as variants_mod
from ..errors import NsighttcError, UsageError
from . import measure

SCHEMA_ID = "nsighttc.try/1"
AUTOCASTS = ("bf16-autocast", "fp16-autocast")


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
    repeat: int = 1                                      # rounds of plain runs (baseline and variants alternating)
    explain: bool = False                                # a profiled run of every variant too
    full_run: bool = False                               # plain runs to the program's end (else a window of steps)
    verdict: Path | None = None                          # the baseline's verdict from an earlier profile


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


def _validate(target, opts: TryOptions) -> list[str]:
    if not target.python_program or target.distributed:
        raise UsageError("nsighttc try runs single-process Python programs (SCRIPT.py or -- python -m MODULE): its "
                         "variants are applied by the Python launcher")
    if opts.metric:
        try:
            re.compile(opts.metric)
        except re.error as exc:
            raise UsageError(f"--metric {opts.metric!r} is not a regular expression ({exc})") from None
    if opts.repeat < 1:
        raise UsageError(f"--repeat {opts.repeat}: at least 1")
    names = list(dict.fromkeys(opts.variants or ["auto"]))
    for n in names:
        if n not in ("auto", "baseline"):
            try:
                [variants_mod.parse(part) for part in n.split("+")]
            except ValueError as exc:
                raise UsageError(str(exc)) from None
    return names


def run_try(target, opts: TryOptions, say: Callable[[str], None] = lambda s: None) -> Outcome:
    """The baseline's verdict, plain runs of the baseline and every variant (``opts.repeat`` rounds), profiled runs
    with ``--explain``; writes try.json, try.md and try.png in a new run directory (module docstring)."""
    from ..collect import gpu
    from ..profile import new_run_dir
    from ..verdict import load_json
    names = _validate(target, opts)
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
    ctx = _Context(target, opts, run_dir, cache, say)

    # 1. the baseline: one plain run, its verdict (profiled, or given)
    base_plain = [ctx.plain("baseline", 0)]
    explained: dict[str, dict] = {}
    if base_doc is None:
        explained["baseline"] = ctx.profiled("baseline")
        base_doc = explained["baseline"].get("_verdict")
        if base_doc is None:
            notes.append("the baseline's profiled run gave no verdict: no predictions"
                         + (f" ({explained['baseline'].get('error')})" if explained["baseline"].get("error") else ""))
    else:
        notes.append(f"predictions and auto's choices from the verdict {opts.verdict}")
    plain_steps = base_plain[0].get("_steps") or {}

    def predict(name: str) -> dict | None:
        if base_doc is None or name == "baseline":
            return None
        from ..analysis import gain
        return gain.for_variant(base_doc, name, plain_steps or None)

    # 2. what runs: the names given, auto's choices ordered by their predicted gain
    planned: list[tuple[str, str | None]] = []
    for n in names:
        if n == "auto":
            from .auto import choose
            picked = choose(base_doc or {}, base_plain[0].get("_record"), opts.workers) \
                if base_plain[0]["status"] == "ok" else []
            picked.sort(key=lambda p: -((predict(p[0]) or {}).get("high") or 0.0))
            if not picked:
                notes.append("--variant auto: the baseline's verdict points to no variant"
                             + ("" if base_plain[0]["status"] == "ok" else " (the baseline failed)"))
            planned += picked
        elif n != "baseline":
            planned.append((n, None))
    planned = list({n: (n, why) for n, why in reversed(planned)}.values())[::-1]  # first mention wins

    # 3. plain runs, rounds alternating baseline and variants
    runs: dict[str, list[dict]] = {n: [] for n, _ in planned}
    for r in range(opts.repeat):
        if r:
            base_plain.append(ctx.plain("baseline", r))
        for n, _ in planned:
            runs[n].append(ctx.plain(n, r))
    if "auto" in names and base_plain[0]["status"] == "ok":
        combo = _best_two(base_plain, runs)
        if combo and combo not in runs:
            planned.append((combo, "--variant auto: the two variants that made the program fastest, combined"))
            runs[combo] = [ctx.plain(combo, r, pair=base_plain[r]) for r in range(opts.repeat)]
    if opts.explain:
        for n in ["baseline"] + [n for n, _ in planned]:
            if n not in explained:
                explained[n] = ctx.profiled(n)

    # 4. the rows
    rows = [_row("baseline", None, base_plain, base_plain, explained.get("baseline"), None, opts)]
    for n, why in planned:
        rows.append(_row(n, why, base_plain, runs[n], explained.get(n), predict(n), opts))
    if rows[0]["step_ns"] is None and rows[0]["status"] == "ok":
        notes.append("the baseline has no steps: no optimizer step, DataLoader iteration or model call was seen by the "
                     "launcher's hooks, and the program marks none; mark them with nsighttc.annotate.step(): "
                     "speed-ups need them")
    if any(r["name"].split("+")[0] == "fp16-autocast" or "fp16-autocast" in r["name"].split("+") for r in rows):
        notes.append(variants_mod.FP16_WARNING)
    if opts.repeat > 1:
        meds = [b["step_ns"] for b in base_plain if b.get("step_ns")]
        if len(meds) >= 2:
            notes.append(f"the baseline's step over {len(meds)} rounds: {min(meds) / 1e6:.4g} to "
                         f"{duration(max(meds))} ({100 * (max(meds) / min(meds) - 1):.1f}% apart)")
    doc = {"schema": SCHEMA_ID, "program": target.label,
           "command": shlex.join(target.argv if not target.module else ["python", "-m", *target.argv]),
           "gpu": [g.__dict__ for g in gpus], "metric_pattern": opts.metric, "repeat": opts.repeat,
           "measured": "plain runs, steps timed at their boundaries (CUDA events where the program uses CUDA)",
           "window": not (opts.full_run or opts.metric), "notes": notes,
           "findings": [{"id": f["id"], "title": f["title"], "severity": f["severity"], "gain": f.get("gain")}
                        for f in (base_doc or {}).get("findings") or []],
           "variants": rows}
    _write(run_dir, doc)
    return Outcome(run_dir, doc)


def _best_two(base: list[dict], runs: dict[str, list[dict]]) -> str | None:
    """The two variants that made the program measurably faster, best first, as one ``A+B`` (not two autocasts)."""
    scored = []
    for n, rs in runs.items():
        if "+" in n or any(r["status"] != "ok" for r in rs):
            continue
        m = measure.compare([b.get("_steps") for b in base], [r.get("_steps") for r in rs])
        if m["change"] == "faster":
            scored.append((m["speedup"], n))
    scored.sort(reverse=True)
    picked: list[str] = []
    for _, n in scored:
        if n in AUTOCASTS and any(p in AUTOCASTS for p in picked):
            continue
        picked.append(n)
        if len(picked) == 2:
            return "+".join(picked)
    return None


def _row(name: str, why: str | None, base: list[dict], rs: list[dict], explained: dict | None,
         predicted: dict | None, opts: TryOptions) -> dict:
    failed = next((r for r in rs if r["status"] != "ok"), None)
    row: dict = {"name": name, "status": "failed" if failed else "ok", "chosen_by": why,
                 "applied": next((r["applied"] for r in rs if r.get("applied")), None),
                 "error": failed["error"] if failed else None,
                 "step_ns": None, "speedup": None, "spread": None, "change": None, "rounds": [],
                 "phases": None, "predicted": predicted, "prediction": None, "metric": None,
                 "seconds": round(sum(r["seconds"] for r in rs), 2), "run_dirs": [r["run_dir"] for r in rs],
                 "tc_time_share": None, "by_dtype": None, "gpu_busy_share": None, "verdict": None,
                 "headline_cause": None, "explained": None}
    metrics = [r["metric"] for r in rs if r.get("metric") is not None]
    if metrics:
        row["metric"] = sorted(metrics)[len(metrics) // 2]
    if explained:
        keep = ("tc_time_share", "by_dtype", "tc_verdict", "gpu_busy_share", "verdict", "headline_cause", "run_dir",
                "status", "error", "note")
        row["explained"] = {k: explained.get(k) for k in keep}
        row.update({k: explained.get(k) for k in ("tc_time_share", "by_dtype", "gpu_busy_share", "verdict",
                                                  "headline_cause")})
        if explained.get("note"):
            row["note"] = explained["note"]
    if failed:
        return row
    m = measure.compare([b.get("_steps") for b in base], [r.get("_steps") for r in rs])
    row.update({k: m.get(k) for k in ("step_ns", "speedup", "spread", "change", "rounds")})
    if m.get("note"):
        row["note"] = m["note"]
    steps = rs[0].get("_steps") or {}
    row["phases"] = {p: {k: v[k] for k in ("step_ns", "steps", "warmup", "clock", "first_half_ratio") if k in v}
                     for p, v in steps.items()} or None
    if name == "baseline":
        row["speedup"] = 1.0 if row["step_ns"] else None
    if predicted and row["speedup"]:
        sp = row["speedup"]
        row["prediction"] = "within" if predicted["low"] - 1e-9 <= sp <= predicted["high"] + 1e-9 else \
            ("below" if sp < predicted["low"] else "above")
    return row


def schema_problem(doc: dict) -> str | None:
    """The first violation of ``schema/try-1.json`` as 'at $.path: what', or None."""
    import jsonschema
    from importlib.resources import files
    schema = json.loads(files("nsighttc").joinpath("schema/try-1.json").read_text(encoding="utf-8"))
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    if not errors:
        return None
    first = min(errors, key=lambda e: len(e.absolute_path))
    return f"at {first.json_path}: {first.message[:160]}"


def _write(run_dir: Path, doc: dict) -> None:
    from ..render import try_report
    (run_dir / "try.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    plot = try_report.plot(doc, run_dir / "try.png")
    (run_dir / "try.md").write_text(try_report.markdown(doc, plot.name if plot else None))


class _Context:
    """How one run of the program is made: plain (timed steps) or profiled (a verdict)."""

    def __init__(self, target, opts: TryOptions, run_dir: Path, cache, say):
        self.target, self.opts, self.run_dir, self.cache, self.say = target, opts, run_dir, cache, say

    def _dir(self, name: str, kind: str) -> Path:
        from ..profile import safe_name
        d = self.run_dir / safe_name(name) / kind
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _run(self, name: str, d: Path, argv: list[str], torch_trace: Path | None) -> tuple[dict, object]:
        from ..profile import Pass, run_pass
        p = Pass("torch", argv, d / "program.log", torch_trace=torch_trace)
        t0 = time.monotonic()
        run_pass(p, timeout=self.opts.timeout, say=self.say)
        row: dict = {"name": name, "status": "ok", "error": None, "applied": None, "metric": None,
                     "seconds": round(time.monotonic() - t0, 2), "run_dir": str(d.relative_to(self.run_dir))}
        try:
            record = json.loads((d / "applied.json").read_text())
            row["applied"] = record.get("variants") or [{"variant": "baseline", "set": {}}]
            row["_record"] = record
        except (OSError, ValueError):
            record = None
        if p.timed_out or p.interrupted:
            row["status"], row["error"] = "failed", ("timed out" if p.timed_out else "interrupted")
        elif p.returncode != 0:
            row["status"] = "failed"
            row["error"] = _last_error_line(p.log.with_suffix(".stderr.log"), p.log) or f"exit code {p.returncode}"
        if self.opts.metric:
            try:
                row["metric"] = read_metric(self.opts.metric, p.log.read_text(errors="replace"))
            except OSError:
                pass
        (d / "run.json").write_text(json.dumps({"variant": name, "command": shlex.join(argv),
                                                "returncode": p.returncode, "seconds": row["seconds"],
                                                "applied": record}, indent=2) + "\n")
        return row, p

    def _window(self, profiled: bool) -> dict | None:
        if profiled:
            return {"warmup": None, "steps": None, "end": "stop"}
        return None if (self.opts.full_run or self.opts.metric) else {"warmup": None, "steps": None, "end": "stop"}

    def plain(self, name: str, round_: int, pair: dict | None = None) -> dict:
        """One plain run, its steps timed (``_steps``: ``measure.read``)."""
        from ..collect import engines
        d = self._dir(name, f"plain{round_ + 1}")
        argv = engines.launcher_argv(self.target.argv, module=self.target.module, annotate=self.opts.annotate,
                                     variants=[] if name == "baseline" else name.split("+"),
                                     applied=d / "applied.json", window=self._window(False))
        i = argv.index("--annotate")
        argv[i:i] = ["--step-times", str(d / "step_times.json")]
        self.say(f"[try {name}] plain run {round_ + 1}/{self.opts.repeat} ...")
        row, p = self._run(name, d, argv, None)
        row["_steps"] = measure.read(d / "step_times.json") if row["status"] == "ok" else None
        if row["status"] != "ok":
            self.say(f"[try {name}] failed: {row['error']}")
        elif row["_steps"]:
            base = (pair or {}).get("_steps")
            w = measure.weights_of(base or row["_steps"])
            step = measure.program_step(row["_steps"], w)
            row["step_ns"] = step[0] if step else None
            self.say(f"[try {name}] step {duration(step[0])}" if step else f"[try {name}] done")
        return row

    def profiled(self, name: str) -> dict:
        """One run under torch.profiler (a window of steps): its verdict, Tensor Core share and timeline verdict."""
        from ..collect import engines
        d = self._dir(name, "profiled")
        trace = d / "torch_trace.json"
        argv = engines.launcher_argv(self.target.argv, module=self.target.module, annotate=self.opts.annotate,
                                     torch_trace=trace, variants=[] if name == "baseline" else name.split("+"),
                                     applied=d / "applied.json", window=self._window(True), operators=False)
        self.say(f"[try {name}] profiled run (for its verdict) ...")
        row, p = self._run(name, d, argv, trace)
        if row["status"] != "ok":
            self.say(f"[try {name}] profiled run failed: {row['error']}")
            return row
        try:
            verdict = _analyse(trace, self.opts, self.cache)
        except NsighttcError as exc:
            row["status"], row["error"] = "failed", f"its trace could not be analysed: {exc}"
            return row
        doc = verdict.to_json()
        (d / "verdict.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
        from ..render.markdown import write_report
        write_report(doc, d / "report.md")
        tc, tl = doc["tensor_cores"], doc.get("timeline") or {}
        row.update({"tc_time_share": tc.get("tc_time_share"), "by_dtype": tc.get("by_dtype"),
                    "tc_verdict": tc.get("verdict"), "gpu_busy_share": tl.get("gpu_busy_share"),
                    "verdict": tl.get("verdict"), "headline_cause": tl.get("headline_cause"), "_verdict": doc})
        want = {"bf16-autocast": "bf16", "fp16-autocast": "fp16"}
        missing = [w for part, w in want.items() if part in name.split("+") and w not in (row["by_dtype"] or {})]
        if missing:
            row["note"] = (f"applied, but no {'/'.join(missing)} Tensor Core work ran: the program's own "
                           "`torch.autocast(..., enabled=False)` or explicit casts override an outer autocast")
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
