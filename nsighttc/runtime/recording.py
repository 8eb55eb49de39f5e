"""How the launcher starts torch.profiler: with every operator, or with the ranges only.

The timeline's analysis reads the GPU's activities (kernels, copies, memsets), the CUDA runtime and driver calls
that launched them, and the ``record_function`` ranges (``user_annotation``: the program's ``annotate`` ranges, the
step hooks' marks, the DataLoader's ``enumerate(DataLoader)#...`` and the optimizers' ``Optimizer.step#...``
labels). The operators (``cpu_op``: every ``aten::`` call and autograd node) are read only by the replay, which
needs their arguments (``--record-shapes``), and for torch.compile's compilation spans, which the step hooks mark
themselves (``nsighttc.compile``; without the hooks, ``--no-step-marks``, the default run records operators). Their cost shows at the profiler's stop and in the trace's writing.

So without operators, the profiler is enabled with RecordFunction callbacks for ``RecordScope.USER_SCOPE`` only
(``torch.autograd._enable_profiler``'s ``scopes``): the ranges are recorded, an operator's RecordFunction finds
no callback and costs nothing, and CUPTI still records every kernel and launch. torch.profiler's own ``start``
passes no scopes, so the call it makes is given them while ``prof.__enter__`` runs (nothing else sees it).

Seen on this repository's 2-core CPU machine (torch 2.13): 2,000 steps of an eight-layer MLP's forward and
backward, 696,000 operator events: the loop 0.94 s with operators against 0.72 s with the ranges only (0.74 s
unrecorded), the stop 2.98 s against 0.00 s, the same 2,000 ``step`` ranges in the trace. On the H100 (torch 2.11,
``benchmarks/probes/gpu_record_scope_probe.py``, reports/window/call12): ResNet-50 AMP's 32 recorded steps held
100,992 operator events; the stop took 0.48-0.67 s instead of 0.84-1.03 s; the steps themselves were slowed about as
much either way (by CUPTI's recording of every launch, which stays). Second runs' whole stop in the default run:
ResNet-50 AMP 0.71-0.82 s instead of 0.92-1.34 s, Lightning 0.16-0.19 s instead of 0.74-1.04 s (call12-13).
"""
from __future__ import annotations

import sys


def start(prof, operators: bool = True) -> bool:
    """Enter torch.profiler ``prof``; without ``operators``, record the ranges and the GPU only. Returns whether
    the operators are recorded (True also where this torch offers no scopes: it then records everything)."""
    if operators:
        prof.__enter__()
        return True
    try:
        import torch.autograd.profiler as autograd_profiler
        from torch._C._profiler import RecordScope
        enable = autograd_profiler._enable_profiler
    except (ImportError, AttributeError) as exc:
        print(f"nsighttc.launch: operators recorded: this torch offers no RecordFunction scopes "
              f"({type(exc).__name__}: {exc})", file=sys.stderr)
        prof.__enter__()
        return True

    scoped = []

    def ranges_only(config, activities, *_, **__):
        scoped.append(True)
        return enable(config, activities, {RecordScope.USER_SCOPE})

    autograd_profiler._enable_profiler = ranges_only
    try:
        prof.__enter__()
    finally:
        autograd_profiler._enable_profiler = enable
    if not scoped:  # this torch's profiler enables itself some other way: everything was recorded
        print("nsighttc.launch: operators recorded: this torch's profiler did not take the ranges-only scope",
              file=sys.stderr)
    return not scoped
