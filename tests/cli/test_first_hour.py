"""What a new user meets in the first hour, each a friction found on a fresh clone: gates that validate their numbers,
one line for every bad option, JSON that strict parsers read, help that says what the code does, a saved verdict read
gzipped, a demo that does not print where the package lies, and a failed baseline that stops ``try`` at once."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERDICT = ROOT / "reports" / "examples" / "nsys_plus_ncu_merged" / "verdict.json.gz"  # (read gzipped as saved)
JOB = ROOT / "tests" / "fixtures" / "ddp" / "straggler_torch"


@pytest.mark.parametrize("gate", ["--max-tc-drop", "--max-busy-drop", "--max-slowdown", "--max-comm-rise"])
@pytest.mark.parametrize("value", ["-50", "nan", "inf", "-inf", "1e400"])
def test_diff_rejects_a_gate_that_is_negative_or_not_a_number_with_one_line(run_cli, gate, value):
    code, out, err = run_cli("diff", VERDICT, VERDICT, f"{gate}={value}")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("nsighttc: error: ") and gate in err and "--help" in err


@pytest.mark.parametrize("option,value", [("--cpu-bound", "nan"), ("--min-wall-ms", "inf"), ("--yes-threshold", "2")])
def test_analyze_rejects_numbers_out_of_range_with_one_line(run_cli, option, value):
    code, _, err = run_cli("analyze", VERDICT, option, value)
    assert code == 2 and len(err.strip().splitlines()) == 1 and option in err, err


def test_a_diff_in_json_is_strict_json(run_cli, tmp_path):
    """A verdict read with NaN in it is refused (JSON has none); the diff's own document never holds one."""
    code, out, _ = run_cli("diff", VERDICT, VERDICT, "--format", "json", "--max-slowdown", "0")
    assert code == 0
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the diff's JSON"))
    assert doc["gate"]["max_slowdown"] == 0.0 and doc["failed"] is False
    bad = tmp_path / "nan.json"
    bad.write_text(gzip.decompress(VERDICT.read_bytes()).decode().replace('"tc_time_share": ', '"tc_time_share": NaN, "x": ', 1))
    code, _, err = run_cli("diff", bad, VERDICT)
    assert code == 2 and "NaN is not a JSON value" in err and len(err.strip().splitlines()) == 1


def test_report_and_diff_read_a_gzipped_verdict_and_name_a_binary_file_in_words(run_cli, tmp_path):
    gz = tmp_path / "verdict.json.gz"
    gz.write_bytes(VERDICT.read_bytes())
    code, out, _ = run_cli("report", gz, "--format", "json")
    assert code == 0 and json.loads(out)["schema"] == "nsighttc.verdict/1"
    code, _, _ = run_cli("diff", gz, VERDICT)
    assert code == 0
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x00\x89PNG\x0d\x0a" + bytes(range(256)))
    code, _, err = run_cli("report", binary)
    assert code == 2 and "binary content, not UTF-8 text" in err and "codec" not in err
    (tmp_path / "cut.json.gz").write_bytes(gz.read_bytes()[:40])
    code, _, err = run_cli("report", tmp_path / "cut.json.gz")
    assert code == 2 and "corrupt or truncated gzip data" in err


def test_report_reads_a_run_directory_whose_verdict_is_xz_compressed(run_cli, tmp_path):
    """reports/ keeps some verdicts as ``verdict.json.xz`` (the clone's size): a run directory holding one reads as any
    other, and a cut one is named in one line."""
    import lzma
    run = tmp_path / "run"
    run.mkdir()
    (run / "verdict.json.xz").write_bytes(lzma.compress(gzip.decompress(VERDICT.read_bytes())))
    code, out, _ = run_cli("report", run, "--format", "json")
    assert code == 0 and json.loads(out)["schema"] == "nsighttc.verdict/1"
    (tmp_path / "cut.json.xz").write_bytes((run / "verdict.json.xz").read_bytes()[:60])
    code, _, err = run_cli("report", tmp_path / "cut.json.xz")
    assert code == 2 and "corrupt or truncated xz data" in err and len(err.strip().splitlines()) == 1


def test_the_demo_names_its_recordings_not_where_the_package_lies(run_cli):
    code, out, _ = run_cli("demo", "--format", "json")
    assert code == 0
    paths = [i["path"] for i in json.loads(out)["inputs"]]
    assert paths == ["demo: h200_loops_nsys.sqlite.xz", "demo: h200_probe_ncu_raw.csv.gz"]
    assert str(ROOT) not in out and "site-packages" not in out


def test_try_help_says_the_speed_up_is_the_mean_steady_step_as_the_code_does(run_cli):
    code, out, _ = run_cli("try", "--help")
    flat = " ".join(out.split())
    assert code == 0 and "mean steady step" in flat and "ratio of median steady steps" not in flat
    from nsighttc.experiment import measure
    assert "**mean**" in measure.__doc__  # the measurement's own words


def test_ranks_analysed_in_processes_are_not_said_to_run_one_by_one_and_the_progress_reaches_the_end(run_cli):
    code, out, err = run_cli("analyze", JOB, "-j", "2", "--format", "json")
    assert code == 0
    notes = json.loads(out)["warnings"]
    assert any("2 ranks analysed each on its own" in n for n in notes) and not any("one by one" in n for n in notes)
    assert "[ranks] all 2 analysed" in err


def test_a_rank_timeout_on_one_recording_says_nothing_of_ranks(run_cli):
    code, _, err = run_cli("analyze", ROOT / "tests" / "fixtures" / "unmarked" / "trainer_torch.json.xz",
                           "--rank-timeout", "60", "--format", "json")
    assert code == 0 and "[ranks]" not in err


def test_a_baseline_that_fails_stops_try_before_any_profiled_run(run_cli, tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("raise SystemExit('cannot open the data set')\n")
    code, out, err = run_cli("try", "--out", tmp_path / "runs", "--variant", "tf32", str(script))
    assert code == 7
    run = next((tmp_path / "runs").iterdir())
    assert sorted(p.name for p in run.iterdir() if p.is_dir()) == ["baseline"]
    assert [p.name for p in (run / "baseline").iterdir()] == ["plain1"]  # no profiled run, no variant run
    doc = json.loads((run / "try.json").read_text())
    assert [v["name"] for v in doc["variants"]] == ["baseline"]
    assert any("the baseline failed (exit code 1: cannot open the data set): nothing else was run" in n
               for n in doc["notes"])
    assert "no predictions" not in err


def test_no_predictions_because_pytorch_is_missing_is_said_in_the_users_terms():
    from nsighttc.experiment import _why_no_verdict
    said = _why_no_verdict("exit code 1: ModuleNotFoundError: No module named 'torch'")
    assert "this Python has no PyTorch" in said and "plain runs need none" in said
    assert _why_no_verdict("exit code 3: boom") == " (exit code 3: boom)" and _why_no_verdict(None) == ""


def test_the_readme_says_try_runs_on_a_cpu():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`nsighttc try` runs on a CPU" in readme
