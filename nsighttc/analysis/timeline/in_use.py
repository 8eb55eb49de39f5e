"""What the recording shows the program already does, so that no finding advises adopting it and ``try --variant
auto`` offers only variants that change something.

A plain ``nsys`` recording of a ``generate()`` loop with a static cache replays its decode as CUDA graphs (251
``cudaGraphLaunch`` calls, 77% of the kernels graph nodes, on an H100), and the launch-bound finding still told it to
"replay the decoding step as a CUDA graph". Each fix is read from what it leaves in any recording:

- CUDA graphs: ``cudaGraphLaunch`` calls, or whole-graph records (``busy.graphs``); or their capture
  (``cudaStreamBeginCapture``, ``steps.slow.CAPTURE_CALLS``) in a recording of the program's start-up, which holds the
  captures and none of the replays (vLLM capturing its piecewise graphs, TraceLens' traces, MI300: "Replay the model's
  call as a CUDA graph" to the code that was capturing them);
- torch.compile: its compilations (the hooks' ``nsighttc.compile`` marks, torch.profiler's ``## Call CompiledFxGraph … ##``
  ranges, folded by ``parse.marks``) or Inductor's generated kernels (``triton_poi_*``, ``triton_red_*``, ``triton_per_*``, ``triton_tem_*``:
  the names Inductor gives them, seen in every compiled fixture, torch 2.11 and 2.13);
- a foreach or fused optimizer: torch's ``multi_tensor_apply_kernel`` (``torch.optim`` with ``foreach=True``, the
  default on CUDA, and ``fused=True``; the Trainer fine-tune's AdamW, tests/fixtures/unmarked/trainer_torch.json.xz).

Each entry says what was seen, in words the findings quote.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ... import labels
from ...parse.marks import COMPILED_GRAPH
from ...record_format import COMPILE

INDUCTOR_KERNEL = re.compile(r"^triton_(poi|red|per|tem)_")
FOREACH_KERNEL = re.compile(r"multi_tensor_apply_kernel|fused_adam|FusedAdam|fused_sgd", re.I)


WINDOW_SCOPE = "(window)"  # the scope of a recording without steps (``findings.WINDOW_SCOPE``)


def detect(launches: pd.DataFrame, marks: pd.DataFrame, ranges: pd.DataFrame, graphs: dict,
           api: pd.DataFrame | None = None, families: list[dict] | None = None) -> dict:
    """``{fix: {"seen": words, ...}}`` for each fix the recording shows in use. CUDA graphs are also told per scope
    (``scopes``: the step families whose steady steps launch graphs, or the window): a program of several phases
    may replay graphs in one and launch kernels one by one in another (multi_phase.py), and only the graphed one
    has no graph to adopt."""
    out: dict[str, dict] = {}
    captures = _captures(api)
    n_launch = int(graphs.get("launches") or 0)
    if captures and n_launch <= captures:  # its capture, each graph replayed once at most: no loop of replays
        out["cuda_graphs"] = {"launches": n_launch, "captures": captures, "kernel_share": None,
                              "scopes": _graphed_scopes(api, families, capture=True),
                              "seen": f"{captures:,} CUDA graph capture{'s' if captures > 1 else ''}, "
                                      + (f"{n_launch:,} replays" if n_launch > 1 else
                                         "one replay" if n_launch else "no replay") + " recorded"}
    elif n_launch or graphs.get("trace") == "graph":
        kernels = int(graphs.get("kernels") or 0)
        total = kernels + int(graphs.get("kernels_outside") or 0)
        share = kernels / total if total else None
        out["cuda_graphs"] = {"launches": int(graphs.get("launches") or 0), "kernel_share": share,
                              "scopes": _graphed_scopes(api, families),
                              "seen": f"{graphs.get('launches', 0):,} CUDA graph launches"
                                      + (f", {100 * share:.0f}% of the kernels inside graphs" if share else "")}
    names = _names(launches)
    inductor = int(sum(1 for n in names if INDUCTOR_KERNEL.match(n)))
    compiles = int((marks["name"] == COMPILE).sum()) if marks is not None and not marks.empty else 0
    compiled_ranges = bool(not ranges.empty and labels.per_category(
        ranges["path"], lambda p: COMPILED_GRAPH in p, dtype=bool).any()) if "path" in ranges else False
    if inductor or compiles or compiled_ranges:
        what = [f"{inductor} kernel names Inductor generated"] if inductor else []
        what += [f"{compiles} torch.compile compilations"] if compiles else []
        what += ["torch.compile's compiled regions"] if compiled_ranges and not what else []
        out["torch_compile"] = {"seen": ", ".join(what)}
    foreach = [n for n in names if FOREACH_KERNEL.search(n)]
    if foreach:
        out["foreach_optimizer"] = {"seen": "the optimizer steps in foreach/fused multi-tensor kernels "
                                            f"(`multi_tensor_apply_kernel`, {len(foreach)} kinds)"}
    return out


def _captures(api: pd.DataFrame | None) -> int:
    """How many CUDA graphs the recording saw the program begin to capture."""
    if api is None or api.empty:
        return 0
    from .steps.slow import CAPTURE_CALLS
    return int(api["name"].isin(CAPTURE_CALLS).sum())


def _graphed_scopes(api: pd.DataFrame | None, families: list[dict] | None, capture: bool = False) -> list[str]:
    """The step families whose steady window holds a graph launch (``capture``: or a capture, for a recording that
    holds captures alone: a family among them is the capture's own work); the window's scope when there are no
    families."""
    if not families:
        return [WINDOW_SCOPE]
    if api is None or api.empty:
        return []
    from .base import GRAPH_LAUNCH_CALLS
    from .steps.slow import CAPTURE_CALLS
    calls = GRAPH_LAUNCH_CALLS | CAPTURE_CALLS if capture else GRAPH_LAUNCH_CALLS
    t = np.sort(api.loc[api["name"].isin(calls).to_numpy(), "start_ns"].to_numpy(dtype="float64"))
    out = []
    for f in families:
        lo, hi = f["steady_window_ns"]
        if np.searchsorted(t, hi, side="right") > np.searchsorted(t, lo, side="left"):
            out.append(f["name"])
    return out


def graphed(in_use: dict, scopes) -> bool:
    """Whether every one of ``scopes`` (a finding's ``per_step_ns`` keys, or one scope name) replays CUDA graphs."""
    g = (in_use or {}).get("cuda_graphs")
    if not g:
        return False
    scopes = [scopes] if isinstance(scopes, str) else list(scopes or [])
    have = set(g.get("scopes") or [])
    return bool(scopes) and all(s in have for s in scopes)


def _names(launches: pd.DataFrame) -> list[str]:
    """The distinct kernel names (a million launches share a few hundred: looked at once each)."""
    if launches is None or launches.empty or "name" not in launches:
        return []
    col = launches["name"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        used = np.unique(col.cat.codes.to_numpy())
        return [str(col.cat.categories[i]) for i in used if i >= 0]
    return [str(n) for n in pd.unique(col.dropna())]
