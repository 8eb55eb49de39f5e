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
