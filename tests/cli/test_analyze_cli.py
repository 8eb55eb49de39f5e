"""`nsighttc analyze` / `demo` end to end on real recordings, and every bad-input path."""
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import RAW, gunzip_text


def test_markdown_headline_and_tables(run_cli):
    code, out, err = run_cli("analyze", RAW)
    assert code == 0
    first_bold = next(line for line in out.splitlines() if line.startswith("**"))
    assert first_bold.startswith("**Tensor Cores: PARTIAL")
    assert "confirmed by hardware counters" in first_bold
    assert "## Top kernels by GPU time" in out and "## NVTX ranges" in out and "## Findings" in out
    assert "| `vgg16_fp16` |" in out


def test_json_output_follows_the_schema_fields(run_cli):
    code, out, _ = run_cli("analyze", RAW, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "nsighttc.verdict/1"
    assert doc["device"] == {"name": "NVIDIA H200", "compute_capability": "9.0"}
    assert set(doc["tensor_cores"]) >= {"verdict", "evidence", "tc_time_share", "by_dtype"}
    k = doc["kernels"][0]
    assert set(k) >= {"name", "calls", "total_time_ns", "tensor_core", "evidence", "dtype", "nvtx"}
    assert sum(x["calls"] for x in doc["kernels"]) == doc["tensor_cores"]["launches"] == 404
    names = {x["name"] for x in doc["kernels"]}
    assert "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT" in names  # exactly as the input spelled it
    r = {x["name"]: x for x in doc["ranges"]}
    assert r["vgg16_fp32"]["tc_time_share"] == 0 and r["mm_fp16"]["tc_time_share"] == 1
    assert all({"id", "severity", "title", "evidence", "advice"} <= set(f) for f in doc["findings"])


def test_findings_name_the_fp32_and_layout_problems(run_cli):
    _, out, _ = run_cli("analyze", RAW, "--format", "json")
    ids = {f["id"] for f in json.loads(out)["findings"]}
    assert {"fp32-matmul-on-cuda-cores", "nchw-layout-transposes", "fp16-conv-on-cuda-cores",
            "misaligned-tensor-core-path"} <= ids


def test_output_file_and_refusal_to_overwrite_an_input(run_cli, tmp_path):
    dest = tmp_path / "v.json"
    code, out, err = run_cli("analyze", RAW, "--format", "json", "-o", dest)
    assert code == 0 and out == "" and json.loads(dest.read_text())["schema"] == "nsighttc.verdict/1"
    copy = tmp_path / "in.csv"
    copy.write_text(gunzip_text(RAW))
    before = copy.read_bytes()
    code, _, err = run_cli("analyze", copy, "-o", copy)
    assert code == 2 and "refusing to overwrite an input" in err
    assert copy.read_bytes() == before


def test_demo_runs_on_shipped_recordings(run_cli):
    code, out, _ = run_cli("demo")
    assert code == 0 and "NVIDIA H200" in out
    bold = [line for line in out.splitlines() if line.startswith("**")]
    assert bold[0].startswith("**Tensor Cores: YES") and bold[1].startswith("**GPU busy") and "CPU-bound" in bold[1]
    code, out, _ = run_cli("demo", "--which", "counters")
    assert code == 0 and "**Tensor Cores: PARTIAL" in out


def _bad(tmp_path):
    text = gunzip_text(RAW)
    cases = {}
    cases["missing"] = (tmp_path / "nope.csv", "no such file")
    (tmp_path / "empty.csv").write_text("")
    cases["empty"] = (tmp_path / "empty.csv", "empty")
    (tmp_path / "cut.csv").write_text(text[: len(text) // 2])
    cases["truncated"] = (tmp_path / "cut.csv", "truncated")
    (tmp_path / "other.csv").write_text("timestamp,cpu,mem\n1,2,3\n")
    cases["other tool"] = (tmp_path / "other.csv", "not an Nsight Compute CSV")
    (tmp_path / "garbage.bin").write_bytes(os.urandom(4096))
    cases["garbage"] = (tmp_path / "garbage.bin", "binary data")
    return cases


@pytest.mark.parametrize("case", ["missing", "empty", "truncated", "other tool", "garbage"])
def test_bad_input_one_line_exit_2(run_cli, tmp_path, case):
    path, words = _bad(tmp_path)[case]
    code, out, err = run_cli("analyze", path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0] and words in lines[0]
    assert "Traceback" not in err


def test_no_traceback_from_the_real_entry_point(tmp_path):
    garbage = tmp_path / "x.ncu-rep.csv"
    garbage.write_text('"ID","Kernel Name"\n"1",')
    proc = subprocess.run([sys.executable, "-m", "nsighttc", "analyze", str(garbage)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and str(garbage) in proc.stderr


def test_the_real_entry_point_ends_with_its_output_complete():
    """`nsighttc` ends its process without the interpreter's shutdown (os._exit): what it printed into a
    pipe must still be all there, and the exit code its own."""
    proc = subprocess.run([sys.executable, "-m", "nsighttc", "analyze", str(RAW), "--format", "json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["tensor_cores"]["verdict"] and len(proc.stdout) > 10_000


def test_bad_file_among_good_ones_still_fails_cleanly(run_cli, tmp_path):
    code, _, err = run_cli("analyze", RAW, tmp_path / "missing.csv")
    assert code == 2 and "missing.csv" in err


def test_help_explains_inputs(run_cli):
    code, out, _ = run_cli("analyze", "--help")
    assert code == 0 and ".ncu-rep" in out and "--page raw" in out
