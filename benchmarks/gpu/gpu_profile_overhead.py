#!/usr/bin/env python3
"""GPU check for issues 10 and 29: the cost of the default `nsighttc profile PROGRAM` against a plain run.

For each program, ROUNDS rounds alternate (whole process, wall time):
  plain   python3 PROGRAM
  cold    python3 -m nsighttc profile PROGRAM   with an empty evidence cache (NSIGHTTC_CACHE_DIR fresh):
          the timeline pass + the Nsight Compute pass for every kernel that needs hardware evidence
  warm    the same with the evidence cache the cold runs filled (a user's second run of the program)
and appends to OUT/summary.json one entry per program:
  {program, command, gpu, plain_s: [..], default_s: [..] (cold), ratio (median cold / median plain),
   warm_s: [..], ratio_warm, pair_ratios {first, cached} (each round's run over its plain run), environment
   (``--compiled`` or not), time_to_verdict_s {plain, first, cached[, full_run]} (medians, whole process: the
   profile process ends once verdict.json and report.md are written), startup_s (the verdict's start-up),
   window (what the timeline pass recorded), has_timeline, tc_evidence, evidence_sources, passes}
plus the verdict of the last cold run. ``--full-run`` also times `nsighttc profile --full-run` (issue 29: it must
cost no more than 1.05x the plain run). Run on the GPU machine after `source .device-carry/setup.sh`:

    python3 benchmarks/gpu/gpu_profile_overhead.py --out OUT --rounds 3 vgg16 resnet_amp multi_phase
    python3 benchmarks/gpu/gpu_profile_overhead.py --out OUT --rounds 1 --full-run long_resnet
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = {
    "vgg16": ["wrappers/vgg16.py"],                # VGG16 fp16 inference, batch 1, 10 warm-up + 100 images
    "resnet_amp": ["wrappers/resnet_amp.py"],      # ResNet-50 AMP training, batch 64, 10 warm-up + 30 steps
    "multi_phase": ["wrappers/multi_phase.py"],    # five phases (bf16 training, CUDA graphs, .item(), host, tiny)
    # real programs that mark nothing (issue 28's wrappers)
    "trainer": ["wrappers/trainer_finetune.py"],   # transformers Trainer, BERT-base fp32, 60 optimizer steps
    "compile": ["wrappers/compile_loop.py"],       # torch.compile'd MLP stack, 60 steps after a long compile
    "lightning": ["wrappers/lightning_module.py"],  # Lightning, 100 steps, DataLoader-bound
    "dataloader": ["wrappers/dataloader_bound.py", "--no-annotate"],
    # inference (issue 44): an LLM generate() loop (no optimizer, no DataLoader) and an image-model evaluation loop
    "llm_generate": ["wrappers/llm_generate.py", "--requests", "8", "--new-tokens", "96"],
    "eval_loop": ["wrappers/eval_loop.py"],
    # a long-running training job (ResNet-50 AMP for two minutes): the verdict must come long before its end
    "long_resnet": ["wrappers/resnet_amp.py", "--minutes", "2"],
    # a torchrun job (a command, profiled as `nsighttc profile -- python3 -m torch.distributed.run ...`): two ranks of
    # DDP ResNet-50 AMP. `ddp` needs two GPUs (nvidia-h200-x2); `ddp_shared_gpu` puts both ranks on GPU 0 with gloo,
    # for a machine with one GPU: the distributed default run's cost, not a multi-GPU job's speed.
    "ddp": ["-m", "torch.distributed.run", "--nproc-per-node", "2", "wrappers/ddp_train.py", "--no-annotate"],
    # FSDP2 (issue 46): a GPT-shaped decoder sharded with fully_shard, bf16 mixed precision, 40 steps, two GPUs
    "fsdp2": ["-m", "torch.distributed.run", "--nproc-per-node", "2", "wrappers/fsdp2_train.py"],
    "ddp_shared_gpu": ["-m", "torch.distributed.run", "--nproc-per-node", "2", "wrappers/ddp_train.py",
                       "--no-annotate", "--share-gpu"],
    # the same for 300 steps (~30 s of training): the window stops both ranks long before the job's end
    "ddp_shared_gpu_long": ["-m", "torch.distributed.run", "--nproc-per-node", "2", "wrappers/ddp_train.py",
                            "--no-annotate", "--share-gpu", "--steps", "300"],
    # issue 73's own loops: launch-heavy with two optimizers, a graph replayed 2,000 times, 4 micro-batches a step
    "gan_loop": ["wrappers/gan_loop.py"],
    "graph_replay": ["wrappers/graph_replay.py"],
    "grad_accum": ["wrappers/grad_accum.py"],
    # fp32 ResNet-50 with cudnn.benchmark on (the replay under the program's switches: no ncu pass after the timeline)
    "resnet_fp32_benchmark": ["wrappers/resnet_amp.py", "--precision", "fp32", "--cudnn-benchmark"],
    # programs as users write them (../shared/programs, or $NSIGHTTC_PROGRAMS: .device-carry/programs on the GPU
    # machine, where the checkout travels without ../shared)
    **{f"shared_{name}": [f"{{programs}}/{name}.py"] for name in ("vit_eval", "hf_bert", "lit_cifar", "llm_generate")},
    # the shared torchrun programs (two GPUs), as run_on_gpu.sh starts them: a DDP job whose `train` range is open
    # around its loop and whose rank 1 sleeps 30 ms a step in `data`, one with a heavier loader on rank 1, FSDP2 even
    # and with rank 1's 25 ms of host work
    **{f"shared_{name}": ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          f"{{programs}}/{name}.py", *args]
       for name, args in (("ddp_w", ("--straggler", "1")), ("ddp_plain", ("--slow-rank", "1")), ("fsdp_train", ()),
                          ("fsdp_slow", ()))},
}
# NCCL settings for the lent multi-GPU machines (no NVLink multicast: the machines' notes say why)
DISTRIBUTED_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def programs_dir() -> str:
    """Where the shared programs are: $NSIGHTTC_PROGRAMS, else ../shared/programs beside the checkout, else the
    copy that travels to the GPU machine (.device-carry/programs)."""
    if os.environ.get("NSIGHTTC_PROGRAMS"):
        return os.environ["NSIGHTTC_PROGRAMS"]
    for d in (ROOT.parent / "shared" / "programs", ROOT / ".device-carry" / "programs"):
        if d.is_dir():
            return str(d)
    raise SystemExit("error: no shared programs: set NSIGHTTC_PROGRAMS to ../shared/programs' copy")


def byte_compile(*packages: Path) -> None:
    """Compile nsighttc (and any checkout it is compared with) as `pip install` does. The lent GPU machine's image
    sets PYTHONDONTWRITEBYTECODE=1 (seen 2026-11-24: reports/window/call30/pyc.txt), so a checkout on PYTHONPATH was compiled from source
    by every process it started (the profile process, the launcher, the replay, the plot workers): ~188 modules
    per profile process, a cost no installed nsighttc has. The plain run's packages (torch) come compiled."""
    import compileall
    for pkg in packages:
        compileall.compile_dir(str(pkg), quiet=1)


def compile_environment(into: Path, env: dict, *extra: Path) -> float:
    """Byte-compile the standard library, site-packages and ``extra`` into ``into`` and return the seconds it took; the
    caller then runs everything with ``PYTHONPYCACHEPREFIX=into``: the start-up of an installed environment.

    Why: the lent machine's image sets PYTHONDONTWRITEBYTECODE=1 and ships some packages without .pyc (sympy, which
    torch._dynamo imports and torchvision imports it: seen 2026-11-27), so every process compiled them from source,
    a plain DDP rank included: a rank lived 10-15 s against ~6 s byte-compiled, and its start varied by seconds from
    run to run (plain jobs 14.9-22.1 s; reports/profile_overhead/torchrun_cost/2026-11-27/README.md).
    ``os.sync()`` at the end: the new files' writing-back must not fall into the first timed run."""
    import sysconfig
    t0 = time.perf_counter()
    roots = sorted({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}) + \
        [str(x) for x in extra]
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", *roots], cwd=ROOT,
                   env=dict(env, PYTHONPYCACHEPREFIX=str(into)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.sync()
    return time.perf_counter() - t0


def timed(argv: list[str], env: dict, log: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    with log.open("w") as fh:
        rc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
    return time.perf_counter() - t0, rc


def latest_phases(runs: Path) -> dict | None:
    """run.json's phase_seconds of the newest run (gpu query, passes, analysis, report), each pass's seconds and
    each rank's recording (program, profiler stop, recorded from, when its trace line came); a pass read before its
    process ended gives its trace's moment fourth ([engine, mode, seconds, trace written])."""
    dirs = sorted((d for d in runs.iterdir() if (d / "run.json").exists()), key=lambda d: d.stat().st_mtime) \
        if runs.exists() else []
    if not dirs:
        return None
    run = json.loads((dirs[-1] / "run.json").read_text())
    phases = dict(run.get("phase_seconds") or {})
    for p in run.get("passes") or []:  # what each pass took, and each rank's recording (program, stop, from when)
        phases.setdefault("pass_seconds", []).append([p.get("engine"), p.get("mode"), p.get("seconds")]
                                                     + ([p["trace_written_s"]] if p.get("trace_written_s") else []))
        if (p.get("window") or {}).get("ranks"):
            phases["ranks"] = p["window"]["ranks"]
    return phases


def write_rows(path: Path, rows: list[dict]) -> None:
    """A JSON list written one entry per line (compact: the repository's files stay small, and a diff still shows a
    program per line): ``summary.json`` here, and ``rounds.json`` by ``fold_overhead_rounds.py``; gzip-compressed where
    the name ends in ``.gz`` (the committed ``reports/profile_overhead/summary.json.gz``: 190 KB of rows, 25 KB so)."""
    text = "[\n" + ",\n".join(json.dumps(e, separators=(",", ":")) for e in rows) + "\n]\n"
    if path.suffix == ".gz":
        import gzip
        path.write_bytes(gzip.compress(text.encode(), 9, mtime=0))
    else:
        path.write_text(text)


def read_rows(path: Path) -> list[dict]:
    """What ``write_rows`` wrote (gzip-compressed where the name ends in ``.gz``)."""
    if path.suffix == ".gz":
        import gzip
        return json.loads(gzip.decompress(path.read_bytes()))
    return json.loads(path.read_text())


def latest_verdict(runs: Path) -> dict | None:
    dirs = sorted((d for d in runs.iterdir() if (d / "verdict.json").exists()), key=lambda d: d.stat().st_mtime) \
        if runs.exists() else []
    return json.loads((dirs[-1] / "verdict.json").read_text()) if dirs else None


def ranks_said(doc: dict | None) -> dict | None:
    """What a torchrun job's verdict said of its ranks, in a line a round's summary keeps: the straggler named (its
    cause and excess), or why none was, and the ranks left out as incomplete. Every round's, not the last one's only:
    a first run's rank 0 does more than the others before its window, and a rank named in one round of three is not a
    property of the program."""
    dist = (doc or {}).get("distributed")
    if not dist:
        return None
    out = {"incomplete_ranks": dist.get("incomplete_ranks"), "same_work": dist.get("same_work")}
    s = dist.get("straggler")
    if s:
        out["straggler"] = {"rank": s.get("rank"), "cause": s.get("cause"),
                            "excess_ms": round((s.get("excess_ns") or 0) / 1e6, 1),
                            "own_excess_ms": round((s.get("own_excess_ns") or 0) / 1e6, 1)}
    for key in ("no_consistent_straggler", "not_waited_for", "launch_imbalance"):
        if dist.get(key):
            out[key] = {"rank": dist[key].get("rank")}
    first = next(iter(doc.get("findings") or []), None)
    if first:
        gain = first.get("gain") or {}
        out["first_fix"] = {"title": first.get("title"), "low": gain.get("low"), "high": gain.get("high")}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--first-runs-only", action="store_true",
                    help="plain and first (empty cache) runs only: a shorter check of the first-run cost")
    ap.add_argument("--full-run", action="store_true",
                    help="also time `nsighttc profile --full-run` (the program finishes; only its window is recorded)")
    ap.add_argument("--profile-args", default="",
                    help="options given to every `nsighttc profile` of this call, e.g. '--timeline-engine torch' "
                         "(recorded in the summary's command)")
    ap.add_argument("--tag", default="", help="suffix of the programs' names in the summary (runs with --profile-args)")
    ap.add_argument("--compiled", type=Path, default=None, metavar="DIR",
                    help="byte-compile the standard library, site-packages, nsighttc and the wrappers into DIR and run "
                         "every run with PYTHONPYCACHEPREFIX=DIR (an installed environment; compile_environment says "
                         "why); the summary's entries say so (environment)")
    ap.add_argument("programs", nargs="+", choices=sorted(PROGRAMS))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    byte_compile(ROOT / "nsighttc")
    environment = ("the machine's (PYTHONDONTWRITEBYTECODE=1: packages without .pyc compiled from source by every "
                   "process)")
    if a.compiled is not None:
        took = compile_environment(a.compiled.resolve(), dict(os.environ), ROOT / "nsighttc", ROOT / "wrappers")
        os.environ["PYTHONPYCACHEPREFIX"] = str(a.compiled.resolve())
        environment = f"compiled: every package byte-compiled beforehand (PYTHONPYCACHEPREFIX; {took:.0f} s)"
        print(f"compiled the environment in {took:.0f} s", flush=True)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    summary_path = a.out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else []
    py = sys.executable
    os.environ.update(DISTRIBUTED_ENV)  # (every program's runs, plain ones included: the same settings)
    warm_cache = Path(tempfile.mkdtemp(prefix="nsighttc-warm-"))
    extra = shlex.split(a.profile_args)
    for program in a.programs:
        prog = PROGRAMS[program]  # (as the summary shows it: the shared programs as ../shared/programs/NAME.py)
        run_prog = [a_.replace("{programs}", programs_dir()) if "{programs}" in a_ else a_ for a_ in prog]
        prog = [a_.replace("{programs}", "../shared/programs") for a_ in prog]
        name = program + a.tag
        plain_cmd = [py, *run_prog]
        runs = a.out / f"runs_{name}"
        command = prog[0] == "-m"  # a distributed launcher: profiled as a command, behind `--`
        prof_args = ["--", py, *run_prog] if command else run_prog
        prof_cmd = [py, "-m", "nsighttc", "profile", "--out", str(runs), *extra, *prof_args]
        plain_s, cold_s, warm_s, full_s, rcs, phases = [], [], [], [], [], {"cold": [], "warm": []}
        said = {"cold": [], "warm": []}  # (a torchrun job's ranks, round by round)
        cold_doc = warm_doc = None
        for r in range(a.rounds):
            s, rc = timed(plain_cmd, dict(os.environ), a.out / f"{name}_plain.log")
            plain_s.append(round(s, 2))
            rcs.append(rc)
            cold_env = dict(os.environ, NSIGHTTC_CACHE_DIR=tempfile.mkdtemp(prefix="nsighttc-cold-"))
            s, rc = timed(prof_cmd, cold_env, a.out / f"{name}_cold.log")
            cold_s.append(round(s, 2))
            rcs.append(rc)
            cold_doc = latest_verdict(runs)
            phases["cold"].append(latest_phases(runs))
            said["cold"].append(ranks_said(cold_doc))
            if not a.first_runs_only:
                # the warm cache is filled by copying this cold run's cache (the first warm run is then a second run)
                shutil.copytree(cold_env["NSIGHTTC_CACHE_DIR"], warm_cache / name, dirs_exist_ok=True)
                s, rc = timed(prof_cmd, dict(os.environ, NSIGHTTC_CACHE_DIR=str(warm_cache / name)),
                              a.out / f"{name}_warm.log")
                warm_s.append(round(s, 2))
                rcs.append(rc)
                warm_doc = latest_verdict(runs)
                phases["warm"].append(latest_phases(runs))
                said["warm"].append(ranks_said(warm_doc))
            if a.full_run:
                s, rc = timed([py, "-m", "nsighttc", "profile", "--full-run", "--out", str(runs), *extra, *prof_args],
                              dict(os.environ, NSIGHTTC_CACHE_DIR=str(warm_cache / name)), a.out / f"{name}_full.log")
                full_s.append(round(s, 2))
                rcs.append(rc)
            print(f"{name} round {r + 1}: plain {plain_s[-1]} s, cold {cold_s[-1]} s, warm {warm_s[-1] if warm_s else '-'} s"
                  + (f", full-run {full_s[-1]} s" if full_s else ""), flush=True)
        med = statistics.median(plain_s)
        entry = {"program": name, "command": "nsighttc profile " + " ".join([*extra, *(["--", "python3", *prog] if command
                                                                                   else prog)]),
                 "plain_command": "python3 " + " ".join(prog),
                 "gpu": gpu, "plain_s": plain_s, "default_s": cold_s, "ratio": round(statistics.median(cold_s) / med, 3),
                 "warm_s": warm_s, "ratio_warm": round(statistics.median(warm_s) / med, 3) if warm_s else None,
                 "exit_codes": rcs, "environment": environment,
                 # each round's run over the same round's plain run: a drift of the machine's speed over the call
                 # (the plain runs varied by seconds) falls out of the pair
                 "pair_ratios": {"first": [round(c / p, 3) for c, p in zip(cold_s, plain_s)],
                                 "cached": [round(w / p, 3) for w, p in zip(warm_s, plain_s)]},
                 "time_to_verdict_s": {"plain": med, "first": statistics.median(cold_s),
                                       "cached": statistics.median(warm_s) if warm_s else None,
                                       **({"full_run": statistics.median(full_s),
                                           "ratio_full_run": round(statistics.median(full_s) / med, 3)} if full_s else {})},
                 "full_run_s": full_s,
                 "phase_seconds": phases,
                 **({"ranks_said": said} if any(said["cold"] + said["warm"]) else {})}
        if cold_doc is not None:
            startup = (cold_doc.get("timeline") or {}).get("startup") or {}
            entry["startup_s"] = startup.get("seconds")
            entry["window"] = next((p.get("window") for p in cold_doc.get("provenance", {}).get("passes", [])
                                    if p.get("mode") == "timeline"), None)
        for label, doc in (("cold", cold_doc), ("warm", warm_doc)):
            if doc is None:
                continue
            tc, tl, prov = doc["tensor_cores"], doc.get("timeline") or {}, doc.get("provenance", {})
            entry[label] = {"tc_verdict": tc["verdict"], "tc_evidence": tc["evidence"],
                            "tc_time_share": round(tc["tc_time_share"], 4), "by_dtype": tc["by_dtype"],
                            "dtype_from_names_share": tc.get("dtype_from_names_share"),
                            "evidence_sources": tc.get("evidence_sources"), "timeline_verdict": tl.get("verdict"),
                            "gpu_busy_share": tl.get("gpu_busy_share"), "headline_cause": tl.get("headline_cause"),
                            # the steady step as each run measured it: a first run records operators (and their
                            # shapes) for the replay, a second run the ranges only, so the two must still agree
                            "step": {k: (tl.get("steps") or {}).get(k) for k in
                                     ("name", "verdict", "median_iteration_ns", "steady_gpu_busy_share")},
                            "passes": prov.get("passes"), "evidence": prov.get("evidence")}
        entry["has_timeline"] = bool(cold_doc and cold_doc.get("timeline"))
        entry["tc_evidence"] = cold_doc["tensor_cores"]["evidence"] if cold_doc else None
        summary = [e for e in summary if e["program"] != name] + [entry]
        write_rows(summary_path, summary)
        print(json.dumps({k: entry[k] for k in ("program", "plain_s", "default_s", "ratio", "warm_s", "ratio_warm")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
