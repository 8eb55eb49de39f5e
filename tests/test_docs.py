"""The README and docs/ (issue 31): the README stays a front page (<= 12,000 characters) with the two set-up
commands `.ci/run` uses, every relative link of every page leads to a file, every page links back, and every example
marked `console tested` runs (the commands that need no GPU) and exits 0."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
TESTED = re.compile(r"^```console tested\n(.*?)^```", re.M | re.S)


def test_readme_is_a_front_page_with_the_ci_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text) <= 12_000
    ci = (ROOT / ".ci" / "run").read_text()
    for cmd in ("python -m pip install -q torch==2.13.0 -e '.[test]' && python -m pytest -q -n auto",):
        assert cmd in text and cmd in ci
    assert "python3 -m pip install . && nsighttc profile wrappers/vgg16.py" in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_lead_somewhere_and_pages_link_back(page):
    text = page.read_text()
    broken = [t for t in LINK.findall(text) if not t.startswith(("http://", "https://", "mailto:"))
              and not (page.parent / t).exists()]
    assert not broken
    if page.parent.name == "docs":
        assert "../README.md" in text


def examples(text: str, name: str = "page"):
    """(command, lines it quotes) of every ``console tested`` block: a line ``$ nsighttc ...`` (or ``nsighttc ...``) is
    a command, the lines after it are what it prints (each must appear in its output; ``...`` skips)."""
    for block in TESTED.findall(text):
        cmd, quoted = None, []
        for line in block.splitlines():
            if line.startswith(("$ nsighttc ", "nsighttc ")):
                if cmd:
                    yield cmd, quoted
                cmd, quoted = line.removeprefix("$ "), []
            elif line.strip() and line.strip() != "..." and cmd:
                quoted.append(line.strip())
        if cmd:
            yield cmd, quoted


def _examples():
    for page in PAGES:
        for cmd, quoted in examples(page.read_text(), page.name):
            yield pytest.param(cmd, quoted, id=f"{page.name}: {cmd}")


def _normal(text: str) -> str:
    return " ".join(text.replace("**", "").split())


@pytest.mark.parametrize("line,quoted", list(_examples()))
def test_documented_examples_run_and_print_what_the_page_quotes(line, quoted):
    argv = [sys.executable, "-m", "nsighttc", *shlex.split(line)[1:]]
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() and "Traceback" not in r.stderr
    said = _normal(r.stdout + "\n" + r.stderr)
    stale = [q for q in quoted if _normal(q) not in said]
    assert not stale, f"the page quotes lines `{line}` no longer prints: {stale}"


def test_a_quoted_line_the_command_does_not_print_fails_the_check():
    """The check itself: a stale headline in a page is caught (issue 53)."""
    page = "```console tested\n$ nsighttc analyze x.json\n**Tensor Cores: NO for 93% of the matrix work**\n...\n```\n"
    (cmd, quoted), = list(examples(page))
    assert cmd == "nsighttc analyze x.json" and quoted == ["**Tensor Cores: NO for 93% of the matrix work**"]
    printed = _normal("**Tensor Cores: PARTIAL — 6% of GPU kernel time**")
    assert _normal(quoted[0]) not in printed
