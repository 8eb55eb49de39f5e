"""JSON renderer: the verdict document itself (schema nsighttc.verdict/1), pretty-printed; ``dumps`` for every other
document a command writes (``diff``, ``try``): strict JSON, which has no NaN or infinity."""
from __future__ import annotations

import json
import math


def render(doc: dict) -> str:
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def finite(obj):
    """``obj`` with every float that is not a number (NaN, infinity: a measurement that did not happen) as None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj, **kw) -> str:
    """Strict JSON (``allow_nan=False``) of ``obj`` with its non-finite floats as null."""
    return json.dumps(finite(obj), allow_nan=False, **kw)
