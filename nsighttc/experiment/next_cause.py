"""What limits the program after its best variant, and the fix for that: ``--variant auto``'s combination.

Why: auto used to combine the two fastest variants, and two fixes for one cause add nothing (an fp32 accumulation
loop: tf32 1.35x, bf16-autocast 1.35x, bf16+tf32 1.24x), while after TF32 the loop waited on its DataLoader, and
tf32 + workers was never tried. So the combination is the best variant plus the fix for what holds *its* steps:

1. **Measured without a profiler**: the best variant's plain runs time every DataLoader fetch and ask, when it
   returns, whether the GPU had run out of work (``runtime.step_timer``'s ``data_ns``, ``fetches_gpu_idle``); where
   the host spent ``DATA_SHARE`` of the step or more in them and the GPU ran dry after most of them, data loading
   is next, and the fix is workers for loaders left at ``num_workers=0`` (pinned memory where they have workers but
   not pinning).
2. Otherwise, with ``--variant auto``, **one profiled run of the best variant**: its verdict chooses as the
   baseline's did (``experiment.auto.choose``), the best variant's own cause family left out.
3. Never two fixes of one cause family (``FAMILY``): two precisions, two loader changes, two kinds of graphs.
"""
from __future__ import annotations

import os

from ..durations import duration

DATA_SHARE = 0.25   # the host spent at least this share of the step in DataLoader fetches ...
STARVED = 0.5       # ... and, on a GPU, the GPU had run out of work after at least this share of them

# variant -> the cause it fixes (two of one family are not combined)
FAMILY = {"tf32": "precision", "no-tf32": "precision", "bf16-autocast": "precision", "fp16-autocast": "precision",
          "workers=N": "data loading", "pin-memory": "data loading", "persistent-workers": "data loading",
          "fused-optimizer": "optimizer kernels",
          "compile": "launch and kernel count", "compile-reduce-overhead": "launch and kernel count",
          "cuda-graphs": "launch and kernel count", "static-cache": "launch and kernel count",
          "cudnn-benchmark": "convolution algorithms", "channels-last": "convolution layout",
          "pad-buckets": "input shapes"}


def family(part: str) -> str:
    return FAMILY.get("workers=N" if part.startswith("workers=") else part, part)


def families(name: str) -> set[str]:
    return {family(p) for p in name.split("+")}


def _weighted(runs: list[dict], key: str) -> float | None:
    num = den = 0.0
    for r in runs:
        for ph in (r.get("_steps") or {}).values():
            if ph.get(key) is None or not ph.get("step_ns"):
                continue
            w = ph["steps"] * ph["step_ns"]
            num += ph[key] * w
            den += w
    return num / den if den else None


def data_share(runs: list[dict]) -> float | None:
    """The share of the step the host spent in DataLoader fetches, over a variant's plain runs (each phase weighted
    by its steps' time), or None where no fetch was timed."""
    return _weighted(runs, "data_share")


def data_starved(runs: list[dict]) -> float | None:
    """The share of those fetches after which the GPU had run out of work (it waited on them), or None without a
    GPU (or from step times written before it was recorded)."""
    return _weighted(runs, "data_starved")


def loader_holds(runs: list[dict]) -> tuple[bool, float | None, float | None]:
    """(whether the loader holds the steps, its share, how often the GPU ran dry): on a GPU the host's time in
    fetches counts only where the GPU ran out of work during them (``STARVED`` of them or more), since a host that
    fetches while the GPU works through its queue costs the step nothing; without a GPU the host does all the work
    and its share in fetches is the step's."""
    share, starved = data_share(runs), data_starved(runs)
    if share is None or share < DATA_SHARE:
        return False, share, starved
    return (starved is None or starved >= STARVED), share, starved


def from_plain(best: str, runs: list[dict], workers: int | None = None) -> dict | None:
    """The next bottleneck after ``best`` as its plain runs measured it: data loading, with its fix, or None."""
    holds, share, starved = loader_holds(runs)
    if not holds:
        return None
    record = next((r.get("_record") for r in runs if r.get("_record")), None) or {}
    loaders = record.get("dataloaders") or {}
    step = _step_ns(runs)
    out = {"after": best, "cause": "data loading", "share": round(share, 3), "measured": "plain runs",
           "evidence": (f"the host waited in DataLoader fetches for {100 * share:.0f}% of the step"
                        + (f" ({duration(share * step)} of {duration(step)})" if step else "")
                        + (f", and the GPU had run out of work after {100 * starved:.0f}% of them" if starved is not None
                           else "")),
           "variant": None}
    has_workers = any(p.startswith("workers=") for p in best.split("+"))
    if loaders.get("workers_default") and not has_workers:
        out["variant"] = f"workers={workers or min(8, os.cpu_count() or 1)}"
    elif loaders.get("pin_memory_default") and "pin-memory" not in best.split("+") and has_workers:
        out["variant"] = "pin-memory"
    else:
        out["advice"] = ("the loaders have workers already: the data work per sample (``__getitem__``, collate) is what "
                         "to make lighter, or more workers")
    return out


def from_verdict(best: str, verdict: dict, record: dict | None, workers: int | None = None) -> dict | None:
    """The next bottleneck after ``best`` from a profiled run of it: the first variant its verdict points to that
    fixes another cause than ``best`` does, with the verdict's headline cause; None when it points to none."""
    from .auto import choose
    tl = verdict.get("timeline") or {}
    taken = families(best)
    for name, why in choose(verdict, record, workers):
        if family(name) in taken or name in best.split("+"):
            continue
        return {"after": best, "cause": tl.get("headline_cause") or family(name), "measured": "a profiled run",
                "evidence": f"its verdict: {tl.get('verdict') or '?'}" + (
                    f" ({tl['headline_cause']})" if tl.get("headline_cause") else "") + f"; {why}",
                "variant": name}
    return None


def _step_ns(runs: list[dict]) -> float | None:
    steps = [r.get("step_ns") for r in runs if r.get("step_ns")]
    return sum(steps) / len(steps) if steps else None
