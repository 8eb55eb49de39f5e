"""How one run of the program is made for ``nsighttc try``: plain (its steps timed, no profiler) or profiled (a verdict
that explains the speed-up), and what each run's row says (status, error, metric, steps)."""
from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

from ..durations import duration
from ..errors import NsighttcError
from . import measure
from .options import TryOptions, read_metric
from ..profile.passes import how_it_ended


class Runner:
    """How one run of the program is made: plain (timed steps) or profiled (a verdict)."""

    def __init__(self, target, opts: TryOptions, run_dir: Path, cache, say):
        self.target, self.opts, self.run_dir, self.cache, self.say = target, opts, run_dir, cache, say
        self.patched: dict[str, object] = {}  # "patch:V" -> the target of the program's patched copy

    def _dir(self, name: str, kind: str) -> Path:
        from ..profile import safe_name
        d = self.run_dir / safe_name(name) / kind
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _run(self, name: str, d: Path, argv: list[str], torch_trace: Path | None) -> tuple[dict, object]:
        from ..profile import Pass, run_pass
        p = Pass("torch", argv, d / "program.log", torch_trace=torch_trace, records=torch_trace is not None,
                 mode=f"try {name}: " + ("profiled" if torch_trace is not None else "plain, no profiler"))
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
            row["error"] = how_it_ended(p.returncode, p.log)
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
        target = self.patched.get(name, self.target)
        argv = engines.launcher_argv(target.argv, module=target.module, annotate=self.opts.annotate,
                                     variants=[] if name == "baseline" or name in self.patched else name.split("+"),
                                     applied=d / "applied.json", window=self._window(False))
        i = argv.index("--annotate")
        argv[i:i] = ["--step-times", str(d / "step_times.json")]
        of = f"/{self.opts.repeat}" if self.opts.repeat is not None else ""
        self.say(f"[try {name}] plain run, round {round_ + 1}{of} ...")
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
            verdict = analyse(trace, self.opts, self.cache)
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


def analyse(trace: Path, opts: TryOptions, cache):
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
