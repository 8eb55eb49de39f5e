"""nsighttc.runtime.recording: torch.profiler with the ranges only records the ranges and no operator."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from nsighttc.runtime import recording  # noqa: E402


def _record(tmp_path, operators: bool):
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    said = recording.start(prof, operators)
    for _ in range(20):
        with torch.profiler.record_function("step"):
            m(torch.randn(4, 8)).sum().backward()
    prof.__exit__(None, None, None)
    out = tmp_path / f"trace-{operators}.json"
    prof.export_chrome_trace(str(out))
    events = json.loads(out.read_text())["traceEvents"]
    return said, [e for e in events if e.get("cat") == "cpu_op"], [e for e in events if e.get("name") == "step"]


def test_ranges_only_keeps_the_ranges_and_drops_every_operator(tmp_path):
    said, ops, steps = _record(tmp_path, operators=False)
    assert said is False and ops == [] and len(steps) == 20
    said, ops, steps = _record(tmp_path, operators=True)
    assert said is True and len(ops) > 100 and len(steps) == 20
    # the patch lasted only while the profiler started: a later profiler records operators again
    import torch.autograd.profiler as ap
    assert ap._enable_profiler.__name__ != "ranges_only"


def test_a_profiler_that_starts_some_other_way_says_it_records_operators(capsys):
    class Elsewhere:  # a torch whose profiler does not enable itself through autograd.profiler._enable_profiler
        entered = False

        def __enter__(self):
            self.entered = True

    prof = Elsewhere()
    assert recording.start(prof, operators=False) is True and prof.entered
    assert "did not take the ranges-only scope" in capsys.readouterr().err


TWO_SESSIONS = """
import os, torch
mode = os.environ["MODE"]
m = torch.nn.Linear(16, 16); opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(8, 16)
def loop():
    for i in range(40):
        if mode == "optimizer-only":  # no model call, fetch or backward: the steps end inside Optimizer.step#...
            for p in m.parameters():
                p.grad = torch.ones_like(p)
            opt.step()
        else:
            opt.zero_grad(); m(x).sum().backward(); opt.step()
if mode == "outer":  # the program's own record_function around its whole loop: never closed before the end
    with torch.profiler.record_function("outer"):
        loop()
else:
    loop()
"""


def _launch(tmp_path, mode: str):
    import os
    import subprocess
    import sys
    prog = tmp_path / "prog.py"
    prog.write_text(TWO_SESSIONS)
    trace, ops = tmp_path / f"{mode}.json", tmp_path / f"{mode}.ops.json"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--window", "--window-warmup", "4",
                           "--window-steps", "6", "--window-end", "continue", "--torch-trace", str(trace),
                           "--record-shapes", "--ops-trace", str(ops), "--", str(prog)],
                          capture_output=True, text=True, env={**os.environ, "MODE": mode}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return trace, ops, proc.stderr


def _events(path):
    return json.loads(path.read_text())["traceEvents"]


@pytest.mark.parametrize("mode", ["model", "optimizer-only"])
def test_a_first_run_records_operators_until_the_window_and_the_window_with_the_ranges_only(tmp_path, mode):
    from nsighttc.runtime.recording import OPS_WRITTEN
    trace, ops, err = _launch(tmp_path, mode)
    assert f"{OPS_WRITTEN}{ops}" in err and "recorded from" in err and "ranges only" in err
    before, window = _events(ops), _events(trace)
    # the operators' trace: every operator with its arguments, until the window
    shaped = [e for e in before if e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {})]
    assert len(shaped) > 50 and any(e["name"] == "aten::addmm" for e in shaped) or mode == "optimizer-only"
    assert sum(e.get("name") == "nsighttc.step" for e in before) >= 3
    # the window: no operator, its steps and the optimizer's labels, every label closed where it began
    assert not any(e.get("cat") == "cpu_op" for e in window)
    steps = [e for e in window if e.get("name") == "nsighttc.step"]
    assert 5 <= len(steps) <= 7
    assert sum(e.get("name", "").startswith("Optimizer.step#") for e in window) >= 6
    assert max(e["ts"] for e in before if "ts" in e and e.get("ph") == "X") <= \
        min(e["ts"] for e in steps)  # the window's steps come after everything the operators' trace holds
    # the launcher's top range, open across the change, is in both (ended under the first, begun under the second)
    assert any(e.get("name") == "prog.py" for e in before) and any(e.get("name") == "prog.py" for e in window)


def test_a_record_function_open_across_the_window_keeps_one_session(tmp_path):
    trace, ops, err = _launch(tmp_path, "outer")
    assert not ops.exists() and "wrote operators" not in err and "ranges only" not in err
    whole = _events(trace)
    assert any(e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {}) for e in whole)
    assert sum(e.get("name") == "nsighttc.step" for e in whole) >= 8


GENERATE = """
import torch, transformers
cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                               pad_token_id=0, bos_token_id=1, eos_token_id=2)
torch.manual_seed(0)
model = transformers.LlamaForCausalLM(cfg).eval()
with torch.inference_mode():
    for r in range(6):
        ids = torch.randint(3, 64, (1, 8), generator=torch.Generator().manual_seed(r))
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=TOKENS,
                       min_new_tokens=TOKENS, do_sample=False)
"""


def test_a_generation_loops_first_run_records_operators_only_until_its_warm_up_is_steady(tmp_path):
    """Issue 56: a generate() loop's window starts at a request's prefill, a whole request after its warm-up settled.
    The operators with their arguments (what the replay reads) end where the warm-up's steps are steady: the first
    request's prefill and a few decode calls, not its every call (115 ms a call against 12 ms plain on an H100).
    The rest of the warm-up and the window are recorded with the ranges only."""
    import os
    import subprocess
    import sys
    pytest.importorskip("transformers")
    from nsighttc.runtime import window as win
    from nsighttc.runtime import window_sizing as sizing
    from nsighttc.runtime.recording import OPS_WRITTEN
    tokens = 60  # (long enough a request for its decode calls to settle within it on a loaded 2-core machine)
    prog = tmp_path / "gen.py"
    prog.write_text(GENERATE.replace("TOKENS", str(tokens)))
    trace, ops = tmp_path / "trace.json", tmp_path / "ops.json"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--window", "--window-end", "stop",
                           "--torch-trace", str(trace), "--record-shapes", "--ops-trace", str(ops), "--", str(prog)],
                          capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{OPS_WRITTEN}{ops}" in proc.stderr
    events = [json.loads(ln.split(win.EVENT_PREFIX, 1)[1]) for ln in proc.stderr.splitlines() if win.EVENT_PREFIX in ln]
    start = next(e for e in events if e["event"] == "start")
    assert start["warmup"] % tokens == 0  # the window starts at a request's prefill
    before, after = _events(ops), _events(trace)
    calls_before = sum(e.get("name") == "nsighttc.forward" for e in before)
    # the prefill and the steady decode calls, then no more arguments: fewer calls than the request held
    assert any(e.get("name") == "nsighttc.prefill" for e in before)
    assert sizing.STEADY_RUN <= calls_before < tokens
    assert any(e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {}) for e in before)
    # the rest of the warm-up and the window: the ranges only, the window's whole requests in it
    assert not any(e.get("cat") == "cpu_op" for e in after)
    end = next(e for e in events if e["event"] == "end")
    assert end["steps"] % tokens == 0 and end["steps"] >= tokens  # whole requests
    assert sum(e.get("name") == "nsighttc.forward" for e in after) >= end["steps"]
    assert max(e["ts"] for e in before if e.get("ph") == "X") <= min(
        e["ts"] for e in after if e.get("name") == "nsighttc.forward")


def test_a_record_function_open_across_the_window_of_a_program_that_ends_inside_it_keeps_the_window(tmp_path):
    """The program's `outer` range stays open to its end and the program ends inside its window: the change of
    sessions asked for at the window's start cannot run then, and before, it ran when `outer` closed after the loop,
    stopping the session that held the window (its steps went into the operators' trace, the timeline had none).
    Now it is given up at once: one session holds the window to the end."""
    import os
    import subprocess
    import sys
    prog = tmp_path / "prog.py"
    prog.write_text(TWO_SESSIONS)
    trace, ops = tmp_path / "outer.json", tmp_path / "outer.ops.json"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--window", "--window-warmup", "4",
                           "--window-steps", "200", "--window-end", "stop", "--torch-trace", str(trace),
                           "--record-shapes", "--ops-trace", str(ops), "--", str(prog)],
                          capture_output=True, text=True, env={**os.environ, "MODE": "outer"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not ops.exists() and "the change is given up" in proc.stderr
    steps = [e for e in _events(trace) if e.get("name") == "nsighttc.step"]
    assert len(steps) >= 30  # the window's steps (from the 5th to the program's end) are in the timeline


WORKER_COUNTS_ITS_OPS = """
import json, os, torch
class Items(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        x = torch.rand(3, 8, 8)
        for _ in range(5):
            x = torch.flip(x, dims=(1,))
        if i:
            return x, -1
        # the worker's copy of the session opened before the fork, written out: its operators, if any reached it
        # (the trace, not the result's events: a torch with ``trace_only`` keeps none there)
        path = os.path.join(os.environ["OUT_DIR"], "worker.json")
        torch._C._autograd._disable_profiler().save(path)
        with open(path) as f:
            return x, sum(e.get("name") == "aten::flip" for e in json.load(f)["traceEvents"])
m = torch.nn.Linear(8, 8); opt = torch.optim.SGD(m.parameters(), lr=0.01)
loader = torch.utils.data.DataLoader(Items(), batch_size=1, num_workers=1)
for x, n in loader:
    if int(n) >= 0:
        print("FORKED_FLIPS", int(n), flush=True)
    opt.zero_grad(); m(x[0, 0]).sum().backward(); opt.step()
"""


@pytest.mark.parametrize("keep", [False, True])
def test_a_dataloader_worker_forked_while_a_first_run_records_operators_records_none(tmp_path, keep):
    """A worker forked during the first session (every operator with its arguments) used to record each of its own
    operators into a copy of the session nobody writes (H200: a graphed step fed by 2 workers, 103 ms a step against
    73 ms plain); ``NSIGHTTC_RECORD_FORKED=1`` leaves the worker as torch leaves it, which shows what the test sees."""
    import os
    import subprocess
    import sys
    from nsighttc.runtime.forked_children import KEEP_ENV
    prog = tmp_path / "prog.py"
    prog.write_text(WORKER_COUNTS_ITS_OPS)
    env = {k: v for k, v in os.environ.items() if k != KEEP_ENV}
    env["OUT_DIR"] = str(tmp_path)
    if keep:
        env[KEEP_ENV] = "1"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--window", "--window-warmup", "40",
                           "--window-steps", "6", "--window-end", "continue", "--torch-trace",
                           str(tmp_path / "t.json"), "--record-shapes", "--ops-trace", str(tmp_path / "ops.json"),
                           "--", str(prog)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    flips = [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("FORKED_FLIPS")]
    assert flips == ([5] if keep else [0]), proc.stdout + proc.stderr
