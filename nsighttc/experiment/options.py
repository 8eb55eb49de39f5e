"""What ``nsighttc try`` was asked (``TryOptions``), what it returns (``Outcome``), and the checks made before anything
runs: the variants' names, the metric's pattern, the kind of program."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..runtime import variants as variants_mod

SCHEMA_ID = "nsighttc.try/1"
AUTOCASTS = ("bf16-autocast", "fp16-autocast")
PATCH = "patch:"  # a row that runs the program's patched copy (``nsighttc.fix``), no launcher variant


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
    repeat: int | None = None                            # rounds of plain runs (baseline and variants alternating);
                                                         # None: until each answer is clear (experiment.rounds)
    budget: float | None = None                          # seconds of plain runs the rounds may take (None: default)
    explain: bool = False                                # a profiled run of every variant too
    full_run: bool = False                               # plain runs to the program's end (else a window of steps)
    verdict: Path | None = None                          # the baseline's verdict from an earlier profile
    fix: bool = False                                    # also each variant's source edit, run as a patched copy


@dataclass
class Outcome:
    run_dir: Path
    doc: dict
    exit_code: int = 0


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


def validate(target, opts: TryOptions) -> list[str]:
    if not target.python_program or target.distributed:
        raise UsageError("nsighttc try runs single-process Python programs (SCRIPT.py or -- python -m MODULE): its "
                         "variants are applied by the Python launcher")
    if opts.metric:
        try:
            re.compile(opts.metric)
        except re.error as exc:
            raise UsageError(f"--metric {opts.metric!r} is not a regular expression ({exc})") from None
    if opts.repeat is not None and opts.repeat < 1:
        raise UsageError(f"--repeat {opts.repeat}: at least 1")
    if opts.budget is not None and not opts.budget > 0:
        raise UsageError(f"--budget {opts.budget}: a number of seconds above 0")
    names = list(dict.fromkeys(opts.variants or ["auto"]))
    for n in names:
        if n.startswith(PATCH):
            raise UsageError(f"{n}: patch rows come from --fix (nsighttc fix), not --variant")
        if n not in ("auto", "baseline"):
            try:
                [variants_mod.parse(part) for part in n.split("+")]
            except ValueError as exc:
                raise UsageError(str(exc)) from None
    return names
