"""The comparison's rows: a variant's runs against the baseline's (``measure.compare``), its prediction and what
explained it; ``--variant auto``'s best two combined; try.json's schema check and the files written."""
from __future__ import annotations

import json
import math
from pathlib import Path

from . import measure
from .options import TryOptions

def add_note(row: dict, text: str) -> None:
    """Append ``text`` to a row's note (notes from several sources are kept, joined by "; ")."""
    row["note"] = f"{row['note']}; {text}" if row.get("note") else text


def unchanged_noise(rows: list[dict]) -> tuple[float, str] | None:
    """The widest ratio runs of the unchanged program measured against the baseline (variants that applied nowhere
    ran it as it is), as (ratio, variant), or None. A speed-up inside it is no measurable change: on the H100 an
    unchanged launch-bound generate() loop measured 1.76x against its baseline in one round."""
    seen = [(r["unchanged_run"]["speedup"], r["name"]) for r in rows if (r.get("unchanged_run") or {}).get("speedup")]
    if not seen:
        return None
    return max(seen, key=lambda x: abs(math.log(x[0])))


def apply_noise(rows: list[dict], noise: tuple[float, str]) -> None:
    """Speed-ups of one round inside the unchanged program's own ratio: no measurable change, said with why."""
    ratio, who = noise
    bound = abs(math.log(ratio))
    for r in rows:
        if r["name"] == "baseline" or r["status"] != "ok" or not r.get("speedup") or len(r.get("rounds") or []) != 1:
            continue
        if abs(math.log(r["speedup"])) <= bound and r.get("change") in ("faster", "slower"):
            r["change"] = "no measurable change"
            r["prediction"] = None
            add_note(r, f"inside run-to-run noise: the unchanged program (`{who}` applied nowhere) measured "
                        f"{ratio:.2f}x against the baseline in the same round; --repeat 3 measures the spread")


def ranked(base: list[dict], runs: dict[str, list[dict]]) -> list[tuple[float, str]]:
    """The single variants that made the program measurably faster, fastest first: [(speed-up, name)]."""
    scored = []
    for n, rs in runs.items():
        if "+" in n or n.startswith("patch:") or any(r["status"] != "ok" for r in rs) or \
                not_applied(rs[0].get("applied") if rs else None):
            continue
        m = measure.compare([b.get("_steps") for b in base], [r.get("_steps") for r in rs])
        if m["change"] == "faster":
            scored.append((m["speedup"], n))
    scored.sort(reverse=True)
    return scored


def best_two(base: list[dict], runs: dict[str, list[dict]]) -> str | None:
    """The two variants that made the program measurably faster, best first, as one ``A+B``, never two fixes of one
    cause (``next_cause.FAMILY``: bf16-autocast and tf32 both move the matrix work, and together measured less than
    either alone on an fp32 accumulation loop)."""
    from .next_cause import families
    picked: list[str] = []
    for _, n in ranked(base, runs):
        if any(families(n) & families(p) for p in picked):
            continue
        picked.append(n)
        if len(picked) == 2:
            return "+".join(picked)
    return None


PHASE_KEYS = ("step_ns", "steps", "warmup", "clock", "first_half_ratio", "warmup_ns", "compiled_steps", "inference",
              "data_share", "data_starved")


def not_applied(applied: list[dict] | None) -> str | None:
    """Why a variant changed nothing in its runs (every part of it applied nowhere: ``runtime.variants._applied``), or
    None when it changed something. A combination of which one part applied is measured (the part is noted)."""
    items = [i for i in applied or [] if i.get("variant") != "baseline"]
    if not items or any(i.get("applied", True) for i in items):
        return None
    return "; ".join(f"{i['variant']}: {i.get('not_applied') or 'changed nothing'}" for i in items)


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
    compiled = next(((r.get("_record") or {}).get("compile") for r in rs if (r.get("_record") or {}).get("compile")),
                    None)
    if compiled:  # compile and capture are warm-up: their time is reported apart, never in the step
        row["compile"] = compiled
    m = measure.compare([b.get("_steps") for b in base], [r.get("_steps") for r in rs])
    unchanged = not_applied(row["applied"]) if name != "baseline" else None
    if unchanged:
        # the variant changed nothing: its runs were the program as it is, so what they measured against the
        # baseline is how far two runs of one program land apart, never a speed-up of the variant
        row.update({"status": "not applied", "not_applied": unchanged, "predicted": None})
        if m.get("speedup"):
            row["unchanged_run"] = {"speedup": m["speedup"], "rounds": len(m["rounds"])}
        return row
    held = held_note(row["applied"])
    if held:
        add_note(row, held)
    idle_parts = [i for i in row["applied"] or [] if i.get("applied") is False]
    if idle_parts:  # a combination of which a part changed nothing: measured, the part named
        add_note(row, "; ".join(f"`{i['variant']}` applied nowhere ({i.get('not_applied')})" for i in idle_parts))
    row.update({k: m.get(k) for k in ("step_ns", "speedup", "spread", "change", "rounds", "clear")})
    if m.get("whole_loop"):
        row["whole_loop"] = m["whole_loop"]
        add_note(row, m["whole_loop"])
    if m.get("note") and name != "baseline":  # (the baseline against itself holds 1.00x by construction)
        add_note(row, m["note"])
    steps = rs[0].get("_steps") or {}
    row["phases"] = {p: {k: v[k] for k in PHASE_KEYS if k in v} for p, v in steps.items()} or None
    gen = [ph["inference"] for r in rs for ph in (r.get("_steps") or {}).values() if ph.get("inference")]
    if gen:  # a generation loop: its serving numbers, the median over the rounds
        row["inference"] = {k: measure.median([g[k] for g in gen if g.get(k) is not None])
                            for k in ("tokens_per_s", "ttft_ns", "tpot_ns")}
        row["inference"]["requests"] = sum(g["requests"] for g in gen)
    recompiled = sum(ph.get("compiled_steps", 0) for r in rs for ph in (r.get("_steps") or {}).values())
    if recompiled:
        graphs = (compiled or {}).get("graphs") or 0
        if graphs > 1:
            said = (f"torch.compile compiled again during {recompiled} of the timed steps ({graphs} graphs in all): it "
                    "kept recompiling (changing shapes or guards; `TORCH_LOGS=recompiles` says why), so its step "
                    "holds compile time")
        else:  # dynamo's start callback also fires where nothing new is compiled (H100, transformers' static cache:
            # each request's first decode call, 15-23 ms against 3.5 ms, with one graph compiled in the whole run)
            said = (f"torch.compile's compile callback fired during {recompiled} of the timed steps, though the run "
                    f"compiled {graphs or 'no'} graph in all: no recompilation, but their time (a re-capture or a "
                    "cache check) is part of the step")
        add_note(row, said)
    if name == "baseline":
        row["speedup"] = 1.0 if row["step_ns"] else None
    if predicted and row["speedup"]:
        # outside only where the measurement's spread is: a speed-up whose interval reaches the range is within it
        sp = row["speedup"]
        spread = row.get("spread") or {}
        lo, hi = min(sp, spread.get("low") or sp), max(sp, spread.get("high") or sp)
        row["prediction"] = "within" if lo <= predicted["high"] + 1e-9 and hi >= predicted["low"] - 1e-9 else \
            ("below" if hi < predicted["low"] else "above")
    return row


def held_note(applied: list[dict] | None) -> str | None:
    """Where the program set back what a variant holds (``runtime.held_flags``): the line a user's edit would change."""
    said = []
    for i in applied or []:
        for what, at in ((i.get("set") or {}).get("held") or {}).items():
            where = f" at {at['where']}" if at.get("where") else ""
            times = f" ({at['times']} times)" if at.get("times", 1) > 1 else ""
            said.append(f"the program sets `{what}` itself{where}{times}; `{i['variant']}` held its own value there, "
                        "as an edit of that line would")
    return "; ".join(said) or None


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
