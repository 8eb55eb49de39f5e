"""The GitHub Action's steps, called as GitHub would call them (its environment variables, an event payload
file), with the REST exchange replayed through an injected opener: no GitHub, no network."""
import atexit
import io
import json
import lzma
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from nsighttc import github_action as ga

ROOT = Path(__file__).resolve().parents[1]
API = json.loads((ROOT / "tests" / "fixtures" / "github_api" / "exchange.json").read_text())
# real H100 runs (reports/resnet_amp/, their verdicts kept xz-compressed): unpacked into run directories as a run leaves them
_RUNS = Path(tempfile.mkdtemp(prefix="nsighttc-ga-"))
atexit.register(shutil.rmtree, _RUNS, True)


def _run_dir(name: str) -> Path:
    d = _RUNS / name
    d.mkdir()
    (d / "verdict.json").write_bytes(lzma.decompress((ROOT / "reports" / "resnet_amp" / name / "verdict.json.xz")
                                                     .read_bytes()))
    return d / "verdict.json"


AMP = _run_dir("amp_channels_last")
FP32 = _run_dir("fp32")


@pytest.fixture
def gh_env(tmp_path, monkeypatch):
    for k in list(os.environ):
        if k.startswith("INPUT_"):
            monkeypatch.delenv(k)
    summary, output = tmp_path / "summary.md", tmp_path / "output.txt"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path))
    event = tmp_path / "event.json"
    event.write_text(json.dumps(API["pull_request_event"]))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/train")
    monkeypatch.setenv("GITHUB_API_URL", "https://api.github.com")

    def outputs() -> dict:
        return dict(line.split("=", 1) for line in output.read_text().splitlines()) if output.exists() else {}
    return summary, outputs


def test_a_regression_is_summarised_commented_and_fails_the_gate(gh_env, monkeypatch):
    summary, outputs = gh_env
    monkeypatch.setenv("INPUT_RUN_DIR", str(FP32.parent))    # the PR dropped AMP ...
    assert ga.main(["profile"]) == 0
    assert outputs()["run-dir"] == str(FP32.parent) and outputs()["verdict"] == str(FP32)
    monkeypatch.setenv("INPUT_VERDICT", outputs()["verdict"])
    monkeypatch.setenv("INPUT_BASELINE", str(AMP))           # ... against main's AMP run
    assert ga.main(["summary"]) == 0
    text = summary.read_text()
    assert text.startswith("## nsighttc") and "Tensor Core share of kernel time" in text and "Full report" in text
    assert outputs()["regressed"] == "true"
    body = Path(outputs()["comment-file"]).read_text()
    assert body.startswith(ga.MARKER) and "Full report" not in body  # the comment is the short part
    monkeypatch.setenv("INPUT_REGRESSED", outputs()["regressed"])
    assert ga.main(["gate"]) == 1
    monkeypatch.setenv("INPUT_FAIL_ON_REGRESSION", "false")
    assert ga.main(["gate"]) == 0


def test_no_regression_and_no_baseline(gh_env, monkeypatch):
    summary, outputs = gh_env
    monkeypatch.setenv("INPUT_VERDICT", str(AMP))
    monkeypatch.setenv("INPUT_BASELINE", str(AMP.parent))   # a run directory works as a baseline too
    assert ga.main(["summary"]) == 0 and outputs()["regressed"] == "false"
    monkeypatch.delenv("INPUT_BASELINE")
    assert ga.main(["summary"]) == 0 and "No baseline verdict was given" in summary.read_text()


class Replay:
    """An opener that answers from the recorded exchange and keeps the requests it saw."""

    def __init__(self, comments):
        self.comments, self.requests = comments, []

    def open(self, req, timeout=None):
        self.requests.append((req.get_method(), req.full_url, req.headers, json.loads(req.data) if req.data else None))
        method = req.get_method()
        answer = self.comments if method == "GET" else API["updated"] if method == "PATCH" else API["created"]
        return io.BytesIO(json.dumps(answer).encode())


def _comment(gh_env, monkeypatch, comments):
    summary, outputs = gh_env
    monkeypatch.setenv("INPUT_VERDICT", str(FP32))
    monkeypatch.setenv("INPUT_BASELINE", str(AMP))
    ga.main(["summary"])
    monkeypatch.setenv("INPUT_COMMENT_FILE", outputs()["comment-file"])
    monkeypatch.setenv("INPUT_TOKEN", "ghs_test")
    replay = Replay(comments)
    assert ga.step_comment(opener=replay) == 0
    return replay, outputs


def test_a_rerun_updates_its_own_comment(gh_env, monkeypatch):
    replay, outputs = _comment(gh_env, monkeypatch, API["list_with_ours"])
    (m1, u1, h1, _), (m2, u2, _, payload) = replay.requests
    assert m1 == "GET" and u1.startswith("https://api.github.com/repos/acme/train/issues/42/comments")
    assert h1["Authorization"] == "Bearer ghs_test"
    assert m2 == "PATCH" and u2 == "https://api.github.com/repos/acme/train/issues/comments/2222"  # ours, not 1111
    assert payload["body"].startswith(ga.MARKER)
    assert outputs()["comment-url"].endswith("issuecomment-2222")


def test_the_first_run_creates_one_comment(gh_env, monkeypatch):
    replay, _ = _comment(gh_env, monkeypatch, API["list_without_ours"])
    assert [r[0] for r in replay.requests] == ["GET", "POST"]
    assert replay.requests[1][1] == "https://api.github.com/repos/acme/train/issues/42/comments"


def test_action_yml_calls_only_steps_that_exist_with_the_inputs_they_read():
    text = (ROOT / "action.yml").read_text()
    steps = re.findall(r"python3 -m nsighttc\.github_action (\w+)", text)
    assert steps == ["profile", "summary", "comment", "gate"]
    read = set(re.findall(r'_env\("(INPUT_\w+)"', (ROOT / "nsighttc" / "github_action.py").read_text()))
    passed = set(re.findall(r"(INPUT_\w+):", text))
    assert read - {"INPUT_OUT"} <= passed, read - passed  # INPUT_OUT: local use only
    assert "GITHUB_STEP_SUMMARY" not in text  # GitHub sets it; the action must not override it


def test_profile_needs_a_program_or_a_run_dir(gh_env, capsys):
    assert ga.main(["profile"]) == 2
    assert "give `program`" in capsys.readouterr().err
