#!/usr/bin/env python3
"""Run nsighttc's launcher, then leave the process one of several ways (``gpu_exit_tail_probe.py``'s variants).

    python3 benchmarks/probes/exit_variant.py VARIANT LAUNCHER-ARGS...

VARIANT:
- ``asis``: return as the launcher does (``sys.exit(main())``): the interpreter's shutdown frees the profiler's
  recording with everything else;
- ``free``: drop every reference to the profiler first and time how long freeing its recording takes (printed);
- ``leak``: keep one extra reference to every profiler object, so the shutdown never frees their recordings (the
  operating system takes the memory back);
- ``osexit``: flush the output and ``os._exit`` at once: no atexit handler, no shutdown (a lower bound only: a
  real program's atexit handlers and unflushed files need the shutdown).
"""
from __future__ import annotations

import ctypes
import gc
import os
import sys
import time


def profilers() -> list:
    import torch.autograd.profiler as ap
    import torch.profiler as tp
    kinds = (tp.profile, ap.profile)
    return [o for o in gc.get_objects() if type(o) in kinds]


def main() -> int:
    variant, argv = sys.argv[1], sys.argv[2:]
    from nsighttc.runtime import annotate, launch
    code = launch.main(argv)
    t0 = time.perf_counter()
    if variant == "free":
        n = len(profilers())
        t0 = time.perf_counter()
        if launch._WINDOW is not None:  # the window's recorder holds the profiler (and the step hooks hold the window)
            launch._WINDOW.recorder = None
        launch._WINDOW = None
        annotate._step_listener = None
        gc.collect()
        took = time.perf_counter() - t0
        print(f"exit_variant: freed profilers ({n} before, {len(profilers())} left) in {took:.3f} s",
              file=sys.stderr, flush=True)
    elif variant == "leak":
        held = profilers()
        for obj in held:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
            res = getattr(obj, "kineto_results", None) or getattr(getattr(obj, "profiler", None), "kineto_results", None)
            if res is not None:
                ctypes.pythonapi.Py_IncRef(ctypes.py_object(res))
        print(f"exit_variant: {len(held)} profilers kept past the shutdown", file=sys.stderr, flush=True)
    elif variant == "osexit":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    print(f"exit_variant: leaving at {time.perf_counter() - t0:.3f} s", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
