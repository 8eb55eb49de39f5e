"""The commands that run programs: ``profile``, ``try``, and ``doctor`` (what can run here)."""
from __future__ import annotations

from pathlib import Path

import click

from ..durations import duration
from ..errors import UsageError
from .common import DETAIL, FORMAT, FORMAT_HELP, STEPS_OR_AUTO, Finite, _LEVEL, _show, note, verbosity


@click.command(short_help="Profile a program: Tensor Cores, and GPU- or host-bound.",
               options_metavar="[OPTIONS]",
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@verbosity
@click.option("--engine", type=click.Choice(["auto", "ncu", "nsys", "torch"]), default="auto", show_default=True,
              help="auto: the timeline (torch.profiler, else nsys) plus an Nsight Compute pass for just the kernels "
                   "that lack hardware evidence (none when the evidence cache has them). ncu / nsys / torch: that "
                   "one tool alone.")
@click.option("--fast", is_flag=True, help="auto: the timeline only; Tensor Cores judged by kernel names (and the cache).")
@click.option("--hardware", is_flag=True,
              help="auto: measure every kernel that needs hardware evidence with ncu, even those in the cache.")
@click.option("--counters", type=click.Choice(["fast", "full"]), default="fast", show_default=True,
              help="auto: what the ncu pass measures per kernel. fast: tensor-pipe instruction counts, one replay "
                   "pass (Tensor Cores yes/no measured; int8/fp64 measured, other dtypes from kernel names). full: "
                   "FLOP counters per dtype as well (exact dtype and TFLOP/s; 7 passes on Hopper, ~3x the ncu time).")
@click.option("--replay/--no-replay", default=True, show_default=True,
              help="auto, PyTorch programs: measure the kernels by calling again, under ncu, the operators that "
                   "launched them (the timeline records their shapes, dtypes and arguments), instead of running the "
                   "program again up to its last new kernel. Kernels the replay does not launch are measured on the "
                   "program itself. Not with --overlap none (the replay process starts beside the timeline run).")
@click.option("--no-cache", "no_cache", is_flag=True,
              help="auto: do not read or write the evidence cache (~/.cache/nsighttc/evidence, $NSIGHTTC_CACHE_DIR).")
@click.option("--overlap", type=click.Choice(["cuda", "context", "start", "none"]), default="cuda",
              show_default=True,
              help="auto: the ncu pass starts beside the timeline run and waits at the program's first CUDA use "
                   "(cuda: its CPU start-up runs at the same time as the timeline run's), just after PyTorch created "
                   "its CUDA context (context: ~1 s less after the timeline), before its first line (start), or "
                   "starts after the timeline (none: no process beside the timeline run, ~10 s more). "
                   "Use start or none for programs that write shared files (downloads, output folders) before "
                   "they touch the GPU.")
@click.option("--timeline-engine", type=click.Choice(["auto", "torch", "nsys"]), default="auto", show_default=True,
              help="auto: torch.profiler for Python programs with torch (cheapest), else nsys; a torchrun job with "
                   "--no-step-marks uses nsys (torch.profiler would record every operator on every rank).")
@click.option("--step-marks/--no-step-marks", default=True, show_default=True,
              help="Python programs: find the steps of a program that marks none, from hooks the launcher installs "
                   "when it imports torch (optimizer steps, DataLoader fetches, the main model's calls, backward, "
                   "torch.compile's compilations). The program's own step ranges win when it has some.")
@click.option("--host-samples/--no-host-samples", default=True, show_default=True,
              help="Python programs under torch.profiler or nsys: sample the program's Python stacks from a thread "
                   "inside it (every 5 ms or more: its CPU time kept under 1%), so the report names the function and line the "
                   "GPU waited for (\"Where the host time went\"; the idle stacks in host_idle_stacks.collapsed "
                   "for speedscope).")
@click.option("--sample-ms", type=Finite(min=0.5, max=1000), default=None, metavar="MS",
              help="Least milliseconds between host stack samples (default 5; more where a sample costs more).")
@click.option("--warmup", type=STEPS_OR_AUTO, default="auto", show_default=True, metavar="N|auto",
              help="Default run: steps before the recorded window (auto: until the step time settles and nothing "
                   "compiles).")
@click.option("--steps", "window_steps", type=STEPS_OR_AUTO, default="auto", show_default=True, metavar="N|auto",
              help="Default run: steady steps recorded in the window (auto: about 2 s of steps, 10 to 100).")
@click.option("--full-run", is_flag=True,
              help="Default run: let the program finish after the window (recorded: start-up, warm-up and the "
                   "window only). Without it, the program is stopped once the window is recorded.")
@DETAIL
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N",
              help="A torchrun job's ranks analysed at once, in processes started while the job runs (default: one "
                   "per GPU, at most half the cores; 1: here, one after the other).")
@click.option("--whole-program", is_flag=True,
              help="Default run: record the whole program, every step, as before windows (slower; for programs "
                   "whose interesting part is not a steady loop).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("nsighttc-runs"),
              show_default=True, help="Parent of the run directory; each run gets a new <time>-<script> folder.")
@click.option("--range", "range_", metavar="NAME", help="Profile only inside NVTX range NAME (ncu, nsys).")
@click.option("--annotate", type=click.Choice(["none", "script", "modules"]), default="script", show_default=True,
              help="script: one range around the program; modules: also one per nn.Module call (no code edits).")
@click.option("--ncu", "ncu_path", metavar="PATH", help="ncu executable (default: PATH, /usr/local/cuda/bin, /opt/nvidia).")
@click.option("--nsys", "nsys_path", metavar="PATH", help="nsys executable (default: PATH, /opt/nvidia/nsight-*).")
@click.option("--timeout", type=Finite(min=1), metavar="SECONDS",
              help="Stop the workload (its whole process group) after this long and report what was recorded.")
@click.option("--keep-going", is_flag=True, help="If an engine fails, go on with the others instead of stopping.")
@click.option("--every-launch", is_flag=True, help="ncu: profile every launch, not each launch configuration once (slow).")
@click.option("--all-kernels", is_flag=True,
              help="ncu: also profile elementwise/pooling/copy kernels (their 'no' is otherwise taken from names).")
@click.option("--timeline", is_flag=True, hidden=True, help="Accepted for old command lines: the default run has the timeline.")
@click.option("--format", "fmt", type=FORMAT, default=None, help="What to print at the end. " + FORMAT_HELP)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="PROGRAM [ARGS]... | -- COMMAND [ARGS]...")
def profile(engine, fast, hardware, counters, replay, no_cache, overlap, timeline_engine, step_marks, host_samples,
            sample_ms, warmup,
            window_steps, full_run, detail, jobs, whole_program, out, range_, annotate,
            ncu_path, nsys_path, timeout, keep_going, every_launch, all_kernels, timeline, fmt, args) -> None:
    """Profile a program and write its verdict: did the Tensor Cores fire, and is it GPU- or host-bound?

    \b
      nsighttc profile train.py --epochs 1
      nsighttc profile --fast wrappers/vgg16.py --dtype fp16
      nsighttc profile -- python -m mypkg.train --epochs 1

    \b
    The default run answers both questions:
      1. the program runs under torch.profiler (or nsys) through its start-up, its warm-up and a
         window of steady steps (every kernel, range, step, host call there), then it is stopped
         (--full-run: it runs on unrecorded; --whole-program: everything is recorded);
      2. Nsight Compute measures only the kernels that still lack hardware Tensor Core evidence
         (matrix work, or unsettled by the name), once each: PyTorch programs by calling again the
         operators that launched them (--no-replay: no), the rest on the program, stopped once they
         were profiled. It starts beside step 1 so its start-up is hidden, and the evidence is cached
         per GPU and driver: a second run of the same program usually needs no ncu pass at all.

    Writes nsighttc-runs/<time>-<name>/ with the raw recordings, verdict.json, report.md, the exact
    commands, tool versions, GPU, and the workload's logs. Exits with the workload's exit code.
    """
    from ..profile import Options, profile as run_profile, resolve_target

    args = list(args)
    if not args:
        raise UsageError("nothing to profile: give SCRIPT.py [ARGS] or -- COMMAND [ARGS]")
    if args[0].endswith(".py"):
        target = resolve_target(args[0], args[1:], None)
    else:
        target = resolve_target(None, [], args)
    opts = Options(engine=engine, out=out, range=range_, annotate=annotate, ncu=ncu_path, nsys=nsys_path,
                   timeout=timeout, keep_going=keep_going, every_launch=every_launch, all_kernels=all_kernels,
                   timeline=timeline, fast=fast, hardware=hardware, cache=not no_cache, timeline_engine=timeline_engine,
                   overlap=overlap, counters=counters, replay=replay, step_marks=step_marks,
                   host_samples=host_samples, sample_ms=sample_ms, window=not whole_program, warmup=warmup, steps=window_steps, full_run=full_run, detail=detail,
                   jobs=jobs)
    if whole_program and (full_run or warmup is not None or window_steps is not None):
        raise UsageError("--whole-program records every step: --full-run, --warmup and --steps choose a window")
    from ..render.progress import Progress
    say = Progress(_LEVEL["value"], echo=lambda s: click.echo(s, err=True))  # suits a terminal or a log
    if timeline and engine == "auto":
        note("nsighttc: note: --timeline is no longer needed: the default run has the timeline")
    try:
        result = run_profile(target, opts, say=say)
    finally:
        say.close()
    for n in result.notes:
        note(f"nsighttc: note: {n}")
    report_path = str(result.run_dir / "report.md") if result.verdict is not None else None
    if result.verdict is not None:
        doc = result.verdict.to_json()
        if not _show(doc, fmt, None, [], report=report_path):  # the terminal summary already has them
            from ..render.markdown import headline_lines
            for line in headline_lines(doc):
                note(f"nsighttc: {line}")
    note(f"nsighttc: engines run: {', '.join(result.engines) or 'none'}; report: {report_path or result.run_dir}")
    if result.exit_code:
        raise click.exceptions.Exit(result.exit_code)


# ``try``'s exit code when its comparison has nothing to compare: the baseline failed, or every variant asked for did
# (docs/bad-input.md)
TRY_FAILED = 7


def _variants_epilog() -> str:
    """Every variant ``try`` knows, from the launcher's own table (``runtime.variants.VARIANTS``): it cannot drift."""
    import textwrap
    from ..runtime.variants import VARIANTS
    lines = ["\b", "Variants (--variant NAME; A+B applies both in one run):"]
    for name, what in VARIANTS.items():
        if name != "baseline":
            lines += textwrap.wrap(what, 96, initial_indent=f"  {name:<24} ", subsequent_indent=" " * 27)
    return "\n".join(lines)


def _variant_names() -> str:
    from ..runtime.variants import VARIANTS
    return ", ".join(n for n in VARIANTS if n != "baseline")


def rounds_options(f):
    """``--repeat`` and ``--budget``: how many rounds ``try`` and ``fix`` run (``experiment.rounds``)."""
    f = click.option("--budget", type=Finite(min=1), default=None, metavar="SECONDS",
                     help="Time the plain runs' rounds may take, all together (default 600); a round that would pass "
                          "it is not started, and what is still unclear is said so.")(f)
    return click.option("--repeat", type=click.IntRange(min=1), default=None, metavar="N",
                        help="Exactly N rounds of plain runs, baseline and variants alternating (default: rounds until "
                             "each speed-up's 90% interval excludes 1.00x or lies within 5% of it, at least 2, at most "
                             "6, within --budget).")(f)


@click.command("try", short_help="Run the advice as variants of the program and compare.", epilog=_variants_epilog(),
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@verbosity
@click.option("--variant", "variants", multiple=True, metavar="NAME",
              help=f"Run the program under this variant too (repeatable): {_variant_names()} (each below); A+B "
                   "applies both in one run; auto (the default): those the baseline's findings point to.")
@click.option("--metric", metavar="REGEX",
              help="The program's own metric: the last match in its output, first group (e.g. '([\\d.]+) images/s').")
@click.option("--step-range", metavar="NAME",
              help="Range that marks one step (default: ProfilerStep#N, or ranges named like 'step').")
@click.option("--fail-if-slower", is_flag=True, help="Exit 1 when a variant that ran is slower than the baseline.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="N for workers=N when --variant auto chooses it (default: min(8, cores)).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("nsighttc-runs"),
              show_default=True, help="Parent of the run directory (<time>-try-<script>).")
@click.option("--timeout", type=Finite(min=1), metavar="SECONDS", help="Stop each run after this long.")
@click.option("--annotate", type=click.Choice(["none", "script", "modules"]), default="script", show_default=True)
@click.option("--no-cache", "no_cache", is_flag=True, help="Do not read Tensor Core evidence from the cache.")
@rounds_options
@click.option("--explain", is_flag=True,
              help="Also profile every variant once (torch.profiler): its Tensor Core share, dtypes and timeline "
                   "verdict explain its speed-up (never used to measure it).")
@click.option("--fix", "fix_", is_flag=True,
              help="Also each variant's edit of the program's source (a unified diff), run as a patched copy beside "
                   "the variant (nsighttc fix: the same, and --apply).")
@click.option("--full-run", is_flag=True,
              help="Let every plain run finish (default: stop once a window of steady steps is timed; --metric "
                   "implies this).")
@click.option("--verdict", "verdict_file", type=click.Path(dir_okay=True, path_type=Path), metavar="FILE",
              help="Predictions and auto's choices from this verdict.json (or run directory) of an earlier "
                   "`nsighttc profile`, instead of profiling the baseline here.")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default=None,
              help="Print the comparison (default: a summary; the files are always written).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="PROGRAM [ARGS]... | -- COMMAND [ARGS]...")
def try_(variants, metric, step_range, fail_if_slower, workers, out, timeout, annotate, no_cache, repeat, budget,
         explain, fix_, full_run, verdict_file, fmt, args) -> None:
    """Run a program as it is and under variants, and compare what each bought.

    \b
      nsighttc try --variant tf32 --variant bf16-autocast wrappers/mnist_mlp.py --net large
      nsighttc try --metric '([\\d.]+) it/s' --variant workers=8+pin-memory wrappers/dataloader_bound.py
      nsighttc try train.py --epochs 1                 # --variant auto: what the baseline's findings suggest

    \b
    nsighttc's options come before the program; everything after SCRIPT.py goes to the program.

    \b
    Each variant is applied from the launcher, without editing the program: TF32 flags, the whole program
    inside torch.autocast, cuDNN autotuning, DataLoader defaults (only loaders left at num_workers=0 /
    pin_memory=False), the main model's forward through torch.compile (compile, compile-reduce-overhead:
    CUDA graphs), the main model's evaluation calls captured and replayed as CUDA graphs without the compiler
    (cuda-graphs: autograd off, static shapes; the rest runs as written and the table says how much), the main
    model in the channels-last memory format (channels-last), transformers' generate() with a static KV cache
    (static-cache), transformers tokenizers' padding to a multiple of 64 tokens (pad-buckets). Steps still
    getting faster at a run's end give no number: "never settled".

    
    Speed is measured without a profiler: each run is plain, its steps timed at their boundaries (CUDA
    events), and stops once a window of steady steps is timed (--full-run or --metric: runs to the end).
    Rounds (baseline, then each variant) repeat until each answer is clear: a round's speed-up is the
    baseline's mean steady step over the variant's; the speed-up is the rounds' geometric mean with its 90%
    interval (at least 2 rounds, at most 6, within --budget; --repeat N: exactly N). An interval that holds
    1.00x is "no measurable change".
    The baseline is also profiled once: its findings' estimated gains are the predictions shown beside
    each measured speed-up, and what --variant auto runs (the top findings' variants). After the first
    round, what holds the fastest variant's steps (data loading, timed in its plain runs; else its own
    profiled run's verdict) is said, and auto adds the fastest variant combined with the fix for it. Writes try.json (schema nsighttc.try/1), try.md and try.png, and one directory per variant,
    in nsighttc-runs/<time>-try-<name>/. A variant that crashes is reported as failed; the others still run.
    """
    from ..experiment import TryOptions, run_try
    from ..profile import resolve_target

    args = list(args)
    if not args:
        raise UsageError("nothing to try: give SCRIPT.py [ARGS] or -- python -m MODULE [ARGS]")
    target = resolve_target(args[0], args[1:], None) if args[0].endswith(".py") else resolve_target(None, [], args)
    opts = TryOptions(variants=list(variants), metric=metric, step_range=step_range, out=out, timeout=timeout,
                      annotate=annotate, cache=not no_cache, workers=workers, repeat=repeat, budget=budget,
                      explain=explain, full_run=full_run, verdict=verdict_file, fix=fix_)
    report_try(with_progress(run_try, target, opts), fmt, fail_if_slower)


def with_progress(run, target, opts):
    """``run(target, opts, say=...)`` (``experiment.run_try``) with its progress lines on stderr (``try``, ``fix``)."""
    from ..render.progress import Progress
    say = Progress(_LEVEL["value"], echo=lambda s: click.echo(s, err=True))
    try:
        return run(target, opts, say=say)
    finally:
        say.close()


def report_try(result, fmt: str | None, fail_if_slower: bool = False) -> None:
    """What ``try`` (and ``fix``) print once the comparison is written, and their exit code."""
    doc = result.doc
    if fmt == "json":
        from ..render import json_out
        click.echo(json_out.dumps(doc, indent=2))
    elif fmt == "markdown":
        click.echo((result.run_dir / "try.md").read_text())
    else:
        base = doc["variants"][0]
        for v in doc["variants"]:
            sp = f"{v['speedup']:.2f}x" if v.get("speedup") else "—"
            step = duration(v['step_ns']) if v.get("step_ns") else "no steps"
            extra = f", metric {v['metric']:g}" if v.get("metric") is not None else ""
            if v["name"] != "baseline" and v.get("change"):
                extra += f" ({v['change']})"
            if v.get("predicted"):
                extra += f", predicted {v['predicted']['low']:.2f}-{v['predicted']['high']:.2f}x"
            inf = v.get("inference") or {}
            if inf.get("tokens_per_s"):
                extra += f"; {inf['tokens_per_s']:,.0f} tokens/s"
            if inf.get("ttft_ns") and inf.get("tpot_ns"):
                extra += f", TTFT {duration(inf['ttft_ns'])}, TPOT {duration(inf['tpot_ns'])}"
            if (v.get("compile") or {}).get("compile_s"):
                extra += f"; compiled {v['compile']['compile_s']:.1f} s before its timed steps"
            if v["status"] == "ok":
                what = f"{step}, {sp}{extra}"
            elif v["status"] == "not applied":
                what = f"not applied: {v.get('not_applied')}"
            else:
                what = f"FAILED: {v.get('error')}"
            click.echo(f"{v['name']:<16} {what}")
        if base["status"] != "ok":
            note(f"nsighttc try: the baseline failed: {base.get('error')}", level=0)
    for n in doc.get("notes", []):
        note(f"nsighttc: note: {n}")
    note(f"nsighttc: comparison: {result.run_dir / 'try.md'}")
    variants_run = doc["variants"][1:]
    if base["status"] != "ok":
        raise click.exceptions.Exit(TRY_FAILED)
    if variants_run and all(v["status"] == "failed" for v in variants_run):
        note("nsighttc try: every variant failed: " + "; ".join(f"{v['name']}: {v.get('error')}" for v in variants_run),
             level=0)
        raise click.exceptions.Exit(TRY_FAILED)
    slower = [v["name"] for v in doc["variants"] if v["status"] == "ok" and v.get("speedup") and v["speedup"] < 1.0
              and v.get("change") == "slower"]
    if fail_if_slower and slower:
        note(f"nsighttc try: slower than the baseline: {', '.join(slower)}", level=0)
        raise click.exceptions.Exit(1)


@click.command(short_help="What this machine can profile, and what to fix.")
@verbosity
@click.option("--probe/--no-probe", default=True, show_default=True,
              help="Run tiny ncu and nsys probes (a few seconds each, side by side) to check counters and nsys import.")
@click.option("--refresh", is_flag=True,
              help="Ignore the cached result (~/.cache/nsighttc/doctor.json, $NSIGHTTC_CACHE_DIR) and probe again.")
def doctor(probe: bool, refresh: bool) -> None:
    """Check what this machine can profile: GPUs, driver, CUDA/torch, ncu and nsys, counters, nsys import.

    The slow checks run in parallel and their result is cached until the GPUs, driver, Python or the
    ncu/nsys binaries change (or --refresh); a setup with a broken check is never cached."""
    from ..collect.doctor import conclusion, run_checks

    checks = run_checks(probe=probe, refresh=refresh)
    width = max(len(c.name) for c in checks)
    for c in checks:
        click.echo(f"{c.status:8} {c.name:<{width}}  {c.detail}" + (f"\n{'':8} {'':<{width}}  -> {c.fix}" if c.fix else ""))
    click.echo(f"\nnsighttc doctor: {conclusion(checks)}")
    if any(c.status == "broken" for c in checks):
        raise click.exceptions.Exit(1)
