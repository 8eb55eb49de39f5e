"""The steps of the GitHub Action (``action.yml``), as a module so they are tested without GitHub.

    python -m nsighttc.github_action profile   # INPUT_PROGRAM -> a run directory ($GITHUB_OUTPUT run-dir)
    python -m nsighttc.github_action summary   # verdict (+ diff against INPUT_BASELINE) -> $GITHUB_STEP_SUMMARY
    python -m nsighttc.github_action comment   # post or update the one PR comment carrying MARKER
    python -m nsighttc.github_action gate      # exit 1 when the diff regressed and INPUT_FAIL_ON_REGRESSION

Everything comes from the environment GitHub sets (``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT``,
``GITHUB_EVENT_PATH``, ``GITHUB_REPOSITORY``, ``GITHUB_API_URL``) and the action's inputs (``INPUT_*``,
passed explicitly by ``action.yml``). The comment step talks to the REST API through ``urllib`` with an
injectable opener (tests replay a recorded exchange; nothing here needs the network to be tested).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

MARKER = "<!-- nsighttc-report -->"


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def _output(**values: str) -> None:
    path = _env("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            for k, v in values.items():
                fh.write(f"{k}={v}\n")


def _append_summary(text: str) -> None:
    path = _env("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")


def _latest_run(runs: Path) -> Path | None:
    dirs = [d for d in runs.iterdir() if (d / "run.json").exists()] if runs.exists() else []
    return max(dirs, key=lambda d: d.stat().st_mtime) if dirs else None


def step_profile() -> int:
    """Run ``nsighttc profile`` on INPUT_PROGRAM (split like a shell would, run as an argument list), or
    take INPUT_RUN_DIR as is. Outputs: run-dir, verdict, profile-exit-code."""
    given = _env("INPUT_RUN_DIR")
    if given:
        run = Path(given)
        code = 0
    else:
        program = shlex.split(_env("INPUT_PROGRAM"))
        if not program:
            print("nsighttc action: give `program` (what to profile) or `run-dir` (an existing run)", file=sys.stderr)
            return 2
        runs = Path(_env("INPUT_OUT") or Path(_env("RUNNER_TEMP", ".")) / "nsighttc-runs")
        extra = shlex.split(_env("INPUT_PROFILE_ARGS"))
        argv = [sys.executable, "-m", "nsighttc", "profile", "--out", str(runs), *extra, "--format", "markdown", "--",
                *program]
        code = subprocess.call(argv)
        run = _latest_run(runs)
        if run is None:
            print(f"nsighttc action: `nsighttc profile` wrote no run directory under {runs} (exit {code})", file=sys.stderr)
            return code or 4
    verdict = run / "verdict.json"
    _output(**{"run-dir": str(run), "verdict": str(verdict) if verdict.exists() else "", "profile-exit-code": str(code)})
    return 0 if verdict.exists() else (code or 4)


def step_summary() -> int:
    """The job summary: the new verdict's report, and the diff table when a baseline is given. Writes the
    PR comment body (with MARKER) to INPUT_COMMENT_FILE and outputs regressed=true|false."""
    from .diff import Gate, compare, render_markdown
    from .render import markdown
    from .render.markdown import headline_lines
    from .verdict import load_json

    new_path = _env("INPUT_VERDICT") or _env("INPUT_RUN_DIR")
    new = load_json(new_path)
    gate = Gate(float(_env("INPUT_MAX_TC_DROP", "5")), float(_env("INPUT_MAX_BUSY_DROP", "10")),
                float(_env("INPUT_MAX_SLOWDOWN", "10")))
    parts = ["## nsighttc", "", *[f"- {line}" for line in headline_lines(new)], ""]
    regressed = False
    base_path = _env("INPUT_BASELINE")
    if base_path and (Path(base_path).is_dir() and not (Path(base_path) / "verdict.json").exists()):
        found = sorted(Path(base_path).rglob("verdict.json"))  # a downloaded artifact: the run folder inside
        base_path = str(found[0]) if found else base_path
    if base_path:
        checks = compare(load_json(base_path), new, gate)
        regressed = any(c.status == "fail" for c in checks)
        parts += [render_markdown(checks, "baseline", "this run", gate), ""]
    else:
        parts += ["No baseline verdict was given: nothing to compare (input `baseline` or `baseline-artifact`).", ""]
    body = "\n".join(parts)
    full = markdown.render(new)
    _append_summary(body + "\n<details><summary>Full report</summary>\n\n" + full + "\n</details>\n")
    comment_file = Path(_env("INPUT_COMMENT_FILE") or Path(_env("RUNNER_TEMP", ".")) / "nsighttc-comment.md")
    comment_file.write_text(f"{MARKER}\n{body}", encoding="utf-8")
    _output(regressed="true" if regressed else "false", **{"comment-file": str(comment_file)})
    return 0


class GitHub:
    """The three REST calls the comment step needs; ``opener`` is urllib's (tests pass a replaying one)."""

    def __init__(self, api: str, repo: str, token: str, opener=None):
        self.api, self.repo, self.token = api.rstrip("/"), repo, token
        self.opener = opener or urllib.request.build_opener()

    def _call(self, method: str, url: str, payload: dict | None = None):
        req = urllib.request.Request(url, method=method, data=None if payload is None else json.dumps(payload).encode(),
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Accept": "application/vnd.github+json",
                                              "X-GitHub-Api-Version": "2022-11-28",
                                              "Content-Type": "application/json"})
        with self.opener.open(req, timeout=30) as resp:
            return json.loads(resp.read().decode() or "null")

    def comments(self, number: int) -> list[dict]:
        out, page = [], 1
        while True:
            batch = self._call("GET", f"{self.api}/repos/{self.repo}/issues/{number}/comments?per_page=100&page={page}")
            out += batch
            if len(batch) < 100:
                return out
            page += 1

    def upsert(self, number: int, body: str) -> tuple[str, dict]:
        """Update the comment that carries MARKER, else create one: reruns edit, they do not pile up."""
        mine = [c for c in self.comments(number) if MARKER in (c.get("body") or "")]
        if mine:
            return "updated", self._call("PATCH", f"{self.api}/repos/{self.repo}/issues/comments/{mine[0]['id']}",
                                         {"body": body})
        return "created", self._call("POST", f"{self.api}/repos/{self.repo}/issues/{number}/comments", {"body": body})


def step_comment(opener=None) -> int:
    event = json.loads(Path(_env("GITHUB_EVENT_PATH")).read_text()) if _env("GITHUB_EVENT_PATH") else {}
    number = (event.get("pull_request") or {}).get("number") or (event.get("issue") or {}).get("number")
    if not number:
        print("nsighttc action: not a pull request event; no comment posted", file=sys.stderr)
        return 0
    token = _env("INPUT_TOKEN") or _env("GITHUB_TOKEN")
    if not token:
        print("nsighttc action: no token (input `token`); no comment posted", file=sys.stderr)
        return 0
    body = Path(_env("INPUT_COMMENT_FILE")).read_text(encoding="utf-8")
    gh = GitHub(_env("GITHUB_API_URL", "https://api.github.com"), _env("GITHUB_REPOSITORY"), token, opener)
    what, resp = gh.upsert(int(number), body)
    print(f"nsighttc action: {what} comment {resp.get('html_url') or resp.get('id')}")
    _output(**{"comment-url": str(resp.get("html_url") or "")})
    return 0


def step_gate() -> int:
    if _env("INPUT_REGRESSED") == "true" and _env("INPUT_FAIL_ON_REGRESSION", "true") == "true":
        print("nsighttc action: the verdict regressed beyond the gate (see the job summary)", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    steps = {"profile": step_profile, "summary": step_summary, "comment": step_comment, "gate": step_gate}
    if len(argv) != 1 or argv[0] not in steps:
        print(f"usage: python -m nsighttc.github_action {{{','.join(steps)}}}", file=sys.stderr)
        return 2
    from .errors import NsighttcError
    try:
        return steps[argv[0]]()
    except NsighttcError as exc:
        print(f"nsighttc action: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
