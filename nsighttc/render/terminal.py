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


def _one_line(text: str, width: int = 110) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= width else t[: width - 1] + "…"


def summary_lines(doc: dict, report: str | None = None, top_kernels: int = 5, top_findings: int = 3) -> list[tuple[str, str]]:
    """(style, text) lines; the renderer-independent part, so tests can read it without a terminal."""
    lines = [("dim" if text.startswith("Evidence") else "bold", text) for text in headline_lines(doc)]
    findings = [f for f in doc.get("findings", []) if f.get("severity") != "info"][:top_findings]
    if findings:
        lines.append(("bold", "Top findings"))
        for f in findings:
            up = gain_text(f.get("gain"))
            lines.append(("yellow" if f["severity"] in ("high", "medium") else "",
                          f"  • {_one_line(f['title'], 100 - len(up))}" + (f" — {up}" if up else "")))
            lines.append(("dim", f"    fix: {_one_line(f['advice'], 104)}"))
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
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return "".join(text + "\n" for _, text in summary_lines(doc, report))
    from rich.console import Console
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=width or 120, highlight=False)
    for style, text in summary_lines(doc, report):
        console.print(Text(text, style=style or ""), soft_wrap=True)
    return buf.getvalue()
