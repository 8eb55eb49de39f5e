"""The commands that read recordings and verdicts: ``analyze``, ``report``, ``diff``, ``demo``."""
from __future__ import annotations

import time
from pathlib import Path

import click

from ..errors import UsageError
from .common import DETAIL, FORMAT, FORMAT_HELP, Finite, _LEVEL, _markdown, _saved_verdict, _show, _write, note, verbosity


@click.command(short_help="A verdict from ncu, nsys or torch.profiler outputs.")
@verbosity
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=FORMAT, default=None, help=FORMAT_HELP)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
@click.option("--yes-threshold", type=Finite(0, 1), default=0.9, show_default=True,
              help="Share of matrix-work time that must be on Tensor Cores for a YES (else PARTIAL).")
@click.option("--step-range", metavar="NAME",
              help="Range that marks one step (default: ProfilerStep#N, or ranges named like 'step').")
@click.option("--cpu-bound", type=Finite(0, 1), default=0.5, show_default=True,
              help="GPU busy share below which a range or step is CPU-bound.")
@click.option("--gpu-bound", type=Finite(0, 1), default=0.75, show_default=True,
              help="GPU busy share from which a range or step is GPU-bound (between: mixed).")
@click.option("--min-wall-ms", type=Finite(0), default=2.0, show_default=True,
              help="Ranges shorter than this in total get 'insufficient-data'.")
@click.option("--min-kernels", type=click.IntRange(0), default=10, show_default=True,
              help="Ranges that launch fewer kernels get 'insufficient-data'.")
@click.option("--range", "range_", metavar="NAME",
              help="Judge only kernels launched inside NVTX range NAME (a path like 'train/step' or a name).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N",
              help="Ranks analysed at once, one process each (default: one per core when the ranks' files hold "
                   "more than ~48 MB, else one after the other in this process, which is faster for small ones). "
                   "Memory grows with N, not with the number of ranks. With --executor dask: the LocalCluster's "
                   "workers.")
@click.option("--executor", metavar="processes|local|dask|dask://HOST:PORT", default=None,
              help="Where the ranks' analyses run. processes (default): this machine's processes (--jobs); local: "
                   "here, one after the other; dask: a Dask LocalCluster sized to this machine; dask://HOST:PORT: "
                   "an existing Dask cluster (Slurm via dask-jobqueue, Kubernetes via dask-kubernetes), one task per "
                   "rank: its workers read the files where they lie (a shared filesystem path, or an fsspec URL "
                   "such as s3://bucket/job/) and send back the rank's summary; the job's verdict is made here. "
                   "Needs pip install 'nsighttc[dask]'. See docs/distributed.md.")
@click.option("--same-job-check/--no-same-job-check", default=True, show_default=True,
              help="Refuse recordings that cannot be ranks of one job (other world sizes, GPUs or process-group "
                   "backends, or recorded more than a day apart). --no-same-job-check: one verdict per job, never a "
                   "claim across them (JSON: a list of verdicts).")
@click.option("--rank-timeout", type=Finite(min=1), default=None, metavar="SECONDS",
              help="A rank not analysed after this long (processes, dask) is given up and named in the verdict as "
                   "incomplete [default: 1800].")
@DETAIL
def analyze(inputs: tuple[str, ...], fmt: str, output: str | None, yes_threshold: float, step_range: str | None,
            cpu_bound: float, gpu_bound: float, min_wall_ms: float, min_kernels: int, range_: str | None,
            jobs: int | None, executor: str | None, same_job_check: bool, rank_timeout: float | None,
            detail: str) -> None:
    """Analyse profiler outputs and print the verdict.

    INPUTS: Nsight Compute CSV exports (`ncu -i R.ncu-rep --csv --page raw --print-units base`, or
    --page details), .ncu-rep reports, Nsight Systems SQLite exports / .nsys-rep, and torch.profiler traces
    (.json), or directories holding them; a CSV, SQLite or JSON file may be gzip- or xz-compressed. Files of
    one run can be combined: a timeline plus an ncu export makes the timeline's Tensor Core shares hardware-true.

    \b
    Distributed jobs: give every rank's files (or the job's directory, e.g. runs/job/ with rank0/,
    rank1/, ...). Ranks are told apart by torch.profiler's distributedInfo, else by rank<N> in the
    file or directory name; one nsys export of a whole job (`nsys profile torchrun ...`) is split into
    one rank per process. Each rank is judged on its own and the verdict adds a rank table, the
    straggler and the communication not overlapped by compute.
    """
    from ..analysis.timeline import Thresholds
    from ..api import analyze as run_analysis

    if cpu_bound > gpu_bound:
        raise UsageError(f"--cpu-bound ({cpu_bound}) must not exceed --gpu-bound ({gpu_bound})")
    th = Thresholds(cpu_bound=cpu_bound, gpu_bound=gpu_bound, min_wall_ns=min_wall_ms * 1e6, min_kernels=min_kernels)
    t0 = time.perf_counter()
    from ..render.progress import Progress
    say = Progress(_LEVEL["value"], echo=lambda s: click.echo(s, err=True))
    ex = None
    try:
        if executor is not None or rank_timeout is not None:
            from .. import executors
            if executor not in (None, "processes", "local"):  # (a cluster takes a while to start or reach)
                say(f"[ranks] executor {executor}" + (" (starting a local Dask cluster)" if executor == "dask" else ""))
            ex = executors.make(executor, jobs, timeout_s=rank_timeout)
        elif jobs is not None and jobs > 1 and len(inputs) > 1:
            # several ranks asked to be analysed in processes: the workers start and import the analysis now,
            # while this process imports it and groups the files (an unused pool is stopped at the end)
            from .. import executors
            ex = executors.Processes(jobs).warm(preload=("nsighttc.api", "nsighttc.rank_map"))
        kw = dict(yes_threshold=yes_threshold, thresholds=th, step_range=step_range, range_name=range_, jobs=jobs,
                  executor=ex, progress=_rank_progress(say))
        if same_job_check:
            verdicts = [run_analysis(list(inputs), **kw)]
        else:
            from ..api import analyze_jobs
            verdicts = analyze_jobs(list(inputs), **kw)
    finally:
        if ex is not None:
            ex.close()
        say.close()
    note(f"nsighttc: analysed {len(inputs)} input(s), {sum(len(v.launches) for v in verdicts):,} kernel launches in "
         f"{time.perf_counter() - t0:.2f} s", level=2)
    for v in verdicts:
        for w in v.warnings:
            note(f"nsighttc: note: {w}")
    if len(verdicts) == 1:
        _show(verdicts[0].to_json(), fmt, output, list(inputs), detail=detail, stacks=verdicts[0].host_collapsed)
        return
    _show_jobs([v.to_json() for v in verdicts], fmt, output, list(inputs), detail)


def _show_jobs(docs: list[dict], fmt: str | None, output: str | None, inputs: list[str], detail: str) -> None:
    """Several jobs' verdicts (--no-same-job-check): a JSON list, or one Markdown document per job in a row."""
    import json
    if fmt == "json":
        _write(json.dumps(docs, indent=2, allow_nan=False) + "\n", output, inputs)
        return
    from ..render.markdown import render
    parts = []
    for i, doc in enumerate(docs, 1):
        files = ", ".join(f"`{x['path']}`" for x in doc["inputs"])
        parts.append(f"# Job {i} of {len(docs)}: {files}\n\n" + render(doc, detail=detail))
    _write("\n\n".join(parts), output, inputs)


def _rank_progress(say):
    """The per-rank progress line (a live line on a terminal, one line every few seconds in a log)."""
    def progress(done: int, total: int, failed: int) -> None:
        if done < total:
            say(f"[ranks] analysed {done}/{total}" + (f", {failed} failed" if failed else ""))
        else:  # (not a progress line: a log shows progress every few seconds, and always the end)
            say(f"[ranks] all {total} analysed" + (f", {failed} failed" if failed else ""))
    return progress


@click.command(short_help="Re-render a saved verdict (Markdown, JSON, plots).")
@verbosity
@click.argument("source", type=click.Path(exists=False))
@click.option("--format", "fmt", type=FORMAT, default="markdown", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write here (the plots go beside it) instead of stdout.")
@click.option("--plots/--no-plots", default=True, show_default=True, help="Draw the PNG plots (with -o).")
@DETAIL
def report(source: str, fmt: str, output: str | None, plots: bool, detail: str) -> None:
    """Re-render a saved verdict (a run directory or verdict.json) without profiling again."""
    from ..render import render
    from ..verdict import load_json

    doc = load_json(source)
    with _saved_verdict(source):
        if fmt == "markdown":
            made = None
            if output and plots:
                from ..render.plots import write_plots
                made = write_plots(doc, Path(output).resolve().parent)
            _markdown(doc, output, [source], detail, plots=made)
            return
        text = render(doc, fmt)
    _write(text, output, [source])


@click.command(short_help="Compare two verdicts; a CI gate.")
@verbosity
@click.argument("base", type=click.Path())
@click.argument("new", type=click.Path())
@click.option("--max-tc-drop", type=Finite(min=0), default=5.0, show_default=True,
              help="Fail when the Tensor Core share of kernel time drops by more than this many points.")
@click.option("--max-busy-drop", type=Finite(min=0), default=10.0, show_default=True,
              help="Fail when the GPU busy share drops by more than this many points.")
@click.option("--max-slowdown", type=Finite(min=0), default=10.0, show_default=True,
              help="Fail when the median step (distributed: the slowest rank's) gets slower by more than this many percent.")
@click.option("--max-comm-rise", type=Finite(min=0), default=10.0, show_default=True,
              help="Distributed runs: fail when the transfers of communication not overlapped by compute rise by "
                   "more than this many points of step time (the ranks' waits for each other are the slowest "
                   "rank's step's gate; verdicts without the split: all exposed communication).")
@click.option("--format", "fmt", type=FORMAT, default="markdown", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the comparison here.")
def diff(base: str, new: str, max_tc_drop: float, max_busy_drop: float, max_slowdown: float, max_comm_rise: float,
         fmt: str, output: str | None) -> None:
    """Compare two verdicts (run directories or verdict.json) and gate on regressions.

    Exit 0 when nothing regressed beyond the gate, 1 when something did, 2 on bad input. Markdown output
    is a side-by-side table for a PR comment.
    """
    from ..diff import Gate, compare, render_markdown
    from ..render import json_out
    from ..verdict import load_json

    gate = Gate(max_tc_drop, max_busy_drop, max_slowdown, max_comm_rise)
    base_doc, new_doc = load_json(base), load_json(new)
    with _saved_verdict(f"{base} / {new}"):
        checks = compare(base_doc, new_doc, gate)
        if fmt == "json":
            text = json_out.dumps({"schema": "nsighttc.diff/1", "base": base, "new": new, "gate": gate.__dict__,
                                   "checks": [c.__dict__ for c in checks],
                                   "failed": any(c.status == "fail" for c in checks)}, indent=2) + "\n"
        else:
            text = render_markdown(checks, base, new, gate)
    _write(text, output, [base, new])
    if any(c.status == "fail" for c in checks):
        raise click.exceptions.Exit(1)


@click.command(short_help="Real H200 verdicts shipped with nsighttc (no GPU needed).")
@verbosity
@click.option("--format", "fmt", type=FORMAT, default=None, help=FORMAT_HELP)
@click.option("--which", type=click.Choice(["both", "counters", "timeline"]), default="both", show_default=True,
              help="counters: the Nsight Compute recording alone (every Tensor Core trap); timeline: the "
                   "Nsight Systems one alone; both: the timeline with the counters merged in.")
def demo(fmt: str, which: str) -> None:
    """Analyse real H200 recordings shipped with nsighttc (no GPU needed).

    Recordings: a probe workload under Nsight Compute with Tensor Core counters (fp32/TF32/fp16/bf16/
    fp8/int8/fp64 matmuls, convolutions, attention, VGG16; one NVTX range per case), and under Nsight
    Systems a data-loader-starved training loop next to a GEMM-bound one.
    """
    from ..api import analyze as run_analysis
    from ..resources import demo_inputs

    doc = run_analysis(demo_inputs(which)).to_json()
    for i in doc["inputs"]:  # the recordings by name: where the package lies on this machine is nobody's concern
        i["path"] = f"demo: {Path(i['path']).name}"
    _show(doc, fmt, None, [])
