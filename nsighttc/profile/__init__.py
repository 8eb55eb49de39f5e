"""``nsighttc profile``: from a script to a verdict. Plans the engines, runs them as subprocesses in a
new run directory, exports what they recorded, analyses it, and writes ``verdict.json`` + ``report.md``.

Engines (``collect.engines`` builds their argument lists):
- ``auto`` (the default run, ``profile.default``): a timeline pass (torch.profiler, or nsys) and an
  Nsight Compute pass restricted to the kernels that still lack hardware evidence, started beside the
  timeline pass and stopped once each was profiled; an evidence cache makes the ncu pass unnecessary on
  later runs. The two cannot share one run: torch.profiler's CUPTI session is refused under ncu
  (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, seen on H100 with torch 2.11 / ncu 2025.3.1), and under
  ncu every launch is serialised, so its timing is no timeline. ``--fast``: timeline only.
  When ncu is refused performance counters the verdict keeps the timeline and says so.
- ``torch``: the program under torch.profiler (needs only PyTorch): timeline, kernel names;
- ``nsys``: Nsight Systems: timeline with NVTX ranges and CUDA API calls;
- ``ncu``: Nsight Compute alone: hardware Tensor Core counters, each distinct launch configuration once.

The run directory is never reused; Ctrl-C or ``--timeout`` kills the workload's whole process group and
a report is still written from what was collected. The workload's exit code is reported and returned.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

from .. import __version__
from ..collect import engines, gpu, process, tools
from ..collect.ncu_export import export_raw_csv
from ..collect.nsys_export import export_sqlite
from ..errors import CollectError, NsighttcError, UsageError
from .target import Target, resolve_target
from .distributed import distribute, launched_per_rank, rank_dirs, rank_run_dir

__all__ = ["Options", "Pass", "Result", "Target", "distribute", "new_run_dir", "plan", "profile", "rank_dirs",
           "rank_run_dir", "resolve_target"]

ENGINES = ("auto", "ncu", "nsys", "torch")
PERM_ERROR = "ERR_NVGPUCTRPERM"
PERM_FIX = ("ncu is not allowed to read the GPU performance counters (ERR_NVGPUCTRPERM). Fix: run as root or "
            "with CAP_SYS_ADMIN (containers: --cap-add SYS_ADMIN), or set `options nvidia "
            "NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d/ and reload the driver")
_PROF_LINE = re.compile(r'==PROF== Profiling "([^"]+)"')


class NoGPU(NsighttcError):
    exit_code = 5


class CounterPermission(CollectError):
    exit_code = 6


@dataclass
class Options:
    engine: str = "auto"
    out: Path | None = None
    range: str | None = None
    annotate: str = "script"
    ncu: str | None = None
    nsys: str | None = None
    timeout: float | None = None
    keep_going: bool = False
    every_launch: bool = False
    all_kernels: bool = False
    timeline: bool = False          # accepted for old command lines: the default run has the timeline
    fast: bool = False              # default run: timeline only, no Nsight Compute pass
    hardware: bool = False          # default run: measure every kernel needing hardware evidence, cache or not
    cache: bool = True              # default run: read and write the evidence cache
    timeline_engine: str = "auto"   # default run: auto | torch | nsys
    overlap: str = "cuda"           # default run: where the ncu pass waits while the timeline runs
    #                                 (cuda|context|start|none: nsighttc.launch --gate-at)
    counters: str = "fast"          # default run's ncu pass: fast (one replay pass: instruction counts) | full (FLOPs)
    replay: bool = True             # default run: measure kernels by calling their operators again (nsighttc.replay)
    record_shapes: bool = False     # torch engine: record operator arguments (set by the default run for replay)
    python: str = field(default_factory=lambda: sys.executable)


@dataclass
class Pass:
    engine: str
    argv: list[str]
    log: Path
    torch_trace: Path | None = None
    returncode: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    interrupted: bool = False
    profiled_kernels: int = 0
    on_prof: Callable[[str], None] | None = None  # sees each ==PROF== line (the default run's stop rule)
    on_line: Callable[[str], None] | None = None  # sees every output line first (the default run's trace watch)
    stopped_early: bool = False                    # we interrupted the program on purpose (all kernels measured)
    mode: str = ""                                 # default run: "overlapped" | "after" ncu pass; "timeline"
    perm_lines: list[str] = field(default_factory=list)  # ncu's ERR_NVGPUCTRPERM lines, if any
    ranked: bool = False                           # run once per rank: outputs in rank<R>/ (distribute)
    tool: str | None = None                        # the profiler's executable when argv[0] is the launcher
    stem: str = ""                                 # ncu: the report's file name stem (default: the engine's)
    trace_written_s: float | None = None           # timeline: when its trace was complete (read from then on)

    @property
    def exe(self) -> str:
        """The profiler executable (ncu/nsys) of this pass, behind a distributed launcher or not."""
        return self.tool or self.argv[0]


@dataclass
class Result:
    run_dir: Path
    verdict: object | None
    exit_code: int
    engines: list[str]
    notes: list[str]
    interrupted: bool = False
    timed_out: bool = False


# --- the target: profile/target.py; per-rank runs: profile/distributed.py -----------------------------------------------------------------------------------
# --- planning -------------------------------------------------------------------------------------
KERNEL_OPS_FILE = "kernel_ops.json"  # the timeline launcher's early kernel list (nsighttc.kernel_ops)


def plan(opts: Options, target: Target, cc: str | None, run_dir: Path) -> tuple[list[Pass], list[str]]:
    """The pass of an explicit engine (``--engine ncu|nsys|torch``), as an argument list. Pure except for
    looking tools up. The default run (``auto``) is planned step by step by ``profile.default``."""
    notes: list[str] = []
    engine = opts.engine
    if engine == "auto":
        raise ValueError("the default run is planned by profile.default.run_default")
    if engine == "torch" and not target.python_program:
        raise UsageError("--engine torch runs Python programs only (SCRIPT.py or -- python -m MODULE)")

    def inner(torch_trace: Path | None = None) -> list[str]:
        if not target.python_program:
            return list(target.argv)
        return engines.launcher_argv(target.argv, module=target.module, annotate=opts.annotate,
                                     torch_trace=torch_trace, python=opts.python,
                                     record_shapes=opts.record_shapes and torch_trace is not None,
                                     kernel_ops=run_dir / KERNEL_OPS_FILE)

    if engine == "ncu":
        ncu = tools.find("ncu", opts.ncu)  # raises ToolNotFound naming where we looked
        p = Pass("ncu", engines.ncu_argv(ncu, run_dir / "ncu", inner(), cc, nvtx_range=opts.range,
                                         every_launch=opts.every_launch, all_kernels=opts.all_kernels),
                 run_dir / "ncu.log")
        if target.distributed:
            notes.append("distributed run: Nsight Compute profiles rank 0 (every rank runs the same kernels)")
        return [distribute(p, target, run_dir, len(inner()), only_ranks="0")], notes
    if engine == "nsys":
        nsys = tools.find("nsys", opts.nsys)
        p = Pass("nsys", engines.nsys_argv(nsys, run_dir / "nsys", inner(), opts.range), run_dir / "nsys.log")
        return [distribute(p, target, run_dir, len(inner()))], notes
    trace = run_dir / "torch_trace.json"
    p = Pass("torch", inner(trace), run_dir / "torch.log", torch_trace=trace)
    return [distribute(p, target, run_dir, len(p.argv))], notes


# --- the run directory ----------------------------------------------------------------------------
def safe_name(text: str) -> str:
    """``text`` as a file name: runs of anything but letters, digits, ``_ . -`` become one ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def new_run_dir(base: Path | None, label: str) -> Path:
    """A fresh directory: ``<base>/<YYYYmmdd-HHMMSS>-<label>``, suffixed -2, -3... never an existing one."""
    base = Path(base or "nsighttc-runs")
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the run directory's parent ({exc.strerror or exc}); choose another with --out",
                         base) from None
    stem = f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{safe_name(label)[:60]}"
    for i in range(1, 1000):
        d = base / (stem if i == 1 else f"{stem}-{i}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot create a run directory here ({exc.strerror or exc}); choose another with --out",
                             base) from None
    raise UsageError(f"{base}: could not create a new run directory")


# --- running --------------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    """The passes' environment. Even a command that is not a Python program may reach our launcher or
    ``rankexec`` (behind torchrun): both must import nsighttc from wherever this copy lives."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["NSIGHTTC_GATE_OWNER"] = str(os.getpid())  # a gated program leaves when this process is gone
    return env


def start_pass(p: Pass, *, say: Callable[[str], None]) -> process.Running:
    """Start a pass; its output lines are logged, shown (workload output) and watched (ncu progress)."""
    seen: set[str] = set()

    def on_line(line: str) -> None:
        if p.on_line is not None:
            p.on_line(line)
        m = _PROF_LINE.search(line)
        if m:
            p.profiled_kernels += 1
            seen.add(m.group(1))
            if p.on_prof is not None:
                p.on_prof(line)
            elif p.profiled_kernels % 10 == 1:
                say(f"[{p.engine}] profiled {p.profiled_kernels} kernels ({len(seen)} distinct), last: {m.group(1)[:70]}")
        elif PERM_ERROR in line:
            p.perm_lines.append(line)
        elif not line.startswith("==PROF=="):
            say(f"  | {line}")

    say(f"[{p.engine}] running: {shlex.join(p.argv)}")
    return process.start(p.argv, stdout_path=p.log, stderr_path=p.log.with_suffix(".stderr.log"),
                         env=_env(), on_line=on_line)


def finish_pass(p: Pass, running: process.Running, timeout: float | None) -> Pass:
    r = running.wait(timeout)
    p.returncode, p.seconds, p.timed_out, p.interrupted = r.returncode, r.seconds, r.timed_out, r.interrupted
    if p.perm_lines:
        raise CounterPermission(PERM_FIX)
    return p


def run_pass(p: Pass, *, timeout: float | None, say: Callable[[str], None]) -> Pass:
    return finish_pass(p, start_pass(p, say=say), timeout)


def _export(p: Pass, run_dir: Path, notes: list[str]) -> list[Path]:
    """Turn a pass's artifacts into files `analyze` reads; keep everything that exists. A pass run once
    per rank exports each rank's directory."""
    if not p.ranked:
        return _export_dir(p, run_dir, notes)
    dirs = rank_dirs(run_dir)
    if not dirs:
        notes.append(f"{p.engine}: no rank wrote a recording (no rank<N>/ directory in {run_dir})")
    out: list[Path] = []
    for d in dirs:
        rank_notes: list[str] = []
        out += _export_dir(p, d, rank_notes, trace=d / p.torch_trace.name if p.torch_trace else None)
        notes += [f"{d.name}: {n}" for n in rank_notes]
    return out


def _export_dir(p: Pass, run_dir: Path, notes: list[str], trace: Path | None = None) -> list[Path]:
    out: list[Path] = []
    trace = trace or p.torch_trace
    if p.engine == "ncu":
        stem = p.stem or "ncu"
        rep = run_dir / f"{stem}.ncu-rep"
        if rep.exists():
            from ..parse.ncu_rep import _import_ncu_report
            if _import_ncu_report() is not None:  # read in-process: no second ncu start-up to export
                out.append(rep)
            else:
                out.append(export_raw_csv(Path(p.exe), rep, run_dir / f"{stem}_raw.csv"))
        else:
            notes.append("ncu wrote no report (the workload launched no kernels, or was stopped before any was profiled)")
    if p.engine == "nsys":
        rep = run_dir / "nsys.nsys-rep"
        if rep.exists():
            out.append(export_sqlite(Path(p.exe), rep, run_dir / "nsys.sqlite"))
        elif list(run_dir.glob("nsys*.qdstrm")):
            raise CollectError("nsys recorded a .qdstrm stream but could not turn it into a .nsys-rep report: its "
                               "importer (QdstrmImporter) failed, on Linux usually because libdw.so.1 is missing "
                               "(install libdw1 / elfutils, or put it on LD_LIBRARY_PATH); `nsighttc doctor` checks it")
        else:
            notes.append("nsys wrote no report")
    if trace is not None:
        if trace.exists() and trace.stat().st_size > 0:
            out.append(trace)
        else:
            notes.append(f"no torch.profiler trace was written ({trace.name})")
    return out


def _run_queue(passes: list[Pass], opts: Options, target: Target, run_dir: Path, gpus: list, notes: list[str],
               say: Callable[[str], None], remaining: Callable[[], float | None]):
    """The explicit engines (``--engine ncu|nsys|torch``): their passes one after the other."""
    inputs: list[Path] = []
    done: list[Pass] = []
    failures: list[str] = []
    for p in passes:
        try:
            run_pass(p, timeout=remaining(), say=say)
        except CounterPermission as exc:
            _write_meta(run_dir, target, opts, done + [p], gpus, notes + [str(exc)])
            raise
        done.append(p)
        try:
            inputs += _export(p, run_dir, notes)
        except NsighttcError as exc:
            failures.append(str(exc))
            if not opts.keep_going:
                _write_meta(run_dir, target, opts, done, gpus, notes + failures)
                raise
        if p.interrupted or p.timed_out:
            break
    return done, inputs, failures


def profile(target: Target, opts: Options, say: Callable[[str], None] = lambda s: None) -> Result:
    t0 = time.monotonic()
    gpus = gpu.list_gpus()
    if not gpus:
        raise NoGPU("no NVIDIA GPU found here (nvidia-smi is missing or lists none), so nothing can be profiled. "
                    "What still works: `nsighttc analyze` on ncu/nsys/torch.profiler outputs recorded on a GPU "
                    "machine, and `nsighttc demo`")
    cc = gpus[0].compute_capability
    if opts.engine != "auto" and (opts.fast or opts.hardware or opts.counters != "fast"):
        raise UsageError("--fast, --hardware and --counters choose what the default run measures; they do not combine "
                         "with --engine (--engine ncu always collects the full FLOP counters)")
    if opts.fast and opts.counters != "fast":
        raise UsageError("--fast runs no Nsight Compute pass, so --counters has nothing to choose")
    if opts.fast and opts.hardware:
        raise UsageError("--fast (no Nsight Compute pass) and --hardware (always one) contradict each other")
    run_dir = rank_run_dir(opts.out) if launched_per_rank(target) else new_run_dir(opts.out, target.label)
    # tool versions for the provenance, looked up while the workload runs (an ncu start costs ~0.5 s)
    import threading
    for tool, given in (("ncu", opts.ncu), ("nsys", opts.nsys)):
        exe = tools.find_or_none(tool, given)
        if exe is not None:
            threading.Thread(target=gpu.tool_version, args=(str(exe),), daemon=True).start()
    say(f"nsighttc: run directory {run_dir}")
    started = time.monotonic()
    phases = {"gpu_query": round(started - t0, 3)}  # where the default run's time goes (run.json)

    def remaining() -> float | None:
        return None if opts.timeout is None else max(1.0, opts.timeout - (time.monotonic() - started))

    outcome = None
    if opts.engine == "auto":
        from .default import run_default
        outcome = run_default(target, opts, gpus, run_dir, cc, say, remaining)
        done, inputs, notes, failures = outcome.done, outcome.inputs, outcome.notes, outcome.failures
    else:
        passes, notes = plan(opts, target, cc, run_dir)
        done, inputs, failures = _run_queue(passes, opts, target, run_dir, gpus, notes, say, remaining)
    workload_rc = next((p.returncode for p in done if p.returncode not in (None, 0) and not p.stopped_early), 0)
    killed = [p for p in done if p.returncode is not None and p.returncode < 0 and not p.stopped_early]
    if killed:  # the tool (or the program under it) died of a signal we did not send
        notes += [f"{p.engine} died of signal {-p.returncode} ({_signal_name(-p.returncode)}); see {p.log.name}"
                  for p in killed]
        workload_rc = CollectError.exit_code
    interrupted = any(p.interrupted for p in done)
    timed_out = any(p.timed_out for p in done)
    if interrupted:
        notes.append("interrupted (Ctrl-C): the workload's process group was stopped; the report covers what was recorded")
    if timed_out:
        notes.append(f"--timeout {opts.timeout:g}s reached: the workload's process group was stopped; the report "
                     "covers what was recorded")
    if workload_rc:
        notes.append(f"the workload exited with code {workload_rc}")
    notes += failures
    phases["passes"] = round(time.monotonic() - started, 3)
    try:
        verdict = _conclude(run_dir, target, opts, done, gpus, notes, inputs, outcome, phases)
        if verdict is None and not (interrupted or timed_out):
            notes.append(f"no verdict could be made; what was recorded is kept in {run_dir}: {_kept(run_dir)}")
            if inputs and not workload_rc:  # recordings exist but cannot be read: the profiler run failed
                workload_rc = CollectError.exit_code
        _write_meta(run_dir, target, opts, done, gpus, notes, outcome.info if outcome else None, phases)
    except OSError as exc:  # a full disk, a directory made read-only under us: say so, keep what exists
        raise CollectError(f"cannot write the run directory ({exc.strerror or exc}{': ' + exc.filename if exc.filename else ''}); "
                           f"what was recorded is kept: {_kept(run_dir)}", run_dir) from None
    code = 130 if interrupted else 124 if timed_out else workload_rc
    return Result(run_dir, verdict, code, [p.engine for p in done], notes, interrupted, timed_out)


def _conclude(run_dir: Path, target: Target, opts: Options, done: list, gpus: list, notes: list[str],
              inputs: list, outcome, phases: dict | None = None) -> object | None:
    """Analyse what was recorded and write verdict.json, report.md and the plots."""
    verdict = None
    phases = {} if phases is None else phases
    t = time.monotonic()
    if inputs:
        from ..api import analyze
        from ..render import markdown
        try:
            ready = outcome.parsed if outcome else {}
            verdict = analyze([ready.get(p, p) for p in inputs], evidence=outcome.evidence if outcome else None,
                              ahead=outcome.ahead if outcome else None)
        except NsighttcError as exc:
            notes.append(f"analysis failed: {exc}")
        if verdict is not None:
            sampled = any(p.engine == "ncu" for p in done) and not any(p.engine in ("nsys", "torch") for p in done)
            if sampled and not (opts.every_launch and opts.all_kernels):
                verdict.tensor_cores["basis"] = "sampled"
                verdict.tensor_cores["sampling"] = (
                    ("every launch" if opts.every_launch else "one launch of each launch configuration")
                    + ("" if opts.all_kernels else "; elementwise/pooling/copy kernels judged by name, not profiled"))
            if outcome is not None:
                from .default import remember
                remember(outcome, verdict, target)
            verdict.tensor_cores["evidence_sources"] = evidence_sources(verdict.launches)
            verdict.provenance = _provenance(run_dir, target, opts, done, gpus, notes,
                                             outcome.info if outcome else None)
            verdict.warnings = list(verdict.warnings) + notes
            doc = verdict.to_json()
            (run_dir / "verdict.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
            phases["analysis"] = round(time.monotonic() - t, 3)
            t = time.monotonic()
            from ..render.plots import write_plots
            made = write_plots(doc, run_dir)
            (run_dir / "report.md").write_text(markdown.render(doc, plots=made))
            phases["report"] = round(time.monotonic() - t, 3)
    return verdict


def _kept(run_dir: Path) -> str:
    try:
        files = sorted(p for p in run_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError:
        return "nothing readable"
    return ", ".join(f"{p.name} ({p.stat().st_size:,} B)" for p in files) or "nothing"


def _signal_name(n: int) -> str:
    import signal as _signal
    try:
        return _signal.Signals(n).name
    except ValueError:
        return "unknown signal"


def evidence_sources(launches) -> dict:
    """Where the Tensor Core answer of the kernels that decide it (matrix work, or on Tensor Cores) came
    from, as shares of their GPU time: ncu in this run, ncu from the evidence cache, or names only."""
    from ..analysis.merge import CACHE_DETAIL

    if launches is None or launches.empty:
        return {}
    deciding = launches[(launches["matrix_work"].astype(bool) | (launches["tensor_core"] == True)).to_numpy()]  # noqa: E712
    total = float(deciding["duration_ns"].sum()) if not deciding.empty else 0.0
    if not total:
        return {}
    hw = (deciding["evidence"] == "hardware").to_numpy()
    cached = deciding["evidence_detail"].astype(str).str.startswith(CACHE_DETAIL).to_numpy()
    t = deciding["duration_ns"].to_numpy(dtype=float)
    return {"ncu_this_run": float(t[hw & ~cached].sum() / total), "ncu_cache": float(t[hw & cached].sum() / total),
            "kernel_names": float(t[~hw].sum() / total)}


def _provenance(run_dir: Path, target: Target, opts: Options, done: list[Pass], gpus: list, notes: list[str],
                evidence: dict | None = None) -> dict:
    versions = {"nsighttc": __version__, "python": sys.version.split()[0]}
    for p in done:
        if p.engine in ("ncu", "nsys"):
            versions[p.engine] = gpu.tool_version(p.exe)
    return {
        "gpu": [g.__dict__ for g in gpus], "engines": [p.engine for p in done],
        "commands": [shlex.join(p.argv) for p in done],
        "seconds": {p.engine: round(p.seconds, 3) for p in done},
        "profiled_kernels": {p.engine: p.profiled_kernels for p in done if p.engine == "ncu"},
        "versions": versions, "run_dir": str(run_dir), "target": target.argv, "options": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in opts.__dict__.items()},
        "notes": notes,
        **({"evidence": evidence} if evidence else {}),
        "passes": [{"engine": p.engine, "mode": p.mode or None, "seconds": round(p.seconds, 3),
                    "stopped_early": p.stopped_early,
                    **({"trace_written_s": p.trace_written_s} if p.trace_written_s is not None else {})}
                   for p in done],
    }


def _write_meta(run_dir: Path, target: Target, opts: Options, done: list[Pass], gpus: list, notes: list[str],
                evidence: dict | None = None, phases: dict | None = None) -> None:
    meta = _provenance(run_dir, target, opts, done, gpus, notes, evidence)
    meta["exit_codes"] = {p.engine: p.returncode for p in done}
    if phases:
        meta["phase_seconds"] = phases
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
