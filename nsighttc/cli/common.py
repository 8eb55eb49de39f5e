"""What every command shares: the output formats, -q/-v, notes on stderr, and writing the result (never over an
input)."""
from __future__ import annotations

import contextlib
import shutil
import sys
from pathlib import Path

import click

from ..errors import InputError, UsageError

FORMAT = click.Choice(["markdown", "json"])


class Finite(click.FloatRange):
    """A float in a range that is a number: click's ``FloatRange`` lets ``nan`` through (every comparison with it is
    false) and ``inf`` through an open top, and a gate of ``nan`` passes everything ("<= nan pts") and writes NaN
    into JSON, which strict parsers reject. Used for every float option."""
    name = "number"

    def convert(self, value, param, ctx):
        import math
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


class _StepsOrAuto(click.ParamType):
    """A number of steps (0 or more), or ``auto``: None."""
    name = "steps"

    def convert(self, value, param, ctx):
        from ..runtime.window_sizing import parse_count  # the launcher reads its --window-* counts the same way
        try:
            return parse_count(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


STEPS_OR_AUTO = _StepsOrAuto()


FORMAT_HELP = ("Markdown for people (a PR comment), JSON (schema nsighttc.verdict/1) for machines. Default: a short "
               "summary on a terminal, the whole Markdown document when piped or written to a file.")


_LEVEL = {"value": 1}  # 0 quiet, 1 normal, 2 verbose (set by -q / -v on every command)


def verbosity(f):
    """-q/--quiet and -v/--verbose for a command."""
    def set_level(ctx, param, value):
        if value:
            _LEVEL["value"] = 0 if param.name == "quiet" else 2
        return value
    f = click.option("-v", "--verbose", is_flag=True, expose_value=False, callback=set_level,
                     help="Say more on stderr (timings, every note, the workload's output).")(f)
    return click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=set_level,
                        help="Only the result (and errors): no notes or progress on stderr.")(f)


def note(text: str, level: int = 1) -> None:
    """A line on stderr, shown at this verbosity level or above."""
    if _LEVEL["value"] >= level:
        click.echo(text, err=True)


DETAIL = click.option("--detail", type=click.Choice(["summary", "full"]), default="summary", show_default=True,
                      help="Markdown: summary fits a pull-request comment (<= 60,000 characters: the top kernels "
                           "and ranges, the findings; with -o, the full tables go to NAME.kernels.md / "
                           "NAME.ranges.md beside it); full: every table whole in one file.")


def _markdown(doc: dict, output: str | None, inputs: list[str], detail: str, plots: dict | None = None,
              stacks: str = "") -> None:
    """Markdown to stdout, or to ``output`` with its tables (and the idle samples' ``stacks``) beside it (never over
    one of the inputs)."""
    from ..render import markdown
    made = {}
    if output not in (None, "-") and detail != "full" and not any(
            Path(output).resolve() == Path(i).resolve() for i in inputs):
        out = Path(output)
        try:
            made = markdown.write_beside(doc, out.resolve().parent, markdown.beside_prefix(out), stacks=stacks)
        except OSError as exc:
            raise UsageError(f"{output}: cannot write the tables beside it ({exc.strerror or exc})") from None
    _write(markdown.render(doc, plots=plots, detail=detail, beside=made), output, inputs)


def _show(doc: dict, fmt: str | None, output: str | None, inputs: list[str], report: str | None = None,
          detail: str = "summary", stacks: str = "") -> bool:
    """The result: the terminal summary when stdout is a terminal and no format was asked for (returns
    True), else the whole document."""
    if fmt is None and output in (None, "-") and sys.stdout.isatty():
        from ..render import terminal
        click.echo(terminal.render(doc, report=report, width=shutil.get_terminal_size().columns), nl=False)
        return True
    if (fmt or "markdown") == "markdown":
        _markdown(doc, output, inputs, detail, stacks=stacks)
        return False
    from ..render import render
    _write(render(doc, fmt), output, inputs)
    return False


@contextlib.contextmanager
def _saved_verdict(path: str):
    """A saved verdict that passed its schema can still lack a field the schema leaves optional and a
    renderer needs (found by tests/fuzz): that is bad input (exit 2 naming the file), not our crash."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        what = f"missing field {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise InputError(f"cannot be rendered ({what}); was it written by nsighttc?", path) from None


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
