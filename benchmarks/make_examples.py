"""Regenerate reports/examples/: one rendered report (Markdown + plots + verdict.json) per test fixture.
Run: python benchmarks/make_examples.py"""
from __future__ import annotations

import json
import lzma
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
F = ROOT / "tests" / "fixtures"


def main() -> int:
    import nsighttc
    from nsighttc.render import markdown
    from nsighttc.render.plots import write_plots
    out = ROOT / "reports" / "examples"
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "nsys_mm_relu_loops.sqlite"
        db.write_bytes(lzma.open(F.parents[1] / "nsighttc" / "data" / "h200_loops_nsys.sqlite.xz").read())
        cases = {
            "ncu_raw_tensor_metrics": [F / "ncu_raw_tensor_metrics.csv.gz"],
            "ncu_details_tensor_metrics": [F / "ncu_details_tensor_metrics.csv.xz"],
            "ncu_details_vgg16_fp16_basic_set": [F / "ncu_details_vgg16_fp16_basic_set.csv.xz"],
            "ncu_rep_mm_fp16_fp32": [F / "mm_fp16_fp32.ncu-rep.xz"],
            "nsys_mm_relu_loops": [db],
            "kineto_trace_cases_loops": [F / "kineto_trace_cases_loops.json.xz"],
            "nsys_plus_ncu_merged": [db, F / "ncu_raw_tensor_metrics.csv.gz"],
        }
        for name, inputs in cases.items():
            d = out / name
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            doc = nsighttc.analyze(inputs).to_json()
            for i in doc["inputs"]:  # keep the committed files free of this machine's paths
                i["path"] = Path(i["path"]).name
            (d / "verdict.json").write_text(json.dumps(doc, indent=2) + "\n")
            made = write_plots(doc, d)
            markdown.write_report(doc, d / "report.md", plots=made)  # kernels.md / ranges.md beside it
            print(f"{name}: {doc['tensor_cores']['verdict']}, timeline {(doc.get('timeline') or {}).get('verdict')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
