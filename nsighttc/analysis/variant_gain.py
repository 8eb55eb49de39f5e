"""What a ``try`` variant is predicted to buy: the findings it addresses (``VARIANT_FINDING``) removed together with
``gain``'s estimate, and whether the recording shows what it adopts in use already (then nothing is predicted, and
``--variant auto`` does not offer it)."""
from __future__ import annotations

from .gain import _estimate, scopes

# ``nsighttc try`` variants -> (the finding they address, the dtype they move its work to)
VARIANT_FINDING = {"tf32": [("fp32-matmul-on-cuda-cores", "tf32")],
                   "bf16-autocast": [("fp32-matmul-on-cuda-cores", "bf16"), ("tf32-tensor-core-work", "bf16")],
                   "fp16-autocast": [("fp32-matmul-on-cuda-cores", "fp16"), ("tf32-tensor-core-work", "fp16")],
                   "workers=N": [("gpu-starved-by-data-loading", None)],
                   "pin-memory": [("pageable-host-copies", None)],
                   # CUDA graphs replay a call's kernels without the host launching them: the launch gaps go
                   "compile-reduce-overhead": [("launch-bound", None), ("host-bound-model-code", None)],
                   "static-cache": [("launch-bound", None)], "compile": [("host-bound-model-code", None)],
                   "cuda-graphs": [("launch-bound", None)],
                   "channels-last": [("nchw-layout-transposes", None)], "pad-buckets": [("shape-churn", None)]}
AUTOCAST = ("bf16-autocast", "fp16-autocast")
# variants that compile (transformers compiles a static cache's decoding step itself): Inductor fuses the kernels
# that are not matrix work, so their prediction's high end lets that GPU time go too. A static cache on the H100 ran
# the 16-layer generate() loop's step in 3.03 ms (reports/inference, call52: 6.30x, above the
# launch-bound range of 1.57x-3.69x, which kept all of the eager GPU work).
COMPILING = ("compile", "compile-reduce-overhead", "static-cache")
# variants that adopt what the recording may show in use already (``timeline.in_use``): nothing is predicted for them
# then, and ``try --variant auto`` does not offer them
VARIANT_IN_USE = {"static-cache": "cuda_graphs", "compile-reduce-overhead": "cuda_graphs", "compile": "torch_compile",
                  "cuda-graphs": "cuda_graphs"}


def adopted(doc: dict, variant: str) -> bool:
    """Whether the recording shows what ``variant`` adopts in use already where its findings are: CUDA graphs
    replayed in every scope of the findings it addresses (``timeline.in_use``), or torch.compile anywhere."""
    from .timeline.in_use import graphed
    in_use = (doc.get("timeline") or {}).get("in_use") or {}
    what = VARIANT_IN_USE.get(variant)
    if what is None or what not in in_use:
        return False
    if what != "cuda_graphs":
        return True
    found = {f["id"]: f for f in doc.get("findings") or []}
    where = [s for fid, _ in VARIANT_FINDING.get(variant, []) if fid in found
             for s in (found[fid].get("per_step_ns") or {})]  # (the findings' scopes: not ``gain.scopes``)
    return graphed(in_use, where)


def for_variant(doc: dict, variant: str, plain: dict[str, dict] | None = None) -> dict | None:
    """The predicted speed-up of a ``try`` variant (``A+B``: the findings of both, removed together), or None when
    no finding of the verdict is what it fixes. tf32 together with an autocast: the autocast's dtype counts."""
    ss = scopes(doc, plain)
    found = {f["id"]: f for f in doc.get("findings") or []}
    parts = variant.split("+")
    if all(adopted(doc, p) for p in parts):
        return None  # what it adopts is in use already: the findings' time is what is left, not its gain
    wanted: dict[str, str | None] = {}
    workers = None
    for part in parts:
        key = "workers=N" if part.startswith("workers=") else part
        if key == "workers=N":
            workers = int(part.split("=", 1)[1])
        for fid, dtype in VARIANT_FINDING.get(key, []):
            if fid in found and (fid not in wanted or part in AUTOCAST):
                wanted[fid] = dtype
    if not wanted:
        return None
    fused = None
    if any(p in COMPILING for p in parts):
        share = (doc.get("tensor_cores") or {}).get("matrix_time_share")
        fused = float(share) if share else None
    g = _estimate([(found[fid], dtype) for fid, dtype in wanted.items()], doc, ss, workers, fused)
    if not g.get("high"):
        return None
    return {"low": g["low"], "high": g["high"], "findings": list(wanted), "basis": g["basis"]}
