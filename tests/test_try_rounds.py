"""``nsighttc try``'s rounds, next bottleneck and combination, on plain runs measured on the GPU machine.

``tests/fixtures/try/h200_accum_auto.tar.xz``: ``nsighttc try --budget 300 wrappers/grad_accum.py`` (fp32, 4
micro-batches, ``num_workers=0``) on one H200 (driver 580.159.04, torch 2.11.0+cu130), made with
``bash benchmarks/gpu/gpu_try_next.sh OUT verify-b``: every plain run's step times (``step_times.json``, with the
host's time in DataLoader fetches), what each variant applied, and the try.json that run wrote. Plain runs of the
changes made by hand on the same machine: TF32 1.37x (244.4 -> 178.8 ms a step), TF32 + 8 workers 2.29x (106.6 ms).
``tests/fixtures/try/h100_generate_unchanged/``: three runs of one unchanged launch-bound program (see its README).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsighttc.experiment import measure, next_cause, rounds
from nsighttc.experiment.rows import best_two, row as make_row
from nsighttc.experiment.options import TryOptions
from tests.conftest import extract_fixture

FIX = Path(__file__).resolve().parent / "fixtures" / "try"


@pytest.fixture(scope="module")
def accum(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("try")
    extract_fixture(FIX / "h200_accum_auto.tar.xz", dest)
    return dest / "h200_accum_auto"


def plain_row(d: Path, name: str) -> dict:
    """A plain run's row as ``experiment.runs.Runner.plain`` makes it, from the files that run wrote."""
    record = json.loads((d / "applied.json").read_text())
    steps = measure.read(d / "step_times.json")
    step = measure.program_step(steps, measure.weights_of(steps))
    return {"name": name, "status": "ok", "error": None, "seconds": json.loads((d / "run.json").read_text())["seconds"],
            "applied": record.get("variants") or [{"variant": "baseline", "set": {}}], "_record": record,
            "_steps": steps, "step_ns": step[0] if step else None, "metric": None, "run_dir": str(d)}


def runs_of(root: Path, name: str) -> dict[int, dict]:
    folder = root / name.replace("+", "_").replace("=", "_")
    return {int(p.name[5:]) - 1: plain_row(p, name) for p in sorted(folder.glob("plain*"))}


def test_after_the_fastest_variant_its_own_plain_runs_name_data_loading_and_the_fix(accum):
    """After bf16 autocast the loop waited on its DataLoader (num_workers=0): the host spent 78% of each step in
    fetches and the GPU had run dry after every one of them. The baseline spent 51% of its step in fetches too, but
    its GPU was still busy after 98% of them (GPU-bound): not the loader's. The fix is workers (the combination
    measured 3.18x there, against 1.36x for bf16 alone)."""
    first = runs_of(accum, "bf16-autocast")[0]
    nxt = next_cause.from_plain("bf16-autocast", [first], workers=8)
    assert nxt["cause"] == "data loading" and nxt["variant"] == "workers=8" and nxt["measured"] == "plain runs"
    assert 0.6 < nxt["share"] < 0.95 and "run out of work after 100%" in nxt["evidence"]
    base = runs_of(accum, "baseline")[0]
    holds, share, starved = next_cause.loader_holds([base])
    assert share > next_cause.DATA_SHARE and starved < 0.1 and not holds
    assert next_cause.from_plain("baseline", [base]) is None
    after = json.loads((accum / "try_after.json").read_text())
    rows = {v["name"]: v for v in after["variants"]}
    assert rows["bf16-autocast+workers=8"]["speedup"] > 2 * rows["bf16-autocast"]["speedup"]
    assert after["next"]["variant"] == "workers=8" and after["next"]["measured_change"] == "faster"


def test_the_combination_never_pairs_two_fixes_of_one_cause(accum):
    """tf32 and bf16 autocast both move the matrix work: the best two of different causes are combined instead."""
    names = ["bf16-autocast", "tf32", "pin-memory", "cudnn-benchmark"]
    first = {n: [runs_of(accum, n)[0]] for n in names}
    base = [runs_of(accum, "baseline")[0]]
    faster = {n for n in names if measure.compare([base[0]["_steps"]], [first[n][0]["_steps"]])["change"] == "faster"}
    assert {"bf16-autocast", "tf32", "cudnn-benchmark"} <= faster  # (what the round measured)
    combo = best_two(base, first)
    assert combo is not None and "tf32" not in combo.split("+") and combo.startswith("bf16-autocast+")
    assert next_cause.families("bf16-autocast+tf32") == {"precision"}


def _replay(root: Path):
    """A stand-in ``Runner`` that hands out the runs the GPU machine made, round by round (real step times)."""
    class Replay:
        calls: list = []

        def plain(self, name, round_, pair=None):
            self.calls.append((name, round_))
            have = runs_of(root, name)
            return have[round_] if round_ in have else have[max(have)]
    return Replay()


def test_rounds_go_on_only_for_variants_whose_answer_is_not_clear(accum):
    """Replaying the GPU machine's runs through the rule gives the rounds that run made: cudnn-benchmark (1.22x,
    1.20x) and bf16-autocast were clear after three rounds and the combination after two; tf32 and pin-memory went
    on, and the fifth round was not started: it would have passed the 300 s budget, with pin-memory still unclear."""
    from nsighttc.experiment import _more_rounds
    names = ["bf16-autocast", "tf32", "pin-memory", "cudnn-benchmark", "bf16-autocast+workers=8"]
    base = {0: runs_of(accum, "baseline")[0]}
    runs = {n: {0: runs_of(accum, n)[0]} for n in names}
    ctx = _replay(accum)
    notes: list = []
    done, stopped = _more_rounds(ctx, TryOptions(budget=300), base, runs, names, notes)
    assert done == 4 and "`pin-memory`" in stopped and "--budget" in stopped and "`tf32`" not in stopped
    ran = {n: [r for m, r in ctx.calls if m == n] for n in names}
    assert ran["bf16-autocast+workers=8"] == [1] and ran["cudnn-benchmark"] == [1, 2]
    assert ran["pin-memory"] == [1, 2, 3] and ran["tf32"] == [1, 2, 3]
    after = {v["name"]: v for v in json.loads((accum / "try_after.json").read_text())["variants"]}
    assert all(len(after[n]["rounds"]) == len(ran[n]) + 1 for n in names)  # what the real run did
    b = [base[r] for r in sorted(runs["tf32"])]
    m = measure.compare([x["_steps"] for x in b], [x["_steps"] for x in runs["tf32"].values()])
    assert m["change"] == "faster" and m["clear"] and m["spread"]["low"] > 1.0
    assert m["spread"]["low"] < m["speedup"] < m["spread"]["high"]
    assert m["spread"]["low"] <= 244.4 / 178.8 <= m["spread"]["high"]  # TF32 by hand, plain runs: 1.37x


def test_a_round_that_would_pass_the_budget_is_not_started_and_the_note_says_what_is_unclear(accum):
    from nsighttc.experiment import _more_rounds
    names = ["tf32"]
    base = {0: runs_of(accum, "baseline")[0]}
    runs = {"tf32": {0: runs_of(accum, "tf32")[0]}}
    ctx = _replay(accum)
    done, stopped = _more_rounds(ctx, TryOptions(budget=30), base, runs, names, [])
    assert done == 1 and ctx.calls == [] and "--budget" in stopped and "`tf32`" in stopped
    done, stopped = _more_rounds(_replay(accum), TryOptions(repeat=3), {0: base[0]}, {"tf32": {0: runs["tf32"][0]}},
                                 names, [])
    assert done == 3 and stopped is None  # --repeat N: exactly N, whatever the rule


def test_runs_of_one_unchanged_program_never_read_as_a_change():
    """Three plain runs of the same launch-bound program (H100; one of them measured 1.76x against another in one
    round): paired as two rounds, the interval holds 1.00x and the answer is no measurable change."""
    d = FIX / "h100_generate_unchanged"
    a, b, c = (measure.read(d / n / "step_times.json") for n in ("baseline", "workers_2", "static-cache"))
    one = measure.compare([a], [b])
    assert one["speedup"] > 1.5 or one["speedup"] < 1 / 1.5 or one["change"] == "no measurable change"
    two = measure.compare([a, c], [b, a])
    assert two["spread"]["low"] < 1.0 < two["spread"]["high"] and two["change"] == "no measurable change"
    assert not two["clear"] and "not clear after 2 rounds" in two["note"]


def test_the_interval_is_never_narrower_than_the_baselines_own_noise():
    ratios = [2.0, 2.0]
    assert rounds.interval(ratios, 0.0)[1:] == (2.0, 2.0)
    _, lo, hi = rounds.interval(ratios, rounds.run_noise([100.0, 110.0]))
    assert lo < 1.7 and hi > 2.3
    assert rounds.state(lo, hi, 2) == "faster" and rounds.state(0.97, 1.04, 3) == "no measurable change"
    assert rounds.state(0.9, 1.3, 3) is None and rounds.state(1.2, 1.5, 1) is None


def test_the_held_flag_is_reported_at_the_programs_line(accum):
    rs = runs_of(accum, "tf32")
    r = make_row("tf32", None, [runs_of(accum, "baseline")[i] for i in sorted(rs)], [rs[i] for i in sorted(rs)],
                 None, None, TryOptions())
    assert "torch.backends.cudnn.allow_tf32 = False` itself at grad_accum.py:65" in r["note"]


def test_the_baselines_row_never_says_it_is_unclear_against_itself():
    """The baseline over several rounds, compared with itself, holds 1.00x by construction: its row carries no "not
    clear" note (an H200 fix run listed `baseline`: not clear after 3 rounds among the unclear variants)."""
    from nsighttc.experiment.rows import row
    d = FIX / "h100_generate_unchanged"
    runs = [{"status": "ok", "seconds": 1.0, "run_dir": str(d / n), "applied": None,
             "_steps": measure.read(d / n / "step_times.json")} for n in ("baseline", "workers_2", "static-cache")]
    base = row("baseline", None, runs, runs, None, None, TryOptions())
    assert base["speedup"] == pytest.approx(1.0) and "not clear" not in (base.get("note") or "")
    other = row("workers=2", None, runs, runs[1:] + runs[:1], None, None, TryOptions())
    assert "not clear after 3 rounds" in other["note"]


@pytest.fixture(scope="module")
def varlen(tmp_path_factory) -> Path:
    """``nsighttc fix --budget 150 --full-run --metric '([\\d.]+) requests/s' --variant pad-buckets
    wrappers/varlen_infer.py`` on one H200 (``bash benchmarks/gpu/gpu_fix.sh OUT b``): each plain run's step times and
    its requests/s line, three rounds of the baseline and of the patched copy (batches padded to a multiple of 64)."""
    dest = tmp_path_factory.mktemp("varlen")
    extract_fixture(FIX / "h200_varlen_fix.tar.xz", dest)
    return dest / "h200_varlen_fix"


def test_a_loop_whose_time_is_in_its_slow_steps_is_compared_whole(varlen):
    """Variable-length inference: its steady steps are a few % of the loop (each new length's first batch took
    0.1-1.1 s), so the steady step said 1.22x "no measurable change" while requests/s went 521 -> 1,861 (median of 3
    rounds). Full runs of the same 118 steps are compared whole: faster, and the interval holds what requests/s
    measured round by round."""
    import re
    runs = {n: [measure.read(varlen / n / f"plain{i}" / "step_times.json") for i in (1, 2, 3)]
            for n in ("baseline", "patch_pad-buckets")}
    rate = {n: [float(re.match(r"([\d.]+) requests/s", (varlen / n / f"plain{i}" / "program.log").read_text())[1])
                for i in (1, 2, 3)] for n in runs}
    m = measure.compare(runs["baseline"], runs["patch_pad-buckets"])
    assert m["whole_loop"].startswith("the baseline's slow steps") and m["change"] == "faster"
    per_round = [v / b for b, v in zip(rate["baseline"], rate["patch_pad-buckets"])]
    assert m["spread"]["low"] <= min(per_round) and max(per_round) <= m["spread"]["high"] * 1.05
    assert m["speedup"] > 3
    steady = [{p: {k: v for k, v in ph.items() if k not in ("loop_ns", "loop_steps", "slow_share")}
               for p, ph in r.items()} for r in runs["baseline"]]
    assert measure.compare(steady, runs["patch_pad-buckets"]).get("whole_loop") is None  # (what today's main did)
    # window runs (different step counts) stay on the steady step
    short = [{p: {**ph, "loop_steps": ph["loop_steps"] // 2} for p, ph in r.items()} for r in runs["patch_pad-buckets"]]
    assert measure.compare(runs["baseline"], short).get("whole_loop") is None


def _varlen_shapes(steps: int) -> tuple[list[int], list[bool]]:
    """Each step's input shape as the step timer numbers them, for the H200 runs of wrappers/varlen_infer.py, and
    whether the program had not seen it before: the program draws its requests' lengths from random.Random(0)
    (batches of 16, lengths 16-256), each batch padded to its longest, and step i of the hooks' steps is batch i + 1
    (the first call finds the main model: its shape is not a step's)."""
    import random
    rnd = random.Random(0)
    lengths = [max(rnd.randint(16, 256) for _ in range(16)) for _ in range(120)]
    ids: dict[int, int] = {}
    shapes = [ids.setdefault(n, len(ids)) for n in lengths[1:steps + 1]]
    return shapes, [n not in lengths[:i + 1] for i, n in enumerate(lengths[1:steps + 1])]


def test_auto_pads_a_loop_its_plain_run_shows_held_back_by_new_shapes(varlen):
    """The baseline's profiled window (a window of steady steps, most lengths seen before it) found no shape churn
    and named "Launch-bound in `model calls`"; auto offered nothing for the shapes, and would have offered CUDA graphs
    to a loop whose shapes keep changing. The plain run's step timer now numbers each step's input shapes: its slow
    steps at new lengths held most of the loop, so auto runs pad-buckets and no graph variant."""
    verdict = json.loads((varlen / "baseline" / "profiled" / "verdict.json").read_text())
    record = json.loads((varlen / "baseline" / "profiled" / "applied.json").read_text())
    doc = json.loads((varlen / "baseline" / "plain1" / "step_times.json").read_text())
    ph = doc["phases"]["nsighttc.step"]
    ph["shapes"], new = _varlen_shapes(len(ph["host_ns"]))
    assert [t > 50e6 for t in ph["gpu_ns"]] == new  # (the reconstruction checked on the run itself)
    path = varlen / "plain1_shapes.json"
    path.write_text(json.dumps(doc))
    steps = measure.read(path)
    st = steps["nsighttc.step"]
    assert st["shapes"] == len(set(ph["shapes"])) and st["new_shape_share"] > 0.5
    from nsighttc.experiment.auto import choose
    before = [n for n, _ in choose(verdict, record)]
    assert "pad-buckets" not in before and "shape-churn" not in {f["id"] for f in verdict["findings"]}
    picked = dict(choose(verdict, record, plain=steps))
    assert "pad-buckets" in picked and f"{st['shapes']} shapes" in picked["pad-buckets"]
    assert not {"compile-reduce-overhead", "static-cache", "cuda-graphs"} & set(picked)


def test_a_plain_run_whose_steps_never_settled_gives_no_prediction_and_no_crash(varlen):
    """A short run (CPU, a few steps) whose steps were still getting faster: measure.read gives the phase no step
    (``settled: False``). Predicting a variant from it crashed `nsighttc fix` ("unsupported operand type(s) for *:
    'NoneType' and 'int'"); the phase now weighs nothing and the prediction stands on the recording alone."""
    from nsighttc.analysis import variant_gain
    verdict = json.loads((varlen / "baseline" / "profiled" / "verdict.json").read_text())
    unsettled = {"nsighttc.step": {"step_ns": None, "steps": 5, "warmup": 0, "settled": False, "clock": "host"}}
    with_plain = variant_gain.for_variant(verdict, "static-cache", unsettled)
    alone = variant_gain.for_variant(verdict, "static-cache", None)
    assert with_plain is not None and (with_plain["low"], with_plain["high"]) == (alone["low"], alone["high"])
