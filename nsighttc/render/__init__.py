"""Render layer: the verdict JSON document -> text for people (Markdown) or machines (JSON), plus plots.

Renderers take the saved document and compute nothing, so ``nsighttc report verdict.json`` gives the
same output as the run that wrote it.
"""
from __future__ import annotations

from . import json_out, markdown

FORMATS = {"markdown": markdown.render, "json": json_out.render}


def render(doc: dict, fmt: str = "markdown") -> str:
    return FORMATS[fmt](doc)
