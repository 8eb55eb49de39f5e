"""Turn the GPU wrapper runs (benchmarks/gpu/gpu_wrappers.sh tarballs, extracted) into reports/<wrapper>/<variant>/.

Each variant directory holds plain.txt (the wrapper run without a profiler), command.txt, and the run
directory of `nsighttc profile --timeline` with nsys.sqlite.gz and ncu_raw.csv.gz. The verdict is
recomputed here from those exports with the current code (provenance from the GPU run is kept), plots
are drawn, and reports/wrappers.json collects one row per variant for reports/README.md.
Run: python benchmarks/reanalyse_wrapper_runs.py EXTRACTED_DIR
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VARIANTS = {
    "vgg16_fp32": ("vgg16", "fp32_batch1"), "vgg16_fp16": ("vgg16", "fp16_batch1"),
    "vgg16_fp16_torchscript": ("vgg16", "fp16_batch1_torchscript"), "gemm_tflops": ("gemm_tflops", "all_precisions"),
    "reduced_precision": ("reduced_precision", "on_and_off"), "mnist_small_fp32": ("mnist_mlp", "small_fp32"),
    "mnist_small_fp16": ("mnist_mlp", "small_fp16"), "mnist_large_fp32": ("mnist_mlp", "large_fp32"),
    "mnist_large_fp16": ("mnist_mlp", "large_fp16"), "dataloader_w0_fp16pre": ("dataloader_bound", "workers0_fp16_preprocess"),
    "dataloader_w8_pinned": ("dataloader_bound", "workers8_pin_memory"), "resnet50_fp32": ("resnet_amp", "fp32"),
    "resnet50_amp": ("resnet_amp", "amp"), "resnet50_amp_channels_last": ("resnet_amp", "amp_channels_last"),
}


def main() -> int:
    import nsighttc
    from nsighttc.render import markdown
    from nsighttc.render.plots import write_plots
    src = Path(sys.argv[1])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rows = []
    for name, (wrapper, variant) in VARIANTS.items():
        vdir = src / name
        runs = sorted((vdir / "runs").glob("*/"))
        if not runs:
            print(f"{name}: no run directory", file=sys.stderr)
            continue
        run = runs[-1]
        inputs = [p for p in (run / "nsys.sqlite.gz", run / "ncu_raw.csv.gz") if p.exists()]
        v = nsighttc.analyze(inputs)
        gpu_doc = json.loads((run / "verdict.json").read_text())
        prov = gpu_doc.get("provenance", {})
        prov["reanalysed"] = (f"verdict recomputed from this run's exports (nsys.sqlite, ncu raw page) with nsighttc "
                              f"at commit {commit}: benchmarks/reanalyse_wrapper_runs.py")
        v.provenance = prov
        doc = v.to_json()
        for i in doc["inputs"]:
            i["path"] = Path(i["path"]).name
        out = ROOT / "reports" / wrapper / variant
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        (out / "verdict.json").write_text(json.dumps(doc, indent=2) + "\n")
        made = write_plots(doc, out)
        cmd = (vdir / "command.txt").read_text().strip()
        plain = [ln for ln in (vdir / "plain.txt").read_text().splitlines() if ln.strip()]
        header = (f"<sub>GPU: {', '.join(g['name'] for g in prov.get('gpu', []))}; tools: "
                  f"{', '.join(f'{k} {v}' for k, v in prov.get('versions', {}).items())}; {cmd}; "
                  f"plain run: `{plain[-1] if plain else ''}`</sub>\n\n")
        (out / "report.md").write_text(header + markdown.render(doc, plots=made))
        tc, tl = doc["tensor_cores"], doc.get("timeline") or {}
        rows.append({"wrapper": wrapper, "variant": variant, "command": cmd, "plain": plain[-3:],
                     "tc_verdict": tc["verdict"], "tc_evidence": tc["evidence"], "tc_share": tc["tc_time_share"],
                     "by_dtype": tc["by_dtype"], "timeline_verdict": tl.get("verdict"),
                     "gpu_busy_share": tl.get("gpu_busy_share"), "basis": tl.get("basis"),
                     "headline_cause": tl.get("headline_cause"), "findings": [f["id"] for f in doc["findings"]],
                     "gpu": [g["name"] for g in prov.get("gpu", [])]})
        print(f"{wrapper}/{variant}: TC {tc['verdict']} ({tc['evidence']}, {100 * tc['tc_time_share']:.0f}%), "
              f"timeline {tl.get('verdict')} busy {100 * (tl.get('gpu_busy_share') or 0):.0f}%")
    (ROOT / "reports" / "wrappers.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
