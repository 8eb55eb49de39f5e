#!/usr/bin/env python3
"""Regenerate ``nsighttc/data/known_kernels.json``: every kernel name whose Tensor Core use Nsight Compute measured,
per compute capability (``nsighttc/analysis/known_kernels.py`` says how names-only runs use it).

Sources, all from ncu on the lent GPUs (nothing typed in):
- evidence caches (``<cache>/evidence/<gpu>--<driver>.json``, as ``nsighttc profile`` writes them; the runs' copies
  under ``reports/``),
- committed verdicts (``verdict.json``, gzip- or xz-compressed or not) whose kernels carry hardware evidence,
- ncu exports (raw or details CSV, ``.ncu-rep``) given as ``PATH=GPU NAME`` (an export does not name its GPU).

A name two measurements disagree on (yes against no) is left out and listed; a dtype one measurement names and
another leaves open is kept. Usage:

    python3 benchmarks/make_known_kernels.py                 # the default sources below -> the package's table
    python3 benchmarks/make_known_kernels.py --check         # exit 1 if the shipped table is not what they give
    python3 benchmarks/make_known_kernels.py --out T.json reports/ my_cache.json 'run.csv=NVIDIA H100 80GB HBM3'
"""
from __future__ import annotations

import argparse
import gzip
import lzma
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Compute capability per GPU model, for evidence caches (which name the GPU, not its architecture).
CC_OF_GPU = (("H100", "9.0"), ("H200", "9.0"), ("GH200", "9.0"), ("H800", "9.0"), ("H20", "9.0"),
             ("B200", "10.0"), ("B100", "10.0"), ("GB200", "10.0"), ("A100", "8.0"), ("A800", "8.0"),
             ("A30", "8.0"), ("A10", "8.6"), ("A40", "8.6"), ("RTX 30", "8.6"), ("L4", "8.9"), ("L40", "8.9"),
             ("RTX 40", "8.9"), ("V100", "7.0"), ("T4", "7.5"))

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
DEFAULT_SOURCES = [
    "reports",  # evidence caches and verdicts of the runs on the lent H100 / H200
    f"tests/fixtures/h100_multi_phase_replay_ncu_raw.csv.gz={H100}",
    f"tests/fixtures/h100_resnet_amp_replay_ncu_raw.csv.gz={H100}",
    f"tests/fixtures/h100_resnet_amp_replay_warm_ncu_raw.csv.gz={H100}",
    f"tests/fixtures/h100_foreach_norm_ncu_raw.csv.gz={H100}",
    f"tests/fixtures/h100_ncu_raw_one_pass_set.csv.gz={H100}",
    f"tests/fixtures/ncu_raw_tensor_metrics.csv.gz={H200}",
    f"tests/fixtures/ncu_details_tensor_metrics.csv.xz={H200}",
    f"nsighttc/data/h200_probe_ncu_raw.csv.gz={H200}",
]
OUT = ROOT / "nsighttc" / "data" / "known_kernels.json"


def cc_of(gpu: str | None) -> str | None:
    g = str(gpu or "")
    return next((cc for model, cc in CC_OF_GPU if model in g), None)


def _load(path: Path):
    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def from_cache(path: Path) -> list[tuple]:
    doc = _load(path)
    gpu = doc.get("gpu")
    return [(e["name"], e.get("tensor_core"), e.get("dtype"), gpu, cc_of(gpu), str(path))
            for e in doc.get("kernels", {}).values()
            if e.get("name") and not e.get("unmeasured") and e.get("tensor_core") is not None]


def from_verdict(path: Path) -> list[tuple]:
    doc = _load(path)
    dev = doc.get("device") or {}
    gpus = [g.get("name") for g in (doc.get("provenance") or {}).get("gpu", []) if g.get("name")]
    gpu = gpus[0] if gpus else dev.get("name")
    cc = dev.get("compute_capability") or cc_of(gpu)
    return [(k["name"], k.get("tensor_core"), k.get("dtype"), gpu, cc, str(path)) for k in doc.get("kernels", [])
            if k.get("evidence") == "hardware" and k.get("tensor_core") is not None] if gpu else []


def from_export(path: Path, gpu: str) -> list[tuple]:
    from nsighttc import api
    v = api.analyze([path])
    k = v.kernels[v.kernels["evidence"] == "hardware"]
    cc = (v.device or {}).get("compute_capability") or cc_of(gpu)
    return [(r.name, r.tensor_core, r.dtype, gpu, cc, str(path)) for r in k.itertuples()
            if r.tensor_core is not None]


def gather(sources: list[str]) -> tuple[list[tuple], list[str]]:
    rows, used = [], []
    for src in sources:
        path_text, _, gpu = src.partition("=")
        p = Path(path_text) if Path(path_text).is_absolute() else ROOT / path_text
        if p.is_dir():
            for f in sorted(p.rglob("*.json")) + sorted(p.rglob("*.json.gz")) + sorted(p.rglob("*.json.xz")):
                rel = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f
                if f.parent.name == "evidence":
                    got = from_cache(f)
                elif f.name.startswith("verdict"):
                    try:
                        got = from_verdict(f)
                    except (ValueError, OSError):
                        continue
                else:
                    continue
                if got:
                    rows += got
                    used.append(str(rel))
        elif p.exists():
            rel = p.relative_to(ROOT) if p.is_relative_to(ROOT) else p
            if p.parent.name == "evidence":
                rows += from_cache(p)
            elif not gpu:
                raise SystemExit(f"error: {src}: an ncu export does not name its GPU; give it as PATH=GPU NAME")
            else:
                rows += from_export(p, gpu)
            used.append(str(rel))
        else:
            print(f"note: {src}: not found, skipped", file=sys.stderr)
    return rows, used


def build(rows: list[tuple], used: list[str]) -> tuple[dict, list[str]]:
    from nsighttc.analysis.known_kernels import SCHEMA
    from nsighttc.analysis.kernel_keys import kernel_key
    by: dict[tuple, dict] = {}
    for name, tc, dtype, gpu, cc, src in rows:
        if not cc:
            continue
        e = by.setdefault((cc, kernel_key(name)), {"tc": set(), "dtype": set(), "gpu": set(), "name": name})
        e["tc"].add(bool(tc))
        if dtype:
            e["dtype"].add(dtype)
        e["gpu"].add(gpu)
    archs: dict[str, dict] = {}
    conflicts = []
    for (cc, key), e in sorted(by.items()):
        if len(e["tc"]) > 1:
            conflicts.append(f"{cc} {e['name'][:120]}: measured both on and off the Tensor Cores")
            continue
        tc = e["tc"].pop()
        dtype = next(iter(e["dtype"])) if tc and len(e["dtype"]) == 1 else None
        a = archs.setdefault(cc, {"gpus": set(), "kernels": {}})
        gpu = sorted(e["gpu"])[0]
        a["gpus"].add(gpu)
        a["kernels"][key] = [tc, dtype, gpu]
    doc = {"schema": SCHEMA,
           "about": "kernel names whose Tensor Core use Nsight Compute measured, per compute capability: "
                    "[tensor_core, dtype, GPU]; made by benchmarks/make_known_kernels.py",
           "sources": sorted(set(used)),
           "archs": {cc: {"gpus": sorted(a["gpus"]), "kernels": dict(sorted(a["kernels"].items()))}
                     for cc, a in sorted(archs.items())}}
    return doc, conflicts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sources", nargs="*", help="folders, evidence caches, verdicts, or PATH=GPU for an ncu export "
                                               "(default: the repository's own measurements)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    a = ap.parse_args(argv)
    rows, used = gather(a.sources or DEFAULT_SOURCES)
    doc, conflicts = build(rows, used)
    for c in conflicts:
        print(f"left out: {c}", file=sys.stderr)
    text = json.dumps(doc, indent=0, sort_keys=False) + "\n"
    n = {cc: len(v["kernels"]) for cc, v in doc["archs"].items()}
    if a.check:
        same = a.out.exists() and json.loads(a.out.read_text()) == json.loads(text)
        print(f"{a.out}: {'up to date' if same else 'differs from what the sources give (new measurements in reports/ or the fixtures): run python3 benchmarks/make_known_kernels.py'} ({n})")
        return 0 if same else 1
    a.out.write_text(text)
    print(f"wrote {a.out}: {n} kernel names from {len(doc['sources'])} sources, {len(conflicts)} left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
