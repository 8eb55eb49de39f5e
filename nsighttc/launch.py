"""Compatibility alias: this module moved to ``nsighttc.runtime.launch`` (the code that runs inside the profiled
program's process lives in ``nsighttc/runtime/``). ``python -m nsighttc.launch`` and ``import nsighttc.launch`` keep
working: the second gives the very same module object."""
import sys

from .runtime import launch as _impl

if __name__ == "__main__":
    sys.exit(_impl.main())
sys.modules[__name__] = _impl
