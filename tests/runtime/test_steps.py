"""The step hooks (nsighttc/runtime/steps.py) inside real PyTorch programs (CPU), read back through the parsers and
the step finder as a profile would: every kind of loop gets exactly its optimizer steps (or, without an optimizer,
its iterations), and no hook breaks a compiled program."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from nsighttc.analysis.timeline import steps as steps_mod  # noqa: E402
from nsighttc.parse import load  # noqa: E402
from nsighttc.runtime import loop_hooks, steps as hooks  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[2]


def _loader(n_batches: int, batch: int = 8):
    ds = torch.utils.data.TensorDataset(torch.randn(n_batches * batch, 16), torch.randint(0, 4, (n_batches * batch,)))
    return torch.utils.data.DataLoader(ds, batch_size=batch)


def _model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def record(program, tmp_path: Path):
    """Run ``program`` with the hooks installed under torch.profiler (what the launcher does), then parse the
    trace: (the step families found, the hooks' own counts, the parsed timeline)."""
    marks = hooks.install()
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            program()
            marks.finish()  # the launcher's end of the program
    finally:
        counts = marks.record()
        marks.remove()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    tl = load(trace).timeline
    import numpy as np
    sets = steps_mod.find(tl.ranges, tl.marks, load(trace).kernels, np.array([]), None)
    return sets, counts, tl


def test_a_plain_loop_has_one_step_per_optimizer_step_and_the_evaluation_after_it_is_none(tmp_path):
    m, dl = _model(), _loader(10)
    opt = torch.optim.AdamW(m.parameters())

    def program():
        for _ in range(2):
            for x, y in dl:
                torch.nn.functional.cross_entropy(m(x), y).backward()
                opt.step()
                opt.zero_grad()
        with torch.no_grad():
            for x, _ in dl:
                m(x)
    sets, counts, tl = record(program, tmp_path)
    assert counts["optimizer_steps"] == 20 and counts["model"] == "Sequential" and counts["open_step_at_exit"]
    assert [(s.source, s.name, len(s.starts)) for s in sets] == [("hook", "optimizer steps", 20)]
    # the marks are not the program's ranges, but the main model's calls and backward in a program that marks no steps (where
    # its kernels were launched, what the host did while the GPU waited); torch.profiler's own DataLoader and
    # optimizer ranges make those marks' ranges unneeded
    assert {str(n) for n in tl.ranges["name"] if str(n).startswith(hooks.PREFIX)} == {hooks.FORWARD, hooks.BACKWARD}
    assert set(tl.marks["name"]) == {hooks.STEP, hooks.OPTIMIZER, hooks.DATA, hooks.FORWARD, hooks.BACKWARD}
    # steps are back to back (one ends, the next starts in the same hook call), each holds its optimizer step's end
    s = sets[0]
    gap = s.starts[1:] - s.ends[:-1]
    # (microseconds; one gap of 4.1 ms was seen on a 2-core machine running the suite in parallel: the host preempted
    # between the end mark and the next start mark of one hook call)
    assert (gap >= 0).all() and sorted(gap)[len(gap) // 2] < 1e5 and (gap < 50e6).all(), gap
    opt_end = tl.marks.loc[tl.marks["name"] == hooks.OPTIMIZER, "end_ns"].sort_values().to_numpy()
    assert ((opt_end > s.starts) & (opt_end <= s.ends)).all()


def test_gradient_accumulation_is_one_step_per_optimizer_step(tmp_path):
    m, dl = _model(), _loader(24)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)

    def program():
        for i, (x, y) in enumerate(dl):
            (torch.nn.functional.cross_entropy(m(x), y) / 4).backward()
            if i % 4 == 3:
                opt.step()
                opt.zero_grad()
    sets, counts, _ = record(program, tmp_path)
    assert counts["fetches"] == 25 and counts["optimizer_steps"] == 6
    assert len(sets[0].starts) == 6


def test_two_optimizers_per_iteration_are_one_step(tmp_path):
    """A GAN: the discriminator and the generator each step once per iteration."""
    gen, disc, dl = _model(), torch.nn.Linear(4, 1), _loader(7)
    opt_g, opt_d = torch.optim.Adam(gen.parameters()), torch.optim.Adam(disc.parameters())

    def program():
        for x, _ in dl:
            fake = gen(x)
            disc(fake.detach()).mean().backward()
            opt_d.step()
            opt_d.zero_grad()
            (-disc(fake).mean()).backward()
            opt_g.step()
            opt_g.zero_grad()
    sets, counts, _ = record(program, tmp_path)
    assert counts["optimizer_steps"] == 14 and len(sets[0].starts) == 7


def test_a_loop_without_a_dataloader_and_a_closure_optimizer(tmp_path):
    m = _model()
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    opt = torch.optim.LBFGS(m.parameters(), max_iter=3)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        return loss

    def program():
        for _ in range(5):
            opt.step(closure)
    sets, counts, _ = record(program, tmp_path)
    assert counts["fetches"] == 0 and counts["optimizer_steps"] == 5
    # nothing came after the last optimizer step to close its step: the program's end did, and it counts
    assert counts["steps"] == 5 and not counts["open_step_at_exit"]
    assert [(s.source, len(s.starts)) for s in sets] == [("hook", 5)]


def test_inference_falls_back_to_dataloader_iterations_then_model_calls(tmp_path):
    m, dl = _model(), _loader(8)

    def with_loader():
        with torch.no_grad():
            for x, _ in dl:
                m(x)
    sets, counts, _ = record(with_loader, tmp_path)
    assert counts["optimizer_steps"] == 0 and counts["fetches"] == 9  # the last one ends the epoch
    assert [(s.name, len(s.starts)) for s in sets] == [("DataLoader iterations", 8)]

    def calls_only():
        with torch.no_grad():
            for _ in range(6):
                m(torch.randn(4, 16))
    sets, _, _ = record(calls_only, tmp_path)
    assert [(s.name, len(s.starts)) for s in sets] == [("model calls", 6)]


@pytest.mark.parametrize("how", ["torch.compile", "module.compile"])
def test_compiled_programs_run_unbroken_and_their_compilation_is_marked(tmp_path, how):
    """fullgraph=True fails on any graph break: the hooks (the main model's hooks are traced by dynamo under
    module.compile) must add none. The compilation is marked, and the steps are the optimizer steps."""
    torch._dynamo.reset()
    m, dl = _model(), _loader(6)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)

    def program():
        model = torch.compile(m, fullgraph=True, backend="aot_eager") if how == "torch.compile" else m
        if how == "module.compile":
            model.compile(fullgraph=True, backend="aot_eager")
        for x, y in dl:
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    sets, counts, tl = record(program, tmp_path)
    assert counts["compiles"] >= 1 and counts["optimizer_steps"] == 6
    comp = tl.marks[tl.marks["name"] == hooks.COMPILE]
    assert len(comp) >= 1 and (comp["end_ns"] > comp["start_ns"]).all()
    assert [(s.source, len(s.starts)) for s in sets] == [("hook", 6)]
    # the first step holds the compilation: the steady rule names it
    import numpy as np
    from nsighttc.analysis import intervals
    from nsighttc.analysis.timeline import Thresholds
    no_gpu = intervals.union(np.array([]), np.array([]))
    fams = steps_mod.families(sets, no_gpu, np.array([]), np.array([]), Thresholds(), steps_mod.compile_union(tl.marks))
    assert "torch.compile" in fams[0]["warmup_reasons"][0]


def test_hooks_leave_nothing_behind():
    from torch import nn
    call, nxt, back, comp = nn.Module.__call__, torch.utils.data.dataloader._BaseDataLoaderIter.__next__, \
        torch.autograd.backward, torch.compile
    marks = hooks.install()
    assert nn.Module.__call__ is not call and torch.compile is not comp
    marks.remove()
    assert (nn.Module.__call__, torch.utils.data.dataloader._BaseDataLoaderIter.__next__, torch.autograd.backward,
            torch.compile) == (call, nxt, back, comp)
    assert not sys.modules["torch.optim.optimizer"]._global_optimizer_post_hooks


def test_the_launcher_marks_a_program_that_imports_torch_itself(tmp_path):
    """Through the launcher, as every engine runs it: the hooks install when the program imports torch (the
    launcher does not import it for the nsys/ncu engines), and the torch engine's trace holds the steps."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Linear(16, 4)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(40, 16)), batch_size=8)\n"
        "for (x,) in dl:\n"
        "    m(x).sum().backward(); opt.step(); opt.zero_grad()\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    for torch_trace in (None, tmp_path / "t.json"):
        argv = [sys.executable, "-m", "nsighttc.runtime.launch", *(["--torch-trace", str(torch_trace)] if torch_trace
                                                                   else []), "--", str(script)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
        assert r.returncode == 0, r.stderr
        line = next(ln for ln in r.stderr.splitlines() if ln.startswith("nsighttc.launch: step marks: "))
        counts = json.loads(line.split("step marks: ", 1)[1])
        assert counts["optimizer_steps"] == 5 and counts["fetches"] == 6 and counts["model"] == "Linear"
    tl = load(tmp_path / "t.json").timeline
    assert (tl.marks["name"] == hooks.STEP).sum() == 6  # 5 steps and the open tail
    off = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--step-marks", "off", "--", str(script)],
                         capture_output=True, text=True, timeout=180, env=env)
    assert off.returncode == 0 and "step marks" not in off.stderr


class _Graph:
    """A stand-in for ``torch.cuda.CUDAGraph`` on the CPU: its replay runs the captured step's math (a real replay
    launches the captured kernels; the optimizer's step inside it calls no hook)."""

    def __init__(self, fn):
        self.fn = fn

    def replay(self):
        self.fn()


def test_a_loop_replaying_its_own_graph_has_one_step_per_replay(tmp_path):
    """The H200 case: three eager warm-up steps, then the captured step replayed (2,000 times there): read before as
    3 steady steps with the replays unseen. Each replay from the program's loop is an iteration now."""
    m = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def step():
        torch.nn.functional.cross_entropy(m(x), y).backward()

    def program():
        for _ in range(3):
            step()
            opt.step()
            opt.zero_grad()
        g = _Graph(lambda: (torch.tanh(x @ x.T), None))
        for _ in range(12):
            x.copy_(torch.randn(8, 16))
            g.replay()
    marks = hooks.install()
    loop_hooks._hook_graph_replays(marks, cls=_Graph)
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            program()
            marks.finish()
    finally:
        counts = marks.record()
        marks.remove()
    assert counts["replays"] == 12 and counts["optimizer_steps"] == 3
    assert counts["steps"] == 3 + 11 and counts["open_step_at_exit"]  # the last replay's step: nothing closed it
    assert _Graph.replay.__name__ == "replay" and not hasattr(_Graph.replay, "__wrapped__")  # hook removed
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    tl = load(trace).timeline
    assert int((tl.marks["name"] == hooks.STEP).sum()) >= 14


def test_replays_inside_a_model_call_are_the_models_not_the_loops(tmp_path):
    """CUDA graphs a model replays inside its own call (torch.compile's CUDA-graph trees, make_graphed_callables):
    the loop's iterations stay the model's calls."""
    class Graphed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 4)
            self.g = _Graph(lambda: None)

        def forward(self, x):
            self.g.replay()
            self.g.replay()
            return self.lin(x)
    m = Graphed()

    def program():
        with torch.no_grad():
            for _ in range(6):
                m(torch.randn(2, 16))
    marks = hooks.install()
    loop_hooks._hook_graph_replays(marks, cls=_Graph)
    try:
        program()
        marks.finish()
    finally:
        counts = marks.record()
        marks.remove()
    assert counts.get("replays", 0) == 0 and counts["model_calls"] == 6 and counts["steps"] == 5


class _Clock:
    """The window's clock, moved by the program (a step's time is what the test says it took)."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _serve(window, clock, eager_ms, replays: int, replay_ms: float = 0.5):
    """A server as ``wrappers/graph_serve.py`` is written: eager calls of the model (the warm-up, then the capture: a
    call each), then one replay of a captured graph per batch. Returns the step hooks' counts."""
    from nsighttc.runtime.window_end import WindowDone
    m = _model()
    x = torch.randn(2, 16)
    marks = hooks.install()
    marks.window = window
    loop_hooks._hook_graph_replays(marks, cls=_Graph)
    try:
        with torch.no_grad():
            for ms in eager_ms:
                clock.t += ms / 1e3
                m(x)
            g = _Graph(lambda: None)
            for _ in range(replays):
                clock.t += replay_ms / 1e3
                g.replay()
        marks.finish()
    except WindowDone:
        pass
    finally:
        counts = marks.record()
        marks.remove()
    return counts


def test_a_warm_up_that_turns_into_graph_replays_starts_again_on_them():
    """Eager calls that never agree (the warm-up and the captures: a new shape each, H200 graph_serve 1.6-65 ms), then
    replays: the warm-up starts again on the replays, so the window holds replays only and is sized on them."""
    from nsighttc.runtime.window import Window
    from nsighttc.runtime.window_recorders import Recorder
    clock, said = _Clock(), []
    win = Window(stop=False, recorder=Recorder(), clock=clock, emit=said.append)
    win.unrecorded = False
    counts = _serve(win, clock, [4.4, 65.5, 2.9, 71.7, 3.9, 19.0, 1.2, 30.0], replays=60)
    assert counts["replays"] == 60
    kinds = [e["event"] for e in win.events]
    assert kinds[0] == "replays" and win.events[0]["warmup_again"] and "start" in kinds
    start = next(e for e in win.events if e["event"] == "start")
    assert start["median_ms"] == pytest.approx(0.5, rel=0.01) and start["warmup"] <= 6
    from nsighttc.profile.running import describe
    from nsighttc.runtime.window_events import read_events
    assert "warm-up starts again" in describe(read_events(said)[0])  # (the profile run's progress line)


def test_a_window_under_way_when_the_replays_begin_says_so_and_its_eager_warm_up_is_no_replays_speed():
    """The window started on steady eager calls (a cached run recording from its window): the steps timed unrecorded
    before it were eager calls, no measure of what the recording costs a replay (H200 graph_serve, cached: "842 µs
    unrecorded ... no faster (0.63x)" from two eager calls and two replays, where a replay took 0.46 ms). The window
    says where the replays began, and the unrecorded speed is the replays' after it."""
    from nsighttc.profile.window import unrecorded_steps
    from nsighttc.runtime.window import Window
    from nsighttc.runtime.window_recorders import TorchRecorder
    clock = _Clock()
    rec = TorchRecorder(finish=lambda: None, start=lambda: None, clock=clock)  # (recording from the window's start)
    win = Window(stop=True, recorder=rec, clock=clock, emit=lambda line: None, steps_max=10)
    _serve(win, clock, [3.0] * 12, replays=200)
    kinds = [e["event"] for e in win.events]
    assert kinds.index("start") < kinds.index("replays") < kinds.index("unrecorded"), kinds
    start = win.events[kinds.index("start")]
    assert start["unrecorded_before_ms"] and all(x == pytest.approx(3.0) for x in start["unrecorded_before_ms"])
    got = unrecorded_steps(win.events)
    assert got["median_ms"] == pytest.approx(0.5, rel=0.01) and got["when"] == "after", got
