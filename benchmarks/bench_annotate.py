"""Cost of nsighttc.annotate ranges without a profiler attached (issue 4: "next to nothing").

Times N enter/exit pairs of ``annotate.range`` and of an empty context manager; prints the cost per
range in ns. NVTX calls are no-ops until ncu/nsys inject themselves, and torch's record_function is only
used inside an active torch.profiler session. Run: python benchmarks/bench_annotate.py [--n 1000000]
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def per_call(n: int, make) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        with make():
            pass
    return (time.perf_counter() - t0) / n * 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--with-torch", action="store_true", help="import torch first (labels stay off without a profiler)")
    a = ap.parse_args()
    if a.with_torch:
        import torch  # noqa: F401
    from nsighttc import annotate
    base = per_call(a.n, contextlib.nullcontext)
    rng = per_call(a.n, lambda: annotate.range("step"))
    print(f"annotate.range: {rng:.0f} ns per range (empty context manager: {base:.0f} ns; "
          f"torch imported: {a.with_torch}); 1,000 ranges per step cost {rng * 1000 / 1e6:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
