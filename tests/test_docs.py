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
    for cmd in ("python -m pip install -q -e '.[test]' && python -m pytest -q",):
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


def _examples():
    for page in PAGES:
        for block in TESTED.findall(page.read_text()):
            for line in block.splitlines():
                if line.startswith("nsighttc "):
                    yield pytest.param(line, id=f"{page.name}: {line}")


@pytest.mark.parametrize("line", list(_examples()))
def test_documented_examples_run(line):
    argv = [sys.executable, "-m", "nsighttc", *shlex.split(line)[1:]]
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() and "Traceback" not in r.stderr
