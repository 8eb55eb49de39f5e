#!/usr/bin/env python3
"""Issue 30's calibration table, recomputed with this checkout's code from what the H100 runs left in
``reports/try/calibration/`` (``benchmarks/gpu/gpu_try_calibration.sh``): per program and variant, the speed-up measured
from the plain runs' step times (``experiment.measure``) and the range predicted from the baseline's verdict with
the baseline's plain step times (``analysis.variant_gain.for_variant``), and the order of the findings by gain.

    python benchmarks/try_calibration_table.py            # Markdown table on stdout
"""
from __future__ import annotations

import json
import lzma
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CAL = ROOT / "reports" / "try" / "calibration"
CASES = ["mnist", "loader", "resnet", "trainer", "multi"]


def rows(cal: Path = CAL) -> list[dict]:
    from nsighttc.analysis import gain, variant_gain
    from nsighttc.experiment import measure
    out = []
    for case in CASES:
        d = cal / case
        verdict = json.loads(lzma.decompress((d / "baseline_verdict.json.xz").read_bytes()))
        runs: dict[str, list] = {}
        for f in sorted((d / "step_times").glob("*.json")):
            name, _, rnd = f.stem.rpartition("_plain")
            runs.setdefault(name, []).append((int(rnd), measure.read(f)))
        base = [s for _, s in sorted(runs.pop("baseline"))]
        doc = gain.attach(json.loads(json.dumps(verdict)), base[0])
        names = {v["run_dirs"][0].split("/")[0]: v["name"] for v in json.loads((d / "try.json").read_text())["variants"]}
        for key, rs in sorted(runs.items()):
            name = names.get(key, key)
            m = measure.compare(base, [s for _, s in sorted(rs)])
            p = variant_gain.for_variant(doc, name, base[0])
            within = None if not p or not m["speedup"] else p["low"] - 1e-9 <= m["speedup"] <= p["high"] + 1e-9
            out.append({"program": case, "variant": name, "speedup": m["speedup"], "spread": m["spread"],
                        "change": m["change"], "predicted": p, "within": within,
                        "findings": [(f["id"], f["gain"]) for f in doc["findings"] if (f.get("gain") or {}).get("high")]})
    return out


def _rng(p: dict | None) -> str:
    return f"{p['low']:.2f}-{p['high']:.2f}x" if p else "—"


def main() -> int:
    print("| program | variant | measured (spread) | change | predicted | within |")
    print("|---|---|---:|---|---:|---|")
    for r in rows():
        sp = r["spread"] or {}
        p = r["predicted"]
        print(f"| {r['program']} | `{r['variant']}` | {r['speedup']:.2f}x ({sp.get('low', 0):.2f}-{sp.get('high', 0):.2f}) "
              f"| {r['change']} | {_rng(p)} "
              f"| {'yes' if r['within'] else ('**no**' if r['within'] is False else '—')} |")
    print()
    seen = set()
    for r in rows():
        if r["program"] in seen:
            continue
        seen.add(r["program"])
        print(f"- {r['program']}: findings by gain: " + "; ".join(
            f"`{fid}` {g['low']:.2f}-{g['high']:.2f}x" for fid, g in r["findings"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
