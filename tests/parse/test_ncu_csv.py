"""ncu CSV exports (raw and details pages) -> kernel table, on the real H200 recordings."""
import numpy as np
import pytest

from nsighttc.errors import ParseError
from nsighttc.model import KERNEL_COLUMNS
from nsighttc.parse import Kind, load
from tests.conftest import DETAILS, RAW, VGG_BASIC, gunzip_text, read_rows, write_rows


def test_raw_page_has_every_kernel_and_declared_columns():
    rows = read_rows(RAW)
    p = load(RAW)
    assert p.kind is Kind.NCU_CSV
    k = p.kernels
    assert list(k.columns) == list(KERNEL_COLUMNS)
    assert len(k) == len(rows) - 2  # header + units row
    assert k["name"].tolist() == [r[rows[0].index("Kernel Name")] for r in rows[2:]]


def test_raw_page_values_match_the_file_row_by_row():
    rows = read_rows(RAW)
    h = rows[0]
    col = {n: h.index(n) for n in ("gpu__time_duration.sum", "sm__ops_path_tensor_src_fp16.sum",
                                    "sm__inst_executed_pipe_tensor_op_hmma.sum", "CC", "Grid Size")}
    assert rows[1][col["gpu__time_duration.sum"]] == "ns"
    k = load(RAW).kernels
    for i, r in enumerate(rows[2:]):
        assert k.at[i, "duration_ns"] == float(r[col["gpu__time_duration.sum"]].replace(",", ""))
        assert k.at[i, "tc_ops_fp16"] == float(r[col["sm__ops_path_tensor_src_fp16.sum"]].replace(",", ""))
        assert k.at[i, "inst_hmma"] == float(r[col["sm__inst_executed_pipe_tensor_op_hmma.sum"]].replace(",", ""))
        assert k.at[i, "cc"] == r[col["CC"]] and k.at[i, "grid"] == r[col["Grid Size"]]


def test_tf32_flops_come_from_per_op_counters_summed_once():
    rows = read_rows(RAW)
    h = rows[0]
    a, b = (h.index(f"sm__ops_path_tensor_op_{op}_src_tf32_dst_fp32.sum") for op in ("hmma", "hgmma"))
    k = load(RAW).kernels
    expect = [float(r[a].replace(",", "")) + float(r[b].replace(",", "")) for r in rows[2:]]
    assert np.allclose(k["tc_ops_tf32"].to_numpy(), expect)
    assert max(expect) > 0  # the warm-up tf32 GEMM is in the file


def test_nvtx_column_becomes_range_path():
    k = load(RAW).kernels
    ranges = set(k["nvtx"]) - {""}
    assert {"mm_fp16", "vgg16_fp16", "conv_fp16_nchw", "sdpa_bf16"} <= ranges
    assert (k["nvtx"] == "").sum() > 0  # warm-up launches outside any range


def test_details_page_pivots_to_the_same_kernels_with_durations_in_ns():
    raw, det = load(RAW).kernels, load(DETAILS).kernels
    assert len(det) == len(raw)
    assert det["name"].tolist() == raw["name"].tolist()
    rows = read_rows(DETAILS)
    h = rows[0]
    first = next(r for r in rows[1:] if r[h.index("Metric Name")] == "gpu__time_duration.sum")
    assert first[h.index("Metric Unit")] == "us"
    assert det.at[0, "duration_ns"] == pytest.approx(float(first[h.index("Metric Value")]) * 1e3)
    assert det["inst_hfma2"].isna().all() and det["tc_ops_fp16"].isna().all()  # not collected there


def test_details_page_with_sections_and_rule_columns():
    k = load(VGG_BASIC).kernels
    rows = read_rows(VGG_BASIC)
    h = rows[0]
    assert "Rule Name" in h and "Estimated Speedup" in h
    ids = {r[h.index("ID")] for r in rows[1:]}
    assert len(k) == len(ids)
    assert set(k["nvtx"]) == {"vgg16_fp16"}
    assert k["duration_ns"].notna().all()  # "Duration" in us from the SpeedOfLight section


def test_plain_and_gzip_give_the_same_table(tmp_path):
    plain = tmp_path / "raw.csv"
    plain.write_text(gunzip_text(RAW), encoding="utf-8")
    a, b = load(plain).kernels.drop(columns="input"), load(RAW).kernels.drop(columns="input")
    assert a.equals(b)


def test_program_output_mixed_into_stdout_capture(tmp_path):
    text = gunzip_text(RAW).splitlines()
    junk_before = ["==PROF== Connected to process 434 (/usr/bin/python3.12)", "epoch 1 loss 0.25",
                   "==PROF== Profiling \"kernel\" - 0: 0%....50%....100% - 8 passes"]
    mixed = junk_before + text[:10] + ["step 3 done", "==PROF== Disconnected from process 434"] + text[10:]
    f = tmp_path / "stdout.txt"
    f.write_text("\n".join(mixed) + "\n", encoding="utf-8")
    p = load(f)
    assert len(p.kernels) == len(text) - 2
    assert any("skipped" in w for w in p.warnings)


def test_metric_absent_on_chip_is_nan_not_zero(tmp_path):
    rows = read_rows(RAW)
    h = rows[0]
    drop = {i for i, n in enumerate(h) if n.startswith("sm__ops_path_tensor")}
    na = h.index("sm__inst_executed_pipe_tensor_op_imma.sum")
    out = [[v for i, v in enumerate(r) if i not in drop] for r in rows]
    for r in out[2:]:
        r[[n for i, n in enumerate(h) if i not in drop].index(h[na])] = "n/a"
    k = load(write_rows(out, tmp_path / "stripped.csv")).kernels
    assert k["tc_ops_fp16"].isna().all() and k["inst_imma"].isna().all()
    assert k["inst_hmma"].notna().all()


def test_truncated_csv_is_an_error(tmp_path):
    text = gunzip_text(RAW)
    cut = tmp_path / "cut.csv"
    cut.write_text(text[: len(text) * 2 // 3], encoding="utf-8")
    with pytest.raises(ParseError, match="truncated"):
        load(cut)


def test_truncated_gzip_is_an_error(tmp_path):
    data = RAW.read_bytes()
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError):
        load(cut)


def test_header_only_is_an_error(tmp_path):
    f = tmp_path / "header.csv"
    f.write_text(gunzip_text(RAW).splitlines()[0] + "\n", encoding="utf-8")
    with pytest.raises(ParseError, match="no kernel rows"):
        load(f)


def test_windows_line_endings_and_bom(tmp_path):
    f = tmp_path / "crlf.csv"
    f.write_bytes(("\ufeff" + gunzip_text(RAW).replace("\n", "\r\n")).encode("utf-8"))
    assert len(load(f).kernels) == len(load(RAW).kernels)
