"""Compatibility alias: this module moved to ``nsighttc.runtime.rankexec`` (the code that runs inside the profiled
program's process lives in ``nsighttc/runtime/``). ``python -m nsighttc.rankexec`` and ``import nsighttc.rankexec`` keep
working: the second gives the very same module object."""
import sys

from .runtime import rankexec as _impl

if __name__ == "__main__":
    sys.exit(_impl.main())
sys.modules[__name__] = _impl
