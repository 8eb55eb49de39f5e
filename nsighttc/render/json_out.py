"""JSON renderer: the verdict document itself (schema nsighttc.verdict/1), pretty-printed."""
from __future__ import annotations

import json


def render(doc: dict) -> str:
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
