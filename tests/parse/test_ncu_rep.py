""".ncu-rep reading: the ncu_report module, the `ncu --import` export (``collect.readable``: the reader itself
launches nothing) and neither."""
import os
import stat
import sys

import pytest

from nsighttc.collect import readable
from nsighttc.errors import NeedsExport, ReaderMissing
from nsighttc.parse import load, ncu_rep
from tests.conftest import NCU_REP, RAW, gunzip_text


def test_reads_real_report_with_ncu_report_module():
    pytest.importorskip("ncu_report")
    k = load(NCU_REP).kernels
    assert len(k) == 2
    assert set(k["nvtx"]) == {"mm_fp16", "mm_fp32"}
    assert k["device_name"].iloc[0] == "NVIDIA H200" and k["cc"].iloc[0] == "9.0"
    assert (k["duration_ns"] > 0).all() and k["inst_hfma2"].notna().all()


def _fake_ncu(dir_, csv_text_path, log):
    """A stand-in ncu that records its argv and replays a real export (the parsing stays real)."""
    exe = dir_ / "ncu"
    exe.write_text(f"""#!{sys.executable}
import sys
open({str(log)!r}, "w").write("\\n".join(sys.argv[1:]))
sys.stdout.write(open({str(csv_text_path)!r}).read())
""")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_falls_back_to_ncu_import_when_module_missing(monkeypatch, tmp_path):
    replay = tmp_path / "replay.csv"
    replay.write_text(gunzip_text(RAW))
    log = tmp_path / "argv.txt"
    _fake_ncu(tmp_path, replay, log)
    monkeypatch.setattr(ncu_rep, "_import_ncu_report", lambda: None)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(NeedsExport):  # the reader alone launches no tool
        load(NCU_REP)
    assert not log.exists()
    p = readable.load(NCU_REP)
    argv = log.read_text().split("\n")
    # the committed report is xz-compressed: ncu imports a decompressed copy, the kernels keep the user's path
    imported = str(NCU_REP) if not str(NCU_REP).endswith(".xz") else None
    assert argv[0] == "--import" and (argv[1] == imported or (imported is None and argv[1].endswith(".ncu-rep")))
    assert argv[2:] == ["--csv", "--page", "raw", "--print-units", "base"]
    assert len(p.kernels) == 404 and (p.kernels["input"] == str(NCU_REP)).all()


def test_neither_reader_is_a_clear_error(monkeypatch, run_cli, tmp_path):
    monkeypatch.setattr(ncu_rep, "_import_ncu_report", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("nsighttc.collect.tools._SEARCH", {"ncu": [], "nsys": []})
    with pytest.raises(ReaderMissing):
        readable.load(NCU_REP)
    code, _, err = run_cli("analyze", NCU_REP)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "ncu-report" in err and "ncu" in err and str(NCU_REP) in err
