"""Verdict JSON of every recorded fixture, one file each, for "no behaviour change" checks across a change.

    python benchmarks/verdict_snapshot.py OUT_DIR            # analyse every fixture, write OUT_DIR/<name>.json
    python benchmarks/verdict_snapshot.py OUT_DIR --more DIR # and every trace under DIR (recordings made elsewhere)
    python benchmarks/verdict_snapshot.py --compare A B      # which snapshots differ (exit 1 if any)

Run it on the commit before a change and on the change, then compare: a refactoring must leave every document
byte-identical (issue 32). Inputs: each timeline and counter recording in tests/fixtures/ alone, the nsys
export with the ncu CSV merged in, every DDP job directory (several ranks), and the recordings of unannotated
programs and of windows (tests/fixtures/unmarked/, window/), the step, inference, FSDP and foreign recordings
(steps/, inference/, fsdp/, foreign/), and with ``--more`` each trace under other directories (HolisticTraceAnalysis's
test data, ../shared/fixtures/hta), one case each.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIX = HERE.parent / "tests" / "fixtures"
sys.path.insert(0, str(HERE.parent))


TRACES = ("*.json", "*.json.gz", "*.json.xz", "*.sqlite", "*.sqlite.gz", "*.sqlite.xz")


def cases(more: list[Path] = ()) -> dict[str, list[Path]]:
    singles = sorted(p for p in FIX.glob("*") if p.is_file() and not p.name.startswith(("README", "replay_ops")))
    out = {p.name: [p] for p in singles}
    out["nsys+ncu"] = [FIX.parents[1] / "nsighttc" / "data" / "h200_loops_nsys.sqlite.xz", FIX / "ncu_raw_tensor_metrics.csv.gz"]
    for d in sorted(p for p in (FIX / "ddp").iterdir() if not p.name.endswith(".md")):
        out[f"ddp_{d.name}"] = [d]
    # the unannotated programs' recordings and the windows of steady steps (issues 28, 29)
    for sub in ("unmarked", "window"):
        for p in sorted(q for q in (FIX / sub).iterdir() if q.name.endswith((".gz", ".xz"))):
            out[f"{sub}_{p.name}"] = [p]
    for sub in ("steps", "inference", "foreign"):
        for p in sorted((FIX / sub).glob("*.xz")):
            out[f"{sub}_{p.name}"] = [p]
    for d in sorted(p for p in (FIX / "fsdp").iterdir() if p.is_dir()):
        out[f"fsdp_{d.name}"] = [d]
    for root in more:
        for p in sorted(q for pat in TRACES for q in root.rglob(pat)):
            out[f"more_{str(p.relative_to(root)).replace('/', '_')}"] = [p]
    return out


def snapshot(dest: Path, more: list[Path] = ()) -> None:
    import nsighttc
    dest.mkdir(parents=True, exist_ok=True)
    for name, paths in cases(more).items():
        try:
            doc = nsighttc.analyze(paths, jobs=1).to_json()
            text = json.dumps(doc, indent=2, sort_keys=False, allow_nan=False)
        except Exception as exc:  # noqa: BLE001 - a fixture that fails is part of the snapshot too
            text = f"error: {type(exc).__name__}: {exc}"
        (dest / f"{name}.json").write_text(text + "\n")
        print(f"{name}: {len(text):,} chars", file=sys.stderr)


IGNORED = ("inputs", "provenance")  # where the files lay: differs between checkouts, not between verdicts


def _doc(path: Path):
    """The snapshot less ``IGNORED``, with the checkout's folder (the fixtures' parent's parent) cut from every path."""
    text = path.read_text()
    if text.startswith("error:"):
        return re.sub(r"\S*/tests/fixtures/", "tests/fixtures/", text)
    doc = json.loads(re.sub(r'"[^"]*/tests/fixtures/', '"tests/fixtures/', text))
    return {k: v for k, v in doc.items() if k not in IGNORED}


def compare(a: Path, b: Path) -> int:
    """Which snapshots differ, their inputs' paths and provenance aside; for each that does, its top-level keys that
    differ."""
    names = sorted({p.name for p in a.glob("*.json")} | {p.name for p in b.glob("*.json")})
    differ = 0
    for n in names:
        if not (a / n).exists() or not (b / n).exists():
            print(f"ONLY IN {'A' if (a / n).exists() else 'B'} {n}")
            differ += 1
            continue
        x, y = _doc(a / n), _doc(b / n)
        if x == y:
            print(f"same    {n}")
            continue
        differ += 1
        keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k)) if isinstance(x, dict) and \
            isinstance(y, dict) else ["(error)"]
        print(f"DIFFERS {n}: {', '.join(keys)}")
    print(f"{len(names) - differ} of {len(names)} the same")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    ap.add_argument("--more", action="append", type=Path, default=[], metavar="DIR",
                    help="also every trace under DIR, one case each (repeatable)")
    ns = ap.parse_args()
    if ns.compare:
        return compare(*ns.compare)
    if ns.out is None:
        ap.error("give OUT_DIR or --compare A B")
    snapshot(ns.out, ns.more)
    return 0


if __name__ == "__main__":
    sys.exit(main())
