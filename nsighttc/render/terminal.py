"""The short summary a terminal gets (at most ~25 lines), drawn with rich: the two headline verdicts, the
top findings with their fix in one line each, the top kernels by GPU time with readable short names, and
where the full report is. Piped output and ``--format markdown|json`` still get the whole document; rich
honours ``NO_COLOR`` and ``TERM=dumb``.
"""
from __future__ import annotations

import io

from .fmt import ns, pct, tc_word
from .markdown import gain_text, headline_lines
from .names import short_name


def _wrapped(text: str, width: int, first: str, rest: str, max_lines: int = 2) -> list[str]:
    """``text`` wrapped at words to ``width`` columns, the first line after ``first``, the others after ``rest``; at most
    ``max_lines``, the last then ending at a word with "…" (never mid-word: a path or an option stays whole; the
    whole text is in report.md)."""
    import textwrap
    lines = textwrap.wrap(" ".join(str(text).split()), max(width, 40), initial_indent=first, subsequent_indent=rest,
                          break_long_words=False, break_on_hyphens=False) or [first.rstrip()]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        last = lines[-1]
        while len(last) + 2 > width and " " in last.strip():
            last = last.rsplit(" ", 1)[0]
        lines[-1] = last + " …"
    return lines


def summary_lines(doc: dict, report: str | None = None, top_kernels: int = 5, top_findings: int = 3,
                  width: int = 100) -> list[tuple[str, str]]:
    """(style, text) lines, each at most ``width`` columns where words allow (the terminal's width); the
    renderer-independent part, so tests can read it without a terminal."""
    lines = [("dim" if text.startswith("Evidence") else "bold", text) for text in headline_lines(doc)]
    findings = [f for f in doc.get("findings", []) if f.get("severity") != "info"][:top_findings]
    if findings:
        lines.append(("bold", "Top findings"))
        for f in findings:
            up = gain_text(f.get("gain"))
            style = "yellow" if f["severity"] in ("high", "medium") else ""
            lines += [(style, ln) for ln in _wrapped(f["title"] + (f" — {up}" if up else ""), width, "  • ", "    ")]
            lines += [("dim", ln) for ln in _wrapped(f["advice"], width, "    fix: ", "         ")]
    kernels = sorted(doc.get("kernels", []), key=lambda k: -(k.get("total_time_ns") or 0))[:top_kernels]
    if kernels:
        lines.append(("bold", "Top kernels by GPU time"))
        for k in kernels:
            tcw = tc_word(k.get("tensor_core"))
            dt = f" {k['dtype']}" if k.get("dtype") else ""
            lines.append(("", f"  {pct(k.get('time_share'), 0):>4}  {ns(k.get('total_time_ns')):>9}  "
                              f"{(tcw + dt):<12} {short_name(k['name'], 60)}"))
    lines.append(("dim", f"full report: {report}" if report else
                  "full report: --format markdown (or json), or pipe the output"))
    return lines


def render(doc: dict, report: str | None = None, width: int | None = None) -> str:
    """The summary as terminal text (ANSI styles, none under NO_COLOR or TERM=dumb)."""
    import os
    cols = max(min(width or 100, 160), 60) - 1
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return "".join(text + "\n" for _, text in summary_lines(doc, report, width=cols))
    from rich.console import Console
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=width or 120, highlight=False)
    for style, text in summary_lines(doc, report, width=cols):
        console.print(Text(text, style=style or ""), soft_wrap=True)
    return buf.getvalue()
