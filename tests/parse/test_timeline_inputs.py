"""Bad timeline inputs: one line, exit 2; a trace without GPU work gets a verdict saying so."""
import gzip
import json
import sqlite3

from tests.conftest import KINETO, fixture_open


def _one_line(err, path, words):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0] and words in lines[0]
    assert "Traceback" not in err


def test_not_sqlite_but_named_like_it(run_cli, tmp_path):
    f = tmp_path / "run.sqlite"
    f.write_text("hello, not a database\n")
    code, _, err = run_cli("analyze", f)
    assert code == 2
    _one_line(err, f, "not a")


def test_sqlite_without_kernel_table(run_cli, tmp_path, nsys_sqlite):
    con = sqlite3.connect(nsys_sqlite)
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.close()
    code, _, err = run_cli("analyze", nsys_sqlite)
    assert code == 2
    _one_line(err, nsys_sqlite, "CUPTI_ACTIVITY_KIND_KERNEL")


def test_foreign_sqlite(run_cli, tmp_path):
    f = tmp_path / "app.db"
    con = sqlite3.connect(f)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    code, _, err = run_cli("analyze", f)
    assert code == 2
    _one_line(err, f, "not an Nsight Systems export")


def test_export_without_optional_tables_still_works(nsys_sqlite):
    import nsighttc
    con = sqlite3.connect(nsys_sqlite)
    for t in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "TARGET_INFO_GPU"):
        con.execute(f"DROP TABLE {t}")
    con.commit()
    con.close()
    doc = nsighttc.analyze([nsys_sqlite]).to_json()
    assert doc["timeline"]["kernels"] > 0 and doc["ranges"] == []


def test_truncated_json(run_cli, tmp_path):
    raw = fixture_open(KINETO).read()
    f = tmp_path / "trace.json"
    f.write_bytes(raw[: len(raw) // 2])
    code, _, err = run_cli("analyze", f)
    assert code == 2
    _one_line(err, f, "truncated or malformed JSON")


def test_json_without_trace_events(run_cli, tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model": "resnet", "events": []}))
    code, _, err = run_cli("analyze", f)
    assert code == 2
    _one_line(err, f, "traceEvents")


def test_trace_without_gpu_events_says_no_gpu_work(run_cli, tmp_path):
    doc = json.load(fixture_open(KINETO))
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")]
    f = tmp_path / "cpu_only.json"
    f.write_text(json.dumps(doc))
    code, out, err = run_cli("analyze", f, "--format", "json")
    assert code == 0
    res = json.loads(out)
    assert res["timeline"]["verdict"] == "no-gpu-work"
    assert res["tensor_cores"]["launches"] == 0
    assert "no GPU work" in err
    code, out, _ = run_cli("analyze", f)
    assert "launched no GPU work" in out


def test_nsys_rep_without_nsys_is_a_clear_error(run_cli, monkeypatch, tmp_path):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"NVIDIA Tegra Profiler Report 363" + b"\x00" * 64)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("nsighttc.collect.tools._SEARCH", {"ncu": [], "nsys": []})
    code, _, err = run_cli("analyze", rep)
    assert code == 2
    _one_line(err, rep, "nsys export")


def test_qdstrm_left_by_a_broken_importer(run_cli, tmp_path):
    f = tmp_path / "report1.qdstrm"
    f.write_bytes(b"\x00\x01qdstrm")
    code, _, err = run_cli("analyze", f)
    assert code == 2
    _one_line(err, f, "importer")


def test_deeply_nested_json_is_refused_at_once(tmp_path, run_cli):
    """Issue 14: `[[[[...]]]]` 100,000 deep (200 KB) ran past 30 s; it must answer at once, exit 2, name the file."""
    import time
    f = tmp_path / "deep.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    t0 = time.monotonic()
    code, out, err = run_cli("analyze", f)
    assert time.monotonic() - t0 < 5
    assert code == 2 and str(f) in err and "nested" in err and len(err.strip().splitlines()) == 1


def test_nsys_reader_without_adbc_gives_the_same_tables(nsys_sqlite, monkeypatch):
    """The stdlib sqlite3 path (no ADBC driver) reads timestamps as floats and ids as integers exactly like the
    Arrow path: same kernel table, GPU ops, API calls and verdict."""
    import sys
    import pandas as pd
    from nsighttc.parse import nsys_sqlite as reader
    fast = reader.read(nsys_sqlite)
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite.dbapi", None)
    slow = reader.read(nsys_sqlite)
    pd.testing.assert_frame_equal(fast.kernels, slow.kernels, check_exact=True)
    for t in ("gpu_ops", "api", "ranges"):
        a, b = getattr(fast.timeline, t), getattr(slow.timeline, t)
        pd.testing.assert_frame_equal(a, b, check_dtype=False, check_exact=True)
        assert a["start_ns"].dtype == b["start_ns"].dtype == "float64"
    assert len(fast.kernels) > 100
