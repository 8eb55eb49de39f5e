"""The plain run's step times (``runtime.step_timer``): per phase, hooks' steps replaced by the program's own, and
the launcher writing them for a real CPU loop."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsighttc.experiment import measure
from nsighttc.runtime.step_timer import SETTLE_MIN_STEPS, Fanout, StepTimer, settled, steady

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


class _R:
    def __init__(self, name):
        self.name = name


def _clock(times):
    it = iter(times)
    return lambda: next(it)


def test_explicit_steps_replace_hook_steps_and_keep_phases_apart():
    t = StepTimer(clock=_clock([0.0, 1.0, 2.0, 10.0, 10.5, 11.5, 12.0]), cuda=False)
    t.hook_boundary()
    t.hook_boundary()                      # a warm-up loop of hook steps ...
    t.explicit_begin([_R("p.py"), _R("a")])  # ... then the program's own steps: the hook phase is dropped
    t.explicit_end([_R("p.py"), _R("a")])
    t.explicit_begin([_R("p.py"), _R("a")])
    t.explicit_end([_R("p.py"), _R("a")])
    t.explicit_begin([_R("p.py"), _R("b")])
    t.explicit_end([_R("p.py"), _R("b")])
    res = t.result()["phases"]
    assert list(res) == ["p.py/a", "p.py/b"]
    assert res["p.py/a"]["host_ns"] == pytest.approx([8e9, 0.5e9]) and res["p.py/a"]["gpu_ns"] is None
    assert res["p.py/b"]["host_ns"] == pytest.approx([0.5e9])


def test_each_steps_fetch_time_and_how_often_the_gpu_ran_dry_are_the_fetches_between_its_boundaries():
    """What try's next bottleneck reads (``data_ns``, ``fetches_gpu``, ``fetches_gpu_idle``): the fetches timed between
    two boundaries belong to the step they end, told through the Fanout as the step hooks tell it."""
    t = StepTimer(clock=_clock([0.0, 1.0, 2.0, 3.0]), cuda=False)
    f = Fanout(t)
    f.hook_boundary()
    f.add_data(100.0, True)
    f.add_data(50.0, False)
    f.hook_boundary()                    # step 1: 150 ns in two fetches, the GPU dry after one
    f.hook_boundary()                    # step 2: no fetch
    f.add_data(30.0, None)               # (no CUDA: timed, not asked)
    f.hook_boundary()
    ph = t.result()["phases"]["nsighttc.step"]
    assert ph["data_ns"] == [150.0, 0.0, 30.0]
    assert ph["fetches_gpu"] == [2, 0, 0] and ph["fetches_gpu_idle"] == [1, 0, 0]
    plain = StepTimer(clock=_clock([0.0, 1.0]), cuda=False)  # a loop without a DataLoader: nothing written
    plain.hook_boundary()
    plain.hook_boundary()
    assert "data_ns" not in plain.result()["phases"]["nsighttc.step"]


def test_fanout_reaches_every_listener_in_order():
    seen = []

    class L:
        def __init__(self, n):
            self.n = n

        def hook_boundary(self, last=False):
            seen.append((self.n, last))
    f = Fanout(L(1), None, L(2))
    f.hook_boundary()
    f.hook_boundary(last=True)  # (the step the program's last run ended after: runtime.window)
    assert seen == [(1, False), (2, False), (1, True), (2, True)]


def test_steady_leaves_the_warm_up_out():
    times = [900.0, 400.0, 120.0, 100.0, 101.0, 99.0, 100.0]
    kept, warm = steady({"host_ns": times, "gpu_ns": None, "compiled": [False] * len(times)})
    assert warm in (2, 3) and kept == times[warm:] and max(kept) <= 120.0


def test_launcher_writes_step_times_of_a_plain_loop(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "loop.py"
    script.write_text("import time, torch\nm = torch.nn.Linear(8, 8)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                      "for i in range(12):\n    time.sleep(0.02)\n    m(torch.ones(2, 8)).sum().backward()\n"
                      "    opt.step()\n    opt.zero_grad()\n")
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--step-times", str(out), "--", str(script)],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["schema"] == "nsighttc.step-times/1" and list(doc["phases"]) == ["nsighttc.step"]
    phases = measure.read(out)
    step = phases["nsighttc.step"]
    assert 0.019e9 < step["step_ns"] < 0.2e9 and step["steps"] >= 5 and step["clock"] == "host"


def test_a_drained_prefetch_buffer_is_left_out_of_the_steady_rate():
    """H100 plain runs of dataloader_bound.py (reports/try/calibration/loader): with 8 workers the first steady
    steps drain the prefetched batches, then batches come 8 per worker cycle; the rate is the second half's, which
    matches whole cycles. The baseline (0 workers) keeps one rate: all its steady steps count."""
    st = ROOT / "reports" / "try" / "calibration" / "loader" / "step_times"
    doc = json.loads((st / "workers_8_plain1.json").read_text())["phases"]["dataloader_bound.py"]
    times, _ = steady(doc)
    kept, ratio = settled(times)
    assert ratio is not None and ratio < 0.75 and kept == times[len(times) // 2:]
    whole = sum(times) / len(times)
    last_cycles = sum(times[-16:]) / 16  # two whole worker cycles at the end of the run
    assert sum(kept) / len(kept) > 1.15 * whole
    assert abs(sum(kept) / len(kept) / last_cycles - 1) < 0.15
    base = json.loads((st / "baseline_plain1.json").read_text())["phases"]["dataloader_bound.py"]
    times, _ = steady(base)
    assert settled(times) == (times, None)
    short = [1.0] * (SETTLE_MIN_STEPS - 2) + [9.0]  # too few steps to compare halves
    assert settled(short) == (short, None)


def test_steady_steps_begin_after_the_last_fall_not_on_a_plateau_of_slow_early_steps():
    """Issue 44: a Trainer's autocast variant ran ~190 ms steps for a while, then ~40 ms; three agreeing slow steps
    made try's speed-up 0.94x. The steady state starts where the steps stop falling."""
    from nsighttc.runtime.step_timer import settled_at_end, steady, stopped_falling
    plateau = [400e6, 195e6, 190e6, 188e6, 191e6, 189e6, 190e6]
    fast = [41e6, 40e6, 39e6, 40e6, 41e6, 40e6, 40e6, 39e6]
    times, warm = steady({"host_ns": plateau + fast})
    assert warm == len(plateau) and max(times) < 42e6
    assert stopped_falling([100.0] * 10, 1) == 1  # a flat run stays where it settled
    # still falling at the end: not settled, and no rate is claimed
    t = plateau + fast[:3]
    times, warm = steady({"host_ns": t})
    assert warm == len(plateau) and not settled_at_end(t, warm)
    assert settled_at_end(plateau + fast, len(plateau))


def test_a_variant_whose_steps_never_settled_gets_no_speed_up(tmp_path):
    import json
    from nsighttc.experiment import measure
    base = tmp_path / "base.json"
    var = tmp_path / "var.json"
    base.write_text(json.dumps({"phases": {"nsighttc.step": {"host_ns": [400e6] + [100e6] * 12}}}))
    var.write_text(json.dumps({"phases": {"nsighttc.step": {"host_ns": [400e6, 190e6, 190e6, 190e6, 40e6, 40e6]}}}))
    b, v = measure.read(base), measure.read(var)
    assert b["nsighttc.step"]["step_ns"] == 100e6 and v["nsighttc.step"]["settled"] is False
    out = measure.compare([b], [v])
    assert out["speedup"] is None and out["change"] == "never settled" and "still getting faster" in out["note"]


def test_every_change_compare_gives_is_one_the_try_schema_allows():
    """A try.json whose variant never settled must still be valid (CI once failed on "never settled")."""
    import json
    from importlib.resources import files
    from nsighttc.experiment import measure
    schema = json.loads(files("nsighttc").joinpath("schema/try-1.json").read_text())
    allowed = schema["properties"]["variants"]["items"]["properties"]["change"]["enum"]
    base = {"nsighttc.step": {"step_ns": 100e6, "q1_ns": 95e6, "q3_ns": 105e6, "steps": 10}}
    cases = [([base], [{"nsighttc.step": dict(base["nsighttc.step"], step_ns=s, q1_ns=s * .95, q3_ns=s * 1.05)}])
             for s in (50e6, 100e6, 200e6)]
    cases.append(([base], [{"nsighttc.step": dict(base["nsighttc.step"], settled=False)}]))
    cases.append(([None], [None]))
    changes = {measure.compare(b, v)["change"] for b, v in cases}
    assert changes == {"faster", "no measurable change", "slower", "never settled", None}
    assert changes <= set(allowed)


def test_alternating_steps_of_two_loader_workers_in_phase_have_settled():
    """The fix test's loader (tests/fix/test_edits.py: 4 samples of 4 ms a batch) with two DataLoader workers, the
    patched copy's second round as the launcher wrote it (a CI run on a 2-core host, 2026-11-29): the workers delivered
    batches in pairs, steps alternating about 2 and 15 ms to the end. A split before the last three steps, two of them
    fast, was a "fall", so the run was "still getting faster when it ended" and the patch was not kept (2 of 5 full
    runs that day). A split that short is a fall only where all its steps are under the steps before it."""
    import gzip
    import json
    from nsighttc.runtime.step_timer import settled_at_end, steady, stopped_falling
    doc = json.loads(gzip.decompress((ROOT / "tests" / "fixtures" / "try_steps" /
                                      "two_workers_alternating_step_times.json.gz").read_bytes()))
    ph = doc["phases"]["nsighttc.step"]
    t = ph["host_ns"]
    assert min(t[-6:]) < 3e6 and max(t[-6:]) > 14e6  # (the alternation, to the end)
    times, warm = steady(ph)
    assert settled_at_end(t, warm) and len(t) - warm >= 2 * 3
    assert 6e6 < sum(times) / len(times) < 10e6  # (about 8 ms a step: the two workers' rate)
    # a real fall that short is still one: a plateau, then three fast steps at the end (issue 44's case)
    assert stopped_falling([190e6] * 6 + [40e6] * 3, 1) == 6
