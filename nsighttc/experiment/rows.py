"""The comparison's rows: a variant's runs against the baseline's (``measure.compare``), its prediction and what
explained it; ``--variant auto``'s best two combined; try.json's schema check and the files written."""
from __future__ import annotations

import json
from pathlib import Path

from . import measure
from .options import AUTOCASTS, TryOptions

def best_two(base: list[dict], runs: dict[str, list[dict]]) -> str | None:
    """The two variants that made the program measurably faster, best first, as one ``A+B`` (not two autocasts)."""
    scored = []
    for n, rs in runs.items():
        if "+" in n or any(r["status"] != "ok" for r in rs):
            continue
        m = measure.compare([b.get("_steps") for b in base], [r.get("_steps") for r in rs])
        if m["change"] == "faster":
            scored.append((m["speedup"], n))
    scored.sort(reverse=True)
    picked: list[str] = []
    for _, n in scored:
        if n in AUTOCASTS and any(p in AUTOCASTS for p in picked):
            continue
        picked.append(n)
        if len(picked) == 2:
            return "+".join(picked)
    return None


def row(name: str, why: str | None, base: list[dict], rs: list[dict], explained: dict | None,
         predicted: dict | None, opts: TryOptions) -> dict:
    failed = next((r for r in rs if r["status"] != "ok"), None)
    row: dict = {"name": name, "status": "failed" if failed else "ok", "chosen_by": why,
                 "applied": next((r["applied"] for r in rs if r.get("applied")), None),
                 "error": failed["error"] if failed else None,
                 "step_ns": None, "speedup": None, "spread": None, "change": None, "rounds": [],
                 "phases": None, "predicted": predicted, "prediction": None, "metric": None,
                 "seconds": round(sum(r["seconds"] for r in rs), 2), "run_dirs": [r["run_dir"] for r in rs],
                 "tc_time_share": None, "by_dtype": None, "gpu_busy_share": None, "verdict": None,
                 "headline_cause": None, "explained": None}
    metrics = [r["metric"] for r in rs if r.get("metric") is not None]
    if metrics:
        row["metric"] = sorted(metrics)[len(metrics) // 2]
    if explained:
        keep = ("tc_time_share", "by_dtype", "tc_verdict", "gpu_busy_share", "verdict", "headline_cause", "run_dir",
                "status", "error", "note")
        row["explained"] = {k: explained.get(k) for k in keep}
        row.update({k: explained.get(k) for k in ("tc_time_share", "by_dtype", "gpu_busy_share", "verdict",
                                                  "headline_cause")})
        if explained.get("note"):
            row["note"] = explained["note"]
    if failed:
        return row
    m = measure.compare([b.get("_steps") for b in base], [r.get("_steps") for r in rs])
    row.update({k: m.get(k) for k in ("step_ns", "speedup", "spread", "change", "rounds")})
    if m.get("note"):
        row["note"] = m["note"]
    steps = rs[0].get("_steps") or {}
    row["phases"] = {p: {k: v[k] for k in ("step_ns", "steps", "warmup", "clock", "first_half_ratio") if k in v}
                     for p, v in steps.items()} or None
    if name == "baseline":
        row["speedup"] = 1.0 if row["step_ns"] else None
    if predicted and row["speedup"]:
        sp = row["speedup"]
        row["prediction"] = "within" if predicted["low"] - 1e-9 <= sp <= predicted["high"] + 1e-9 else \
            ("below" if sp < predicted["low"] else "above")
    return row


def schema_problem(doc: dict) -> str | None:
    """The first violation of ``schema/try-1.json`` as 'at $.path: what', or None."""
    import jsonschema
    from importlib.resources import files
    schema = json.loads(files("nsighttc").joinpath("schema/try-1.json").read_text(encoding="utf-8"))
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    if not errors:
        return None
    first = min(errors, key=lambda e: len(e.absolute_path))
    return f"at {first.json_path}: {first.message[:160]}"


def write(run_dir: Path, doc: dict) -> None:
    from ..render import try_report
    (run_dir / "try.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    plot = try_report.plot(doc, run_dir / "try.png")
    (run_dir / "try.md").write_text(try_report.markdown(doc, plot.name if plot else None))
