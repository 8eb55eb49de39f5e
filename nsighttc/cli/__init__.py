"""The ``nsighttc`` command: click commands only. Each parses options, calls the library, writes the
output, and maps errors to exit codes (``NsighttcError.exit_code``; 2 for bad input) in ``main``.
"""
from __future__ import annotations

import os
import sys

import click

from .. import __version__
from ..errors import NsighttcError
from .common import _LEVEL
from .files import analyze, demo, diff, report
from .run import doctor, profile, try_
from .fix import fix


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="nsighttc")
def cli() -> None:
    """Did the Tensor Cores fire, and if it is not faster, why?

    nsighttc reads what Nsight Compute (ncu), Nsight Systems (nsys) and torch.profiler record and
    writes a verdict: which kernels ran on Tensor Cores (hardware counters decide, kernel names only
    guess), and whether the GPU was kept busy. Start with `nsighttc demo`.
    """


for _command in (analyze, report, diff, demo, profile, try_, fix, doctor):
    cli.add_command(_command)


def _terminate_as_interrupt() -> None:
    """SIGTERM (a CI job cancelled, `timeout`, a batch system's kill) is handled as Ctrl-C is: the profiled program's
    whole process group is stopped and what was recorded is kept. By default SIGTERM ended nsighttc at once and left
    its children running: on two H200s a torchrun job killed by `timeout` kept its rendezvous port, and the next job
    failed with EADDRINUSE (benchmarks/gpu/gpu_distributed_windows.sh)."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the exit code (tests call it directly)."""
    _LEVEL["value"] = 1
    _terminate_as_interrupt()
    try:
        rv = cli.main(args=argv, prog_name="nsighttc", standalone_mode=False)
        return rv if isinstance(rv, int) else 0  # click returns Exit(code) values in non-standalone mode
    except NsighttcError as exc:
        click.echo(f"nsighttc: error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("nsighttc: interrupted", err=True)
        return 130
    except click.UsageError as exc:  # one line, as every other bad input: what is wrong and where help is
        ctx = exc.ctx
        where = f"'{ctx.command_path} --help'" if ctx is not None else "'nsighttc --help'"
        click.echo(f"nsighttc: error: {exc.format_message()} (see {where})", err=True)
        return exc.exit_code
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
    """The console command: ``main``, then the process ends without the interpreter's shutdown. Every output
    is written and closed by then, and freeing an analysis' heaps (pandas, Arrow, matplotlib) one object at
    a time is only a wait at the end of each command: ~0.2 s here, more on a slower host, after every
    `nsighttc profile`, whose cost is measured against the program's own."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a reader that went away, a stream closed: nothing left to say
        pass
    os._exit(code)
