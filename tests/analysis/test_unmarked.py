"""Programs that mark nothing, recorded on an H100 by `nsighttc profile --engine torch|nsys` (the step hooks in the
launcher; benchmarks/gpu/gpu_unmarked.sh parts b and d, tests/fixtures/unmarked/README.md): a transformers Trainer
fine-tune, a torch.compile loop, a Lightning module, a DataLoader-bound loop. What is expected is read from the raw
recordings, not from the analysis: the optimizer steps the program made (torch.profiler's own `Optimizer.step#`
ranges; in nsys, the optimizer hook's NVTX ranges counted by SQL), the steady GPU-busy share from the raw GPU
intervals merged here in plain Python."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import nsighttc
from nsighttc.render.markdown import headline_lines

from .test_steps import _busy_share
from tests.conftest import fixture_open

U = Path(__file__).resolve().parents[1] / "fixtures" / "unmarked"
TORCH = ["trainer", "compile", "lightning", "dataloader"]
NSYS = ["trainer", "compile", "dataloader"]
STEPS = {"trainer": 12, "compile": 12, "lightning": 16, "dataloader": 12}  # each program's own --steps


def _torch_raw(name: str):
    doc = json.load(fixture_open(U / f"{name}_torch.json.xz"))
    ev = doc["traceEvents"]
    gpu = [(e["ts"] * 1e3, (e["ts"] + e["dur"]) * 1e3) for e in ev
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X"]
    optimizer_steps = sum(1 for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.step#"))
    step_starts = sorted(e["ts"] * 1e3 for e in ev if e.get("cat") == "user_annotation" and e["name"] == "nsighttc.step")
    return gpu, optimizer_steps, step_starts


def _nsys_raw(name: str, tmp_path: Path):
    db = tmp_path / f"{name}.sqlite"
    with fixture_open(U / f"{name}_nsys.sqlite.xz", "rb") as a, db.open("wb") as b:
        shutil.copyfileobj(a, b)
    con = sqlite3.connect(db)
    text = "COALESCE(text, (SELECT value FROM StringIds WHERE id = textId))"
    optimizer_steps = con.execute(f"SELECT COUNT(*) FROM NVTX_EVENTS WHERE {text} = 'nsighttc.optimizer'").fetchone()[0]
    step_starts = sorted(r[0] for r in con.execute(f"SELECT start FROM NVTX_EVENTS WHERE {text} = 'nsighttc.step'"))
    gpu = [tuple(r) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
           for r in con.execute(f"SELECT start, end FROM {t}")]
    con.close()
    return db, gpu, optimizer_steps, step_starts


def _check(doc: dict, gpu, optimizer_steps: int, step_starts: list[float], program: str):
    tl = doc["timeline"]
    steps = tl["steps"]
    assert steps["source"] == "hook" and steps["name"] == "optimizer steps"
    # one step per optimizer step the program made, and that is what it was asked for; the warm-up is named
    assert optimizer_steps == STEPS[program] and steps["count"] == optimizer_steps
    assert steps["warmup_steps"] >= 1 and all(steps["warmup_reasons"])
    # the steady GPU-busy share, against the raw intervals from the first steady step's start to the span's end
    lo, hi = steps["steady_window_ns"]
    assert lo == pytest.approx(step_starts[steps["warmup_steps"]], abs=1e3)
    assert steps["steady_gpu_busy_share"] == pytest.approx(_busy_share(gpu, lo, hi), abs=0.05)
    # start-up is reported, the whole process is not the headline, and a slow step names its steady cause
    st = tl["startup"]
    assert st["seconds"] > 0 and 0 < st["first_step_ns"] <= st["seconds"] * 1e9
    assert tl["basis"] == "steady steps, time-weighted" and tl["gpu_busy_share"] == steps["steady_gpu_busy_share"]
    lines = headline_lines(doc)
    assert any(line.startswith("Start-up ") and "nsighttc's hooks" in line for line in lines)
    if tl["verdict"] in ("cpu-bound", "mixed"):
        assert tl["headline_cause"] and tl["headline_cause"] in lines[1]
    return tl


@pytest.mark.parametrize("program", TORCH)
def test_torch_profiler_recordings_of_unmarked_programs(program):
    gpu, optimizer_steps, step_starts = _torch_raw(program)
    doc = nsighttc.analyze([U / f"{program}_torch.json.xz"]).to_json()
    tl = _check(doc, gpu, optimizer_steps, step_starts, program)
    if program == "compile":  # the first step compiled; start-up says how long
        assert "torch.compile" in tl["steps"]["warmup_reasons"][0] and tl["startup"]["compile_seconds"] > 1
        assert not any("compile_id=" in r["name"] or "CompiledFxGraph" in r["name"] for r in doc["ranges"])
    if program == "dataloader":  # the DataLoader's fetch is the cause, found without any range of the program's
        assert "DataLoader" in tl["headline_cause"] and tl["verdict"] == "cpu-bound"


@pytest.mark.parametrize("program", NSYS)
def test_nsys_recordings_of_unmarked_programs(program, tmp_path):
    db, gpu, optimizer_steps, step_starts = _nsys_raw(program, tmp_path)
    doc = nsighttc.analyze([db]).to_json()
    tl = _check(doc, gpu, optimizer_steps, step_starts, program)
    if program == "dataloader":  # nsys has no DataLoader range of its own: the hooks' fetch mark is the range
        assert "nsighttc.data" in tl["headline_cause"]
    if program == "compile":
        assert tl["startup"]["compile_seconds"] > 1


def test_the_same_program_by_both_engines_gets_the_same_steps(tmp_path):
    """The Trainer fine-tune recorded by torch.profiler and by nsys (two runs): the same number of steps, step
    times within 15% (the profilers' own overhead differs)."""
    db, *_ = _nsys_raw("trainer", tmp_path)
    a = nsighttc.analyze([U / "trainer_torch.json.xz"]).to_json()["timeline"]["steps"]
    b = nsighttc.analyze([db]).to_json()["timeline"]["steps"]
    assert a["count"] == b["count"] == 12
    assert a["median_iteration_ns"] == pytest.approx(b["median_iteration_ns"], rel=0.15)


def test_an_unmarked_ddp_job_with_an_uneven_rank(tmp_path):
    """`torchrun --nproc_per_node 2 wrappers/ddp_train.py --no-annotate --uneven-rank 1 --uneven-batch 256` on two
    H200s (benchmarks/gpu/gpu_unmarked.sh part c): no range, no sleep; rank 1 trains on a batch 4x larger. Each rank
    gets its optimizer steps from the hooks (20: GradScaler skipped 3 of the 23 iterations' optimizer steps while
    it calibrated, and those iterations belong to the next step), and rank 1 is named the straggler for its longer
    GPU compute."""
    ranks = U / "ddp_uneven"
    expected = {}
    for r in ("rank0", "rank1"):
        db = tmp_path / f"{r}.sqlite"
        with fixture_open(ranks / r / "nsys.sqlite.xz", "rb") as a, db.open("wb") as b:
            shutil.copyfileobj(a, b)
        con = sqlite3.connect(db)
        expected[r] = con.execute("SELECT COUNT(*) FROM NVTX_EVENTS WHERE COALESCE(text, (SELECT value FROM StringIds "
                                  "WHERE id = textId)) = 'nsighttc.optimizer'").fetchone()[0]
        con.close()
    assert expected == {"rank0": 20, "rank1": 20}
    v = nsighttc.analyze([ranks], jobs=1).to_json()
    assert v["timeline"]["steps"]["source"] == "hook" and v["timeline"]["steps"]["count"] == 20
    assert all(r["median_step_ns"] for r in v["ranks"])
    s = v["distributed"]["straggler"]
    assert s["rank"] == 1 and s["excess_by_cause"][0]["kind"] == "gpu-compute" and s["cause"].startswith("longer GPU compute")
    assert any(line.startswith("Ranks: rank 1 is the straggler") for line in headline_lines(v))
