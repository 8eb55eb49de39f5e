"""``nsighttc fix``: the advice as a patch of the program's files, run and measured (``nsighttc.fix``)."""
from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from .common import Finite, note, verbosity
from .run import report_try, rounds_options, with_progress


@click.command("fix", short_help="Write the advice as a patch of the program, run it, and measure it.",
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@verbosity
@click.option("--variant", "variants", multiple=True, metavar="NAME",
              help="The fix to write (repeatable; default auto: what the baseline's findings point to): tf32, "
                   "no-tf32, cudnn-benchmark, workers=N, pin-memory, persistent-workers, static-cache, "
                   "fused-optimizer, bf16-autocast, fp16-autocast, channels-last, pad-buckets.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="N for workers=N (default: min(8, cores)).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("nsighttc-runs"),
              show_default=True, help="Parent of the run directory (<time>-try-<script>).")
@click.option("--timeout", type=Finite(min=1), metavar="SECONDS", help="Stop each run after this long.")
@rounds_options
@click.option("--metric", metavar="REGEX",
              help="The program's own metric, shown beside each run: the last match in its output, first group "
                   "(e.g. '([\\d.]+) requests/s'); implies --full-run.")
@click.option("--full-run", is_flag=True,
              help="Let every plain run finish (default: stop once a window of steady steps is timed).")
@click.option("--apply", "apply_", is_flag=True,
              help="Write the kept patches into the program's files, each file's original kept beside it "
                   "(FILE.nsighttc-bak).")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default=None,
              help="Print the comparison (default: a summary; the files are always written).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="PROGRAM.py [ARGS]...")
def fix(variants, workers, out, timeout, repeat, budget, metric, full_run, apply_, fmt, args) -> None:
    """Write each fix the advice names as an edit of the program's own files, run the patched copy beside the
    program (and beside the launcher's variant of the same fix), and keep the patches that made it faster.

    \b
      nsighttc fix train.py --epochs 1            # the baseline's findings choose
      nsighttc fix --variant workers=8 --variant tf32 train.py
      nsighttc fix --apply train.py               # and write the kept patches (with backups)

    \b
    The edits keep the program's formatting (LibCST): DataLoader(num_workers=, pin_memory=,
    persistent_workers=) where the loader is built (or the default of the program's own --option that sets
    it), TF32 and cuDNN flags where the program sets them (else after its `import torch`),
    cache_implementation="static" where generate()'s arguments are, fused=True on Adam/AdamW/SGD, bf16
    autocast as TrainingArguments(bf16=True), Lightning's precision, or around the loss before its
    .backward(), memory_format=torch.channels_last where the model is built, pad_to_multiple_of=64 at a
    tokenizer's padding or a batch's length rounded up where the program pads by hand
    (max(len(x) for x in batch)). Where no safe edit exists (compile, cuda-graphs, a call built from
    **kwargs) the note says why and the advice stands. The program's files are only read: each patch runs
    as a copy in the run directory (patched/), its diff beside it, and try.md shows diff, speed-up and spread.
    """
    from ..experiment import TryOptions, run_try
    from ..profile import resolve_target

    args = list(args)
    if not args or not args[0].endswith(".py"):
        raise UsageError("nothing to fix: give PROGRAM.py [ARGS] (a script: its files are what is patched)")
    target = resolve_target(args[0], args[1:], None)
    opts = TryOptions(variants=list(variants), out=out, timeout=timeout, workers=workers, repeat=repeat,
                      budget=budget, fix=True, metric=metric, full_run=full_run)
    result = with_progress(run_try, target, opts)
    kept = [v for v in result.doc["variants"] if (v.get("patch") or {}).get("kept")]
    if apply_:
        from .. import fix as fix_mod
        patches = [fix_mod.plan(Path(args[0]), v["patch"]["variant"], workers) for v in kept]
        if not patches:
            note("nsighttc fix: no patch was kept: nothing applied", level=0)
        else:
            for path in fix_mod.apply(patches):
                note(f"nsighttc fix: patched {path} (original: {path}{fix_mod.BACKUP_SUFFIX})", level=0)
    report_try(result, fmt)
