"""Checks of issue 45's host stack samples against what they must match (reports/host_frames/).

  python3 benchmarks/host_frames_check.py cost WORK
      The sampler's cost: runs WORK/runs_cost_<prog>_{on,off}_<round>/ (benchmarks/gpu/gpu_host_frames.sh cost) made
      alternately with and without host samples; per program, each round's median steady step (timeline.steps) and the
      ratio of the medians over the rounds, on/off, with the sampler's own CPU time share.
  python3 benchmarks/host_frames_check.py cpu [ROUNDS]
      The sampler's cost without a GPU: a PyTorch CPU training loop (a small MLP, 400 steps: ~1-2 ms of host work per
      step, as launch-heavy steps are) run by the launcher with and without --host-samples, alternating, ROUNDS (3)
      each; the loop's own time per round and the ratio of the medians, with the sampler's CPU time per sample.
  python3 benchmarks/host_frames_check.py pyspy RUN_DIR PYSPY_RAW
      The top host frame of a run (verdict.json's timeline.host_frames, from its host_samples.json) against py-spy run
      separately on the same program (``py-spy record -f raw``): the share of the program's loop time (samples whose
      stack holds the loop's function, so start-up is left out on both sides) spent at the top row's site line, in
      the function it calls. Both are shares of *all* host time in the loop, not of the idle time, since py-spy
      cannot tell when the GPU idled. The run's samples count by the time each stands for (``dt_ns``), as the
      analysis weighs them.
  python3 benchmarks/host_frames_check.py bias [ROUNDS]
      Whether the in-process sampler sees pure-Python code as often as its time says: a CPU loop alternating a list
      comprehension with matrix products (which release the interpreter's lock), timed by its own clock, under the
      launcher with --host-samples and under py-spy (`pip install py-spy`); the Python share by the program's clock,
      by py-spy, by our samples counted one each and weighed by their span.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PYSPY_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


def cost(work: Path) -> None:
    rows: dict[str, dict[str, list]] = {}
    for d in sorted(work.glob("runs_cost_*")):
        m = re.match(r"runs_cost_(\w+?)_(on|off)_(\d+)$", d.name)
        run = next(iter(sorted(d.glob("*/verdict.json"))), None)
        if not m or run is None:
            continue
        doc = json.loads(run.read_text())
        st = doc["timeline"].get("steps") or {}
        hf = doc["timeline"].get("host_frames") or {}
        rows.setdefault(m[1], {"on": [], "off": [], "cost": []})[m[2]].append(st.get("median_iteration_ns"))
        if m[2] == "on":
            rows[m[1]]["cost"].append(hf.get("sampler_cost_share"))
    for prog, r in rows.items():
        on = [x for x in r["on"] if x]
        off = [x for x in r["off"] if x]
        ratio = statistics.median(on) / statistics.median(off) if on and off else None
        print(json.dumps({"program": prog, "on_ms": [round(x / 1e6, 2) for x in on],
                          "off_ms": [round(x / 1e6, 2) for x in off],
                          "ratio_on_off": round(ratio, 4) if ratio else None,
                          "sampler_cpu_share": [round(c, 4) if c is not None else None for c in r["cost"]]}))


def _ours(run: Path) -> tuple[dict, float, float, str]:
    """(the top row, its share of the loop's samples, of the idle ones, the loop's function)."""
    from nsighttc.parse import host_samples
    doc = json.loads((run / "verdict.json").read_text())
    top = doc["timeline"]["host_frames"]["rows"][0]
    hs = host_samples.read(run / "host_samples.json")
    fr = hs.frames
    site = fr.index[(fr["file"].str.endswith(top["file"])) & (fr["line"] == top["line"])
                    & (fr["function"] == top["frame"])].tolist()
    loop_fn = top["frame"]  # the trunk's last function is the site's function
    in_loop = hit = 0
    for s, n in hs.samples.groupby("stack")["dt_ns"].sum().items():  # (time-weighted, as the analysis counts)
        ids = list(hs.stacks[int(s)])
        funcs = [fr["function"].iat[i] for i in ids]
        if loop_fn not in funcs:
            continue
        in_loop += n
        if any(i in site for i in ids):
            pos = next(k for k, i in enumerate(ids) if i in site)
            callee = next((fr["function"].iat[i] for i in reversed(ids[:pos])), None) if pos else None
            inner = [fr["function"].iat[i] for i in ids[:pos]]
            if top.get("calls") is None or top["calls"] in inner or callee == top["calls"]:
                hit += n
    return top, hit / in_loop if in_loop else 0.0, top["share"], loop_fn


def _same_function(name: str, short: str) -> bool:
    return name == short or name.rsplit(".", 1)[-1] == short


def pyspy(run: Path, raw: Path) -> None:
    top, ours, idle_share, loop_fn = _ours(run)
    short = loop_fn.rsplit(".", 1)[-1]
    calls = (top.get("calls") or "").rsplit(".", 1)[-1] or None
    in_loop = hit = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = [PYSPY_FRAME.match(f) for f in stack.split(";")]
        frames = [f for f in frames if f]
        # (py-spy 0.4 names methods with their class, `Trainer._run_epoch`; older ones without: either matches)
        if not any(_same_function(f["func"], short) for f in frames):
            continue
        n = int(count)
        in_loop += n
        for k, f in enumerate(frames):
            if _same_function(f["func"], short) and top["file"].endswith(Path(f["file"]).name) \
                    and int(f["line"]) == top["line"]:
                below = [g["func"].rsplit(".", 1)[-1] for g in frames[k + 1:]]
                if calls is None or calls in below:
                    hit += n
                break
    theirs = hit / in_loop if in_loop else 0.0
    print(json.dumps({"run": str(run), "top_row": f"{top['frame']} {top['file']}:{top['line']} -> {top.get('calls')}",
                      "share_of_idle": round(idle_share, 3), "share_of_loop_ours": round(ours, 3),
                      "share_of_loop_pyspy": round(theirs, 3), "pyspy_loop_samples": in_loop,
                      "difference_points": round(100 * abs(ours - theirs), 1)}))


CPU_LOOP = """
import time, torch
torch.set_num_threads(1)
m = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(8)])
opt = torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=False)
x = torch.randn(32, 128)
for i in range(50):
    m(x).sum().backward(); opt.step(); opt.zero_grad()
t0 = time.perf_counter()
for i in range(400):
    m(x).sum().backward(); opt.step(); opt.zero_grad()
print("loop_s", time.perf_counter() - t0)
"""


def cpu(rounds: int = 3) -> None:
    import subprocess
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="nsighttc-sampler-cost-"))
    prog = d / "loop.py"
    prog.write_text(CPU_LOOP)
    times: dict[str, list[float]] = {"on": [], "off": []}
    per_sample, shares = [], []
    for _ in range(rounds):
        for mode in ("off", "on"):
            argv = [sys.executable, "-m", "nsighttc.runtime.launch"]
            if mode == "on":
                argv += ["--host-samples", str(d / "host_samples.json")]
            out = subprocess.run(argv + ["--", str(prog)], capture_output=True, text=True, check=True).stdout
            times[mode].append(float(out.split("loop_s", 1)[1].split()[0]))
            if mode == "on":
                doc = json.loads((d / "host_samples.json").read_text())
                per_sample.append(doc["cost_ns"] / max(len(doc["t"]), 1))
                shares.append(doc["cost_ns"] / max(doc["t"][-1] - doc["t"][0], 1))
    ratio = statistics.median(times["on"]) / statistics.median(times["off"])
    print(json.dumps({"on_s": [round(x, 4) for x in times["on"]], "off_s": [round(x, 4) for x in times["off"]],
                      "ratio_on_off": round(ratio, 4), "sampler_cpu_us_per_sample": round(statistics.median(per_sample) / 1e3, 1),
                      "sampler_cpu_share": round(statistics.median(shares), 4)}))


BIAS_LOOP = """
import time, torch
torch.set_num_threads(1)
a = torch.randn(600, 600)
def python_work():
    return [((i * 31 + k) * 2654435761) % 30521 for k in range(180000)]
def c_work():
    for _ in range(6):
        a @ a
tp = tc = 0
for i in range(150):
    s = time.perf_counter(); python_work(); tp += time.perf_counter() - s
    s = time.perf_counter(); c_work(); tc += time.perf_counter() - s
print("python_share", tp / (tp + tc))
"""


def bias(rounds: int = 2) -> None:
    import shutil
    import subprocess
    import tempfile
    from nsighttc.parse import host_samples
    d = Path(tempfile.mkdtemp(prefix="nsighttc-sampler-bias-"))
    prog = d / "loop.py"
    prog.write_text(BIAS_LOOP)
    for r in range(rounds):
        out = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--host-samples", str(d / "hs.json"),
                              "--", str(prog)], capture_output=True, text=True, check=True).stdout
        own = float(out.split("python_share", 1)[1].split()[0])
        hs = host_samples.read(d / "hs.json")
        fr = hs.frames
        in_py = [any(fr["function"].iat[i] == "python_work" for i in hs.stacks[int(k)]) for k in hs.samples["stack"]]
        in_c = [any(fr["function"].iat[i] == "c_work" for i in hs.stacks[int(k)]) for k in hs.samples["stack"]]
        dt = hs.samples["dt_ns"].to_numpy()
        n_py, n_c = sum(in_py), sum(in_c)
        w_py = sum(x for x, y in zip(dt, in_py) if y)
        w_c = sum(x for x, y in zip(dt, in_c) if y)
        row = {"round": r + 1, "program_clock": round(own, 3), "ours_counted": round(n_py / max(n_py + n_c, 1), 3),
               "ours_weighted": round(w_py / max(w_py + w_c, 1), 3)}
        if shutil.which("py-spy"):
            raw = d / "pyspy.txt"
            subprocess.run(["py-spy", "record", "-r", "200", "-f", "raw", "-o", str(raw), "--", sys.executable,
                            str(prog)], capture_output=True, text=True, check=True)
            py = c = 0
            for line in raw.read_text().splitlines():
                stack, _, n = line.rpartition(" ")
                if n.isdigit():
                    py += int(n) if "python_work" in stack else 0
                    c += int(n) if "c_work" in stack else 0
            row["pyspy"] = round(py / max(py + c, 1), 3)
        print(json.dumps(row))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "bias":
        bias(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
        sys.exit(0)
    if len(sys.argv) >= 2 and sys.argv[1] == "cpu":
        cpu(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
    elif len(sys.argv) >= 3 and sys.argv[1] == "cost":
        cost(Path(sys.argv[2]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "pyspy":
        pyspy(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit(__doc__)
