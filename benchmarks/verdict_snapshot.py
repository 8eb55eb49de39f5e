"""Verdict JSON of every recorded fixture, one file each, for "no behaviour change" checks across a change.

    python benchmarks/verdict_snapshot.py OUT_DIR            # analyse every fixture, write OUT_DIR/<name>.json
    python benchmarks/verdict_snapshot.py --compare A B      # which snapshots differ (exit 1 if any)

Run it on the commit before a change and on the change, then compare: a refactoring must leave every document
byte-identical (issue 32). Inputs: each timeline and counter recording in tests/fixtures/ alone, the nsys
export with the ncu CSV merged in, every DDP job directory (several ranks), and the recordings of unannotated
programs and of windows (tests/fixtures/unmarked/, window/).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIX = HERE.parent / "tests" / "fixtures"
sys.path.insert(0, str(HERE.parent))


def cases() -> dict[str, list[Path]]:
    singles = sorted(p for p in FIX.glob("*") if p.is_file() and not p.name.startswith(("README", "replay_ops")))
    out = {p.name: [p] for p in singles}
    out["nsys+ncu"] = [FIX.parents[1] / "nsighttc" / "data" / "h200_loops_nsys.sqlite.gz", FIX / "ncu_raw_tensor_metrics.csv.gz"]
    for d in sorted(p for p in (FIX / "ddp").iterdir() if not p.name.endswith(".md")):
        out[f"ddp_{d.name}"] = [d]
    # the unannotated programs' recordings and the windows of steady steps (issues 28, 29)
    for sub in ("unmarked", "window"):
        for p in sorted((FIX / sub).glob("*.gz")):
            out[f"{sub}_{p.name}"] = [p]
    return out


def snapshot(dest: Path) -> None:
    import nsighttc
    dest.mkdir(parents=True, exist_ok=True)
    for name, paths in cases().items():
        try:
            doc = nsighttc.analyze(paths, jobs=1).to_json()
            text = json.dumps(doc, indent=2, sort_keys=False, allow_nan=False)
        except Exception as exc:  # noqa: BLE001 - a fixture that fails is part of the snapshot too
            text = f"error: {type(exc).__name__}: {exc}"
        (dest / f"{name}.json").write_text(text + "\n")
        print(f"{name}: {len(text):,} chars", file=sys.stderr)


def compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.glob("*.json")} | {p.name for p in b.glob("*.json")})
    differ = [n for n in names if not (a / n).exists() or not (b / n).exists()
              or (a / n).read_bytes() != (b / n).read_bytes()]
    for n in names:
        print(f"{'DIFFERS' if n in differ else 'same   '} {n}")
    print(f"{len(names) - len(differ)} of {len(names)} byte-identical")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    ns = ap.parse_args()
    if ns.compare:
        return compare(*ns.compare)
    if ns.out is None:
        ap.error("give OUT_DIR or --compare A B")
    snapshot(ns.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
