#!/usr/bin/env python3
"""Issue 10: time the CPU steps a first default run makes after its timeline pass, on a recorded trace
(one process, imports excluded): the kernel-event scan and operator scan the replay is planned from, the
full parse, the analysis (with an ncu replay export when given), the JSON, the plots and the Markdown.

    python3 benchmarks/probes/time_default_tail.py TRACE.json[.gz] [NCU_RAW.csv[.gz]] [--repeat 2]
"""
from __future__ import annotations

import argparse
import gzip
import json
import shutil
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("ncu", type=Path, nargs="?")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    from nsighttc.api import analyze
    from nsighttc.parse import kineto_ops, load
    from nsighttc.render import markdown
    from nsighttc.render.plots import _plt, write_plots
    _plt()
    tmp = Path(tempfile.mkdtemp())
    trace = a.trace
    if trace.suffix == ".gz":  # the default run reads the plain file the launcher wrote
        trace = tmp / trace.stem
        with gzip.open(a.trace, "rb") as src, open(trace, "wb") as dst:
            shutil.copyfileobj(src, dst)
    for r in range(a.repeat):
        t = {}
        s = time.perf_counter()
        ks = kineto_ops.kernel_launches(trace)
        t["kernel scan"] = time.perf_counter() - s
        s = time.perf_counter()
        kineto_ops.operators(trace, [k["external"] for k in ks if k.get("external") is not None][:60])
        t["operator scan (60)"] = time.perf_counter() - s
        s = time.perf_counter()
        parsed = [load(trace)] + ([load(a.ncu)] if a.ncu else [])
        t["parse"] = time.perf_counter() - s
        s = time.perf_counter()
        v = analyze(parsed)
        t["analysis"] = time.perf_counter() - s
        s = time.perf_counter()
        doc = v.to_json()
        (tmp / "verdict.json").write_text(json.dumps(doc, indent=2, allow_nan=False))
        t["json"] = time.perf_counter() - s
        s = time.perf_counter()
        made = write_plots(doc, tmp)
        t["plots"] = time.perf_counter() - s
        s = time.perf_counter()
        (tmp / "report.md").write_text(markdown.render(doc, plots=made))
        t["markdown"] = time.perf_counter() - s
        print(f"round {r + 1}: {len(ks)} kernels; " + ", ".join(f"{k} {v:.3f} s" for k, v in t.items()), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
