"""``python -m tests.fuzz --minutes N [--kind K ...] [--seed S]``: the fuzzer for longer than the suite's
bounded run. Prints each broken promise; the inputs are saved in tests/fixtures/bad/ (see harness)."""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from .harness import check
from .mutators import mutate
from .seeds import BY_KIND, seed_bytes


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--kind", action="append", choices=sorted(BY_KIND), help="input kinds (default: all)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock)")
    a = ap.parse_args()
    kinds = a.kind or sorted(BY_KIND)
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    deadline = time.monotonic() + 60 * a.minutes
    cases = failures = 0
    print(f"fuzzing {', '.join(kinds)} for {a.minutes:g} min (seed {seed})", flush=True)
    with tempfile.TemporaryDirectory(prefix="nsighttc-fuzz-") as tmp:
        while time.monotonic() < deadline:
            kind = rng.choice(kinds)
            case_seed = rng.randrange(2**32)
            names, data = mutate(kind, random.Random(case_seed), seed_bytes(kind), rng.randint(1, 3))
            broken = check(BY_KIND[kind], data, Path(tmp) / str(cases))
            cases += 1
            if broken:
                failures += 1
                print(f"FAIL {kind} {names} case seed {case_seed}: {broken}", flush=True)
    print(f"{cases} cases, {failures} broke a promise (saved in tests/fixtures/bad/)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
