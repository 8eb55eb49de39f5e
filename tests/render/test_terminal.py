"""The terminal summary and -q/-v, on real recordings."""
from nsighttc.api import analyze
from nsighttc.render import terminal
from tests.conftest import KINETO, MULTI_NODE, NCU_REP


def test_the_terminal_summary_is_short_and_has_no_html(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    doc = analyze([MULTI_NODE]).to_json()
    text = terminal.render(doc, report="runs/x/report.md")
    lines = text.splitlines()
    assert len(lines) <= 25 and "<span" not in text and "\x1b[" not in text  # NO_COLOR: no escapes at all
    assert lines[0].startswith("Tensor Cores:") and lines[1].startswith("GPU busy")
    assert "Top findings" in text and "fix: " in text and lines[-1] == "full report: runs/x/report.md"
    top = max(doc["kernels"], key=lambda k: k["total_time_ns"])
    assert any(top["name"][:20] in ln or "…" in ln for ln in lines)


def test_styles_without_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert "\x1b[1m" in terminal.render(analyze([KINETO]).to_json())


def test_quiet_and_verbose(run_cli, nsys_sqlite):
    inputs = (nsys_sqlite, NCU_REP)  # a timeline plus counters: the merge leaves a note
    code, out, err = run_cli("analyze", "-q", *inputs)
    assert code == 0 and err == "" and out.startswith("# nsighttc verdict")  # piped: the whole document
    code, _, err = run_cli("analyze", *inputs)
    assert code == 0 and "nsighttc: note: merged ncu hardware evidence" in err and "analysed" not in err
    code, _, err = run_cli("analyze", "-v", *inputs)
    assert code == 0 and "nsighttc: note:" in err and "kernel launches in" in err
