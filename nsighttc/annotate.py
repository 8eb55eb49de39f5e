"""``from nsighttc import annotate``: the public range API, which lives in ``nsighttc.runtime.annotate`` (it runs
inside the profiled program). This name is the very same module object."""
import sys

from .runtime import annotate as _impl

sys.modules[__name__] = _impl
