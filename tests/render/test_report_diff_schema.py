"""Reports for every fixture render; headlines and tables match the analysis; schema; diff gate."""
import json
from pathlib import Path

import jsonschema
import pytest

import nsighttc
from nsighttc.render import markdown
from tests.conftest import DETAILS, KINETO, NCU_REP, RAW, VGG_BASIC, fixture_open

SCHEMA = json.loads((Path(nsighttc.__file__).parent / "schema" / "verdict-1.json").read_text())


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    import gzip
    from tests.conftest import NSYS_SQLITE_GZ
    db = tmp_path_factory.mktemp("db") / "nsys.sqlite"
    db.write_bytes(fixture_open(NSYS_SQLITE_GZ).read())
    cases = {"ncu_raw": [RAW], "ncu_details": [DETAILS], "ncu_vgg_basic": [VGG_BASIC], "ncu_rep": [NCU_REP],
             "nsys": [db], "kineto": [KINETO], "nsys_plus_ncu": [db, RAW]}
    return {k: nsighttc.analyze(v).to_json() for k, v in cases.items()}


def test_every_fixture_validates_against_the_schema(docs):
    for name, doc in docs.items():
        jsonschema.validate(doc, SCHEMA)


def test_every_fixture_renders_and_the_headline_matches_the_analysis(docs):
    for name, doc in docs.items():
        md = markdown.render(doc)
        first = next(line for line in md.splitlines() if line.startswith("**"))
        assert first.startswith(f"**Tensor Cores: {doc['tensor_cores']['verdict'].upper()}"), (name, first)
        if doc.get("timeline"):
            assert f"GPU busy {100 * doc['timeline']['gpu_busy_share']:.0f}%" in md
        # the top-kernels table lists the top kernel with its share and verdict
        k = doc["kernels"][0]
        row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
        assert f"{100 * k['time_share']:.1f}%" in row and {True: "yes", False: "no", None: "unknown"}[k["tensor_core"]] in row
        for f in doc["findings"]:
            assert f["title"] in md


def test_range_table_rows_match(docs):
    doc = docs["ncu_raw"]
    md = markdown.render(doc)
    for r in doc["ranges"]:
        row = next(line for line in md.splitlines() if line.startswith(f"| `{r['name']}` |"))
        assert f"{100 * r['tc_time_share']:.1f}%" in row and r["tc_verdict"] in row


def test_report_command_rerenders_a_saved_verdict(run_cli, tmp_path, docs):
    f = tmp_path / "verdict.json"
    f.write_text(json.dumps(docs["nsys_plus_ncu"]))
    code, out, _ = run_cli("report", f)
    assert code == 0 and out.strip() == markdown.render(docs["nsys_plus_ncu"]).strip()
    out_md = tmp_path / "r" / "report.md"
    out_md.parent.mkdir()
    code, _, _ = run_cli("report", f, "-o", out_md)
    assert code == 0 and (out_md.parent / "timeline.png").stat().st_size > 10_000
    assert "![GPU activity timeline](timeline.png)" in out_md.read_text()
    code, _, err = run_cli("report", tmp_path / "nope.json")
    assert code == 2 and "no such file" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something/9"}')
    code, _, err = run_cli("report", bad)
    assert code == 2 and "not an nsighttc verdict" in err


def _case(run_cli, tmp_path, rng):
    out = tmp_path / f"{rng}.json"
    code, _, _ = run_cli("analyze", RAW, "--range", rng, "--format", "json", "-o", out)
    assert code == 0
    return out


def test_diff_gate_fp16_to_fp32_fails_and_back_passes(run_cli, tmp_path):
    fp16, fp32 = _case(run_cli, tmp_path, "mm_fp16"), _case(run_cli, tmp_path, "mm_fp32")
    code, out, _ = run_cli("diff", fp16, fp32)
    assert code == 1 and "FAIL" in out.splitlines()[0] and "-100.0 pts" in out
    code, out, _ = run_cli("diff", fp32, fp16)
    assert code == 0 and "OK" in out.splitlines()[0]
    code, out, _ = run_cli("diff", fp16, fp32, "--max-tc-drop", "100", "--format", "json")
    assert code == 0 and json.loads(out)["failed"] is False


def test_diff_timeline_gates(run_cli, tmp_path, docs):
    base = dict(docs["nsys"])
    slower = json.loads(json.dumps(base))
    for key in ("median_iteration_ns", "median_effective_ns"):  # diff reads the effective step when present
        if key in slower["timeline"]["steps"]:
            slower["timeline"]["steps"][key] *= 1.5
    slower["timeline"]["gpu_busy_share"] = max(0.0, base["timeline"]["gpu_busy_share"] - 0.0)
    slower["timeline"]["sync"]["by_name"]["cudaDeviceSynchronize_new"] = {"calls": 1, "ns": 1.0}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(base))
    b.write_text(json.dumps(slower))
    code, out, _ = run_cli("diff", a, b)
    assert code == 1 and "+50.0%" in out and "new: cudaDeviceSynchronize_new" in out
    code, _, err = run_cli("diff", a, tmp_path / "missing.json")
    assert code == 2 and "missing.json" in err


def test_report_and_diff_validate_the_verdict_against_its_schema(tmp_path, run_cli):
    import json as _json
    from pathlib import Path as _Path
    import gzip as _gzip
    good = _Path(__file__).resolve().parents[2] / "reports" / "examples" / "nsys_plus_ncu_merged" / "verdict.json.gz"
    doc = _json.loads(_gzip.decompress(good.read_bytes()))
    doc["tensor_cores"]["tc_time_share"] = "45%"   # the right schema id, a wrong type
    bad = tmp_path / "verdict.json"
    bad.write_text(_json.dumps(doc))
    before = bad.read_bytes()
    code, out, err = run_cli("report", bad)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"{bad}: not a valid nsighttc.verdict/1 document: at $.tensor_cores.tc_time_share: '45%' is not of type 'number'" in err
    code, _, err = run_cli("diff", good, bad)
    assert code == 2 and "$.tensor_cores.tc_time_share" in err  # exit 2, not 1 ("regression") for a CI gate
    assert bad.read_bytes() == before
