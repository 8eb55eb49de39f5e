"""The ``nsighttc`` command: click commands only. Each parses options, calls the library, writes the
output, and maps errors to exit codes (``NsighttcError.exit_code``; 2 for bad input) in ``main``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from . import __version__
from .errors import NsighttcError, UsageError

FORMAT = click.Choice(["markdown", "json"])


def _write(text: str, output: str | None, inputs: list[str]) -> None:
    if output in (None, "-"):
        click.echo(text, nl=not text.endswith("\n"))
        return
    out = Path(output).resolve()
    if any(out == Path(i).resolve() for i in inputs):
        raise UsageError(f"{output}: refusing to overwrite an input file")
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{output}: cannot write ({exc.strerror or exc})") from None
    click.echo(f"wrote {output}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="nsighttc")
def cli() -> None:
    """Did the Tensor Cores fire, and if it is not faster, why?

    nsighttc reads what Nsight Compute (ncu), Nsight Systems (nsys) and torch.profiler record and
    writes a verdict: which kernels ran on Tensor Cores (hardware counters decide, kernel names only
    guess), and whether the GPU was kept busy. Start with `nsighttc demo`.
    """


@cli.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=FORMAT, default="markdown", show_default=True,
              help="Markdown for people (a PR comment), JSON (schema nsighttc.verdict/1) for machines.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
@click.option("--yes-threshold", type=click.FloatRange(0, 1), default=0.9, show_default=True,
              help="Share of matrix-work time that must be on Tensor Cores for a YES (else PARTIAL).")
@click.option("--step-range", metavar="NAME",
              help="Range that marks one step (default: ProfilerStep#N, or ranges named like 'step').")
@click.option("--cpu-bound", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="GPU busy share below which a range or step is CPU-bound.")
@click.option("--gpu-bound", type=click.FloatRange(0, 1), default=0.75, show_default=True,
              help="GPU busy share from which a range or step is GPU-bound (between: mixed).")
@click.option("--min-wall-ms", type=click.FloatRange(0), default=2.0, show_default=True,
              help="Ranges shorter than this in total get 'insufficient-data'.")
@click.option("--min-kernels", type=click.IntRange(0), default=10, show_default=True,
              help="Ranges that launch fewer kernels get 'insufficient-data'.")
def analyze(inputs: tuple[str, ...], fmt: str, output: str | None, yes_threshold: float, step_range: str | None,
            cpu_bound: float, gpu_bound: float, min_wall_ms: float, min_kernels: int) -> None:
    """Analyse profiler outputs and print the verdict.

    INPUTS: Nsight Compute CSV exports (`ncu -i R.ncu-rep --csv --page raw --print-units base`, or
    --page details; plain or .gz), .ncu-rep reports, Nsight Systems SQLite exports / .nsys-rep, and
    torch.profiler traces (.json / .json.gz). Files of one run can be combined: a timeline plus an ncu
    export makes the timeline's Tensor Core shares hardware-true.
    """
    from .analyze.timeline import Thresholds
    from .api import analyze as run_analysis
    from .render import render

    if cpu_bound > gpu_bound:
        raise UsageError(f"--cpu-bound ({cpu_bound}) must not exceed --gpu-bound ({gpu_bound})")
    th = Thresholds(cpu_bound=cpu_bound, gpu_bound=gpu_bound, min_wall_ns=min_wall_ms * 1e6, min_kernels=min_kernels)
    verdict = run_analysis(list(inputs), yes_threshold=yes_threshold, thresholds=th, step_range=step_range)
    for w in verdict.warnings:
        click.echo(f"nsighttc: note: {w}", err=True)
    _write(render(verdict.to_json(), fmt), output, list(inputs))


@cli.command()
@click.option("--format", "fmt", type=FORMAT, default="markdown", show_default=True)
@click.option("--which", type=click.Choice(["both", "counters", "timeline"]), default="both", show_default=True,
              help="counters: the Nsight Compute recording alone (every Tensor Core trap); timeline: the "
                   "Nsight Systems one alone; both: the timeline with the counters merged in.")
def demo(fmt: str, which: str) -> None:
    """Analyse real H200 recordings shipped with nsighttc (no GPU needed).

    Recordings: a probe workload under Nsight Compute with Tensor Core counters (fp32/TF32/fp16/bf16/
    fp8/int8/fp64 matmuls, convolutions, attention, VGG16; one NVTX range per case), and under Nsight
    Systems a data-loader-starved training loop next to a GEMM-bound one.
    """
    from .api import analyze as run_analysis
    from .render import render
    from .resources import demo_inputs

    verdict = run_analysis(demo_inputs(which))
    click.echo(render(verdict.to_json(), fmt))


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the exit code (tests call it directly)."""
    try:
        cli.main(args=argv, prog_name="nsighttc", standalone_mode=False)
        return 0
    except NsighttcError as exc:
        click.echo(f"nsighttc: error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("nsighttc: interrupted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug of ours: one line, and the trace only when asked for
        if os.environ.get("NSIGHTTC_DEBUG"):
            raise
        click.echo(f"nsighttc: internal error: {type(exc).__name__}: {exc} (set NSIGHTTC_DEBUG=1 for the "
                   "traceback and please report it)", err=True)
        return 1


def entry() -> None:
    sys.exit(main())
