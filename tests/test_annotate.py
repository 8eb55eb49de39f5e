"""The annotation API and the launcher: ranges reach torch.profiler; no-ops without a profiler."""
import json
import subprocess
import sys

import pytest

from nsighttc import annotate


def test_range_is_a_context_manager_and_a_decorator():
    seen = []

    @annotate.range("decorated")
    def f(x):
        seen.append(x)
        return x * 2

    with annotate.range("outer"):
        assert f(3) == 6
    assert seen == [3]
    assert annotate.range("x").__exit__(None, None, None) is False  # never swallows exceptions


def test_ranges_become_profiler_labels():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    annotate.annotate_model(model)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with annotate.step():
            with annotate.range("data"):
                x = torch.randn(4, 8)
            model(x)
    names = {e.name for e in prof.events()}
    assert {"step", "data", "Sequential", "Sequential.0", "Sequential.2"} <= names


def test_no_profiler_no_torch_labels():
    pytest.importorskip("torch")
    r = annotate.range("quiet")
    with r:
        assert r._rf is None  # record_function is only used inside a profiler session


def test_launcher_runs_the_script_unchanged_and_writes_a_trace(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "prog.py"
    script.write_text("import sys, torch\nprint('args', sys.argv[1:], __name__)\n"
                      "m = torch.nn.Linear(4, 4)\nm(torch.randn(2, 4))\nsys.exit(7)\n")
    trace = tmp_path / "t.json"
    proc = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--annotate", "modules", "--torch-trace", str(trace),
                           "--", str(script), "a", "b"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 7  # the script's own exit code
    assert "args ['a', 'b'] __main__" in proc.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    labels = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    assert {"prog.py", "Linear"} <= labels


def test_cpu_only_trace_gives_a_no_gpu_work_verdict(tmp_path):
    pytest.importorskip("torch")
    import nsighttc
    script = tmp_path / "prog.py"
    script.write_text("import torch\nfor _ in range(3):\n    torch.randn(64, 64) @ torch.randn(64, 64)\n")
    trace = tmp_path / "t.json"
    subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--torch-trace", str(trace), "--", str(script)],
                   check=True, capture_output=True, timeout=300)
    doc = nsighttc.analyze([trace]).to_json()
    assert doc["timeline"]["verdict"] == "no-gpu-work"
