"""`benchmarks/run_all.py --small`: every speed benchmark's path runs in CI on tiny inputs (not timed)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_run_all_small_writes_every_case(tmp_path):
    out = tmp_path / "results.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--small", "--work", str(tmp_path / "w"),
                        "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    names = [c["name"] for c in doc["results"]]
    assert {"nsys_sqlite_1m_kernels", "kineto_json_1gb", "kineto_json_gz_1gb", "ncu_raw_csv_1m_launches",
            "ranks_64x100k_kernels"} <= set(names)
    for c in doc["results"]:
        assert set(c) >= {"name", "input", "size", "wall_s", "peak_rss_mb", "budget_s", "budget_mb", "ok"}
        assert c["ok"] and c["wall_s"] > 0 and c["peak_rss_mb"] > 0 and c["verdicts"]["launches"] > 0
    assert next(c for c in doc["results"] if c["name"].startswith("ranks"))["verdicts"]["ranks"] == 3


def test_a_run_without_peers_keeps_the_earlier_peer_times_with_ratios_against_this_run():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import run_all
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    committed = json.loads((ROOT / "benchmarks" / "results.json").read_text())  # a real full run's document
    now = [dict(r, wall_s=r["wall_s"] / 2, peak_rss_mb=r["peak_rss_mb"] * 2) for r in committed["results"]]
    kept = run_all.carried_peers(committed, now)
    assert len(kept) == len(committed["peers"]) > 0
    for old, new in zip(committed["peers"], kept):
        assert new["peer_wall_s"] == old["peer_wall_s"] and "carried" in new
        ours = next(r for r in now if r["name"] == new["case"])
        assert new["nsighttc_wall_s"] == ours["wall_s"]
        assert abs(new["time_ratio"] - round(old["peer_wall_s"] / ours["wall_s"], 2)) < 1e-9


def test_the_committed_overhead_summary_has_what_issues_10_and_29_ask_for():
    """reports/profile_overhead/summary.json.gz (written by benchmarks/gpu/gpu_profile_overhead.py on the GPU machine):
    one entry per program with the exact commands, the GPU, the plain and default wall times of alternating rounds,
    the ratio of their medians, the time to the verdict (plain, first, cached run), and the evidence it had."""
    import json
    import statistics
    from pathlib import Path
    import gzip
    doc = json.loads(gzip.decompress((Path(__file__).resolve().parents[1] / "reports/profile_overhead/summary.json.gz")
                                     .read_bytes()))
    programs = sorted(e["program"] for e in doc)
    assert programs == ["compile", "dataloader", "ddp", "ddp_compiled", "ddp_shared_gpu", "ddp_shared_gpu_long",
                        "ddp_shared_gpu_long_torch", "ddp_shared_gpu_torch", "eval_loop", "fsdp2", "fsdp2_compiled",
                        "gan_loop", "grad_accum", "graph_replay", "lightning", "llm_generate", "long_resnet",
                        "multi_phase", "resnet_amp", "resnet_fp32_benchmark", "shared_hf_bert", "shared_lit_cifar",
                        "shared_llm_generate", "shared_vit_eval", "trainer", "vgg16"]
    for e in doc:
        assert e["gpu"].startswith("NVIDIA ")
        if e["program"].startswith(("ddp", "fsdp")):  # a torchrun job: profiled as a command
            assert e["command"].startswith("nsighttc profile ") and " -- python3 -m torch.distributed.run " in \
                e["command"] and ("wrappers/ddp_train.py" in e["command"] or "wrappers/fsdp2_train.py" in e["command"])
        elif e["program"].startswith("shared_"):  # programs as users write them (../shared/programs)
            assert e["command"] == f"nsighttc profile ../shared/programs/{e['program'][len('shared_'):]}.py"
        else:
            assert e["command"].startswith("nsighttc profile wrappers/")
        assert len(e["plain_s"]) == len(e["default_s"]) >= 1
        assert e["ratio"] == round(statistics.median(e["default_s"]) / statistics.median(e["plain_s"]), 3)
        t = e["time_to_verdict_s"]
        assert t["plain"] == statistics.median(e["plain_s"]) and t["first"] == statistics.median(e["default_s"])
        assert e["has_timeline"] is True and e["tc_evidence"] in ("hardware", "mixed", "kernel-name")
        assert e["window"] is not None  # what the timeline pass recorded (issue 29)
        if "pair_ratios" in e:  # each round's run over the same round's plain run, and the environment it ran in
            assert e["pair_ratios"]["first"] == [round(c / p, 3) for c, p in zip(e["default_s"], e["plain_s"])]
            assert e["pair_ratios"]["cached"] == [round(w / p, 3) for w, p in zip(e["warm_s"], e["plain_s"])]
            assert e["environment"].startswith(("compiled", "the machine's"))
    for name in ("ddp_compiled", "fsdp2_compiled"):  # issue 50: the torchrun wrappers byte-compiled, as installed
        compiled = next(e for e in doc if e["program"] == name)
        assert compiled["environment"].startswith("compiled") and len(compiled["plain_s"]) >= 3
    # the first-run cost check: alternating rounds, first and cached, each run's verdict kept (what "verdicts
    # unchanged" is read from)
    for name in ("gan_loop", "grad_accum", "graph_replay", "shared_hf_bert", "shared_vit_eval", "shared_lit_cifar",
                 "shared_llm_generate"):
        e = next(e for e in doc if e["program"] == name)
        assert len(e["plain_s"]) == len(e["default_s"]) == len(e["warm_s"]) >= 3 and e["gpu"] == "NVIDIA H200, 580.159.04"
        assert e["cold"]["timeline_verdict"] and e["warm"]["timeline_verdict"]
    # every round's verdict, first and cached, where a call was folded in (benchmarks/gpu/fold_overhead_rounds.py)
    rounds = json.loads(gzip.decompress((Path(__file__).resolve().parents[1] / "reports/profile_overhead/"
                                         "first_run_2026-11-29/rounds.json.gz").read_bytes()))
    for r in (r for r in rounds if "verdicts_each_round" in r):
        each = r["verdicts_each_round"]
        assert len(each["first"]) == len(r["default_s"]) and len(each["cached"]) == len(r["warm_s"]), r["program"]
        assert all(v["timeline_verdict"] for v in each["first"] + each["cached"])
    long = next(e for e in doc if e["program"] == "long_resnet")
    assert long["time_to_verdict_s"]["first"] < long["startup_s"] + 60 < long["plain_s"][0]
    assert long["time_to_verdict_s"]["ratio_full_run"] <= 1.05

def test_shipped_reports_hold_no_machine_paths():
    """Issue 53: reports made on the GPU machine are committed without its paths (benchmarks/scrub_paths.py rewrites
    them: relative to the run directory, else the last two parts)."""
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("scrub_paths", root / "benchmarks" / "scrub_paths.py")
    scrub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scrub)
    left = [str(f.relative_to(root)) for f in scrub.files([root / "reports"])
            if scrub.MACHINE_PATH.search(f.read_text(encoding="utf-8", errors="surrogateescape"))]
    assert not left, f"machine paths in {left[:5]}: run python benchmarks/scrub_paths.py"
    assert scrub.scrub_text('"/root/out/work/runs/20261122-vgg16/torch_trace.json"', "20261122-vgg16") == \
        '"torch_trace.json"'
    assert scrub.scrub_text("-o /tmp/wa/work/x/ncu --nvtx", "other") == "-o …/x/ncu --nvtx"


def test_the_torchrun_cost_probe_reads_the_ddp_wrappers_stages_from_its_real_line():
    """Issue 50: the GPU probe (benchmarks/probes/gpu_torchrun_cost_probe.py) puts each rank's stages before its steps
    (``ddp_train.py``'s result line) beside the process timeline; the line's format and the probe's reading of it
    must not drift apart. The line comes from the wrapper's CPU smoke run."""
    import importlib.util
    import re
    r = subprocess.run([sys.executable, str(ROOT / "wrappers" / "ddp_train.py"), "--device", "cpu", "--no-annotate"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    line = next(x for x in r.stdout.splitlines() if "ms/step" in x)
    spec = importlib.util.spec_from_file_location("torchrun_probe",
                                                  ROOT / "benchmarks/probes/gpu_torchrun_cost_probe.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    got = probe.stages({"total_s": 1.0, "processes": [], "lines": [line]})
    said = {k: float(re.search(rf"{label} ([\d.]+) s", line).group(1)) for k, label in
            (("torch", "torch and its device"), ("group", "process group"), ("built", "built"), ("ddp", "DDP"),
             ("warmup", "warm-up"))}
    assert {k: got[k] for k in said} == said
    assert got["step_ms"] == float(re.search(r"([\d.]+) ms/step", line).group(1))


def test_the_headline_by_rank_script_reads_the_committed_call_12_reports():
    """The counts behind ``analysis.ranks.shown_rank``'s docstring come from the committed runs of call 12."""
    tgz = ROOT / "tests" / "fixtures" / "torchrun_cost" / "call12_rounds_runs.tgz"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "probes" / "headline_by_rank.py"), str(tgz)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    counts = r.stdout.split("counts:")[1]
    assert "runs_ddp_compiled            headline                     4  communication-bound" in counts
    assert "runs_ddp_compiled            rank the others wait for    12  launch overhead" in counts


def test_the_spy_phases_probe_reads_the_committed_call_17_stacks(tmp_path):
    """The numbers behind ``runtime.group_backends``' docstring: py-spy of two H200s' DDP ResNet-50 runs (call 17),
    each cached run's ranks collecting the whole heap after their program for 0.11-0.27 s (``_let_go``),
    torch.profiler's stop in C++ (its one Python frame, ``_disable_profiler``'s line), and the plain ranks importing
    torch in the program itself (the cached ranks in the launcher)."""
    import importlib.util
    from tests.conftest import extract_fixture
    extract_fixture(ROOT / "tests" / "fixtures" / "torchrun_cost" / "call17_spy_raw.tar.xz", tmp_path)
    spec = importlib.util.spec_from_file_location("spy_phases", ROOT / "benchmarks/probes/spy_phases.py")
    spy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(spy)
    def ranks(side: str) -> list:
        runs = [spy.read(tmp_path / f"spy_{side}_{n}.txt", "ddp_train.py", 100) for n in range(1, 5)]
        return [c for run in runs for c in run.values()]
    cached, plain = ranks("cached"), ranks("plain")
    assert len(cached) == len(plain) == 8  # two ranks a run
    assert all(0.1 <= c["launch:_let_go"] <= 0.3 for c in cached), [c["launch:_let_go"] for c in cached]
    assert all(c["launch:main+profiler:profile.__exit__"] >= 0.1 for c in cached)
    assert all(c["prog:main:66"] > 0.5 and "launch:_let_go" not in c for c in plain)


def test_strip_fixture_cuts_an_nsys_recording_at_a_time_and_keeps_what_the_parser_reads(tmp_path):
    """``--until`` on an nsys SQLite (the variable-length loop's committed recording): every timed table keeps only the
    rows that start within 2.5 s of its first kernel or runtime call; the kernels kept are unchanged."""
    import lzma
    import sqlite3
    root = Path(__file__).resolve().parents[1]
    src = root / "tests" / "fixtures" / "steps" / "varlen_infer_nsys.sqlite.xz"
    out = tmp_path / "cut.sqlite.xz"
    subprocess.run([sys.executable, str(root / "benchmarks" / "strip_fixture.py"), "--until", "2.5", str(src), str(out)],
                   check=True, capture_output=True)

    def kernels(path: Path, db: Path) -> list[tuple]:
        db.write_bytes(lzma.decompress(path.read_bytes()))
        con = sqlite3.connect(db)
        rows = con.execute("SELECT start, end, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start").fetchall()
        first = min(con.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0],
                    con.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0])
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        con.close()
        return rows, first, tables
    full, first, _ = kernels(src, tmp_path / "full.sqlite")
    cut, first_cut, tables = kernels(out, tmp_path / "cut.sqlite")
    assert first_cut == first and 0 < len(cut) < len(full)
    assert cut == [r for r in full if r[0] <= first + 2.5e9]
    assert "SAMPLING_CALLCHAINS" not in tables and "CUPTI_ACTIVITY_KIND_KERNEL" in tables
