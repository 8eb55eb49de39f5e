"""glibc malloc settings for the length of one analysis of a big input.

A million-kernel analysis makes hundreds of temporary 8-40 MB arrays. With glibc's defaults the first ones
are each mmap'ed, page-faulted in and unmapped again (the dynamic mmap threshold only rises after such a free),
so a fresh process pays for fresh pages over and over: the same analysis ran in 5.1 s as a process's first
and 3.6-4.0 s as its second (1M-kernel nsys export, 2-core machine, medians of 5). Raising the mmap threshold to
its maximum (32 MiB on 64-bit) and not trimming the heap during the analysis lets the heap reuse those pages:
5.10 s -> 4.60 s median of 5 fresh processes (``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_``, same machine),
peak RSS unchanged (~1.0 GB). Afterwards the defaults come back and the free heap is returned to the system.
Elsewhere than glibc (musl, macOS) nothing happens.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import threading

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3          # mallopt parameters (malloc.h)
DEFAULT_TRIM, DEFAULT_MMAP = 128 * 1024, 128 * 1024  # glibc's defaults
BIG_MMAP = 32 * 1024 * 1024                          # the largest value glibc accepts on 64-bit
SLICE = 1 << 20  # elements per slice of a whole-run array: temporaries of 8 MB, not the 30-60 MB of 4M-7.5M rows
_lock = threading.Lock()
_depth = 0


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _libc()


@contextlib.contextmanager
def reuse_freed_memory():
    """Inside: big temporaries come from (and go back to) the heap. Nested and concurrent uses are counted."""
    global _depth
    if _LIBC is None:
        yield
        return
    with _lock:
        _depth += 1
        if _depth == 1:
            _LIBC.mallopt(M_MMAP_THRESHOLD, BIG_MMAP)
            _LIBC.mallopt(M_TRIM_THRESHOLD, 1 << 30)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _LIBC.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM)
                _LIBC.mallopt(M_MMAP_THRESHOLD, DEFAULT_MMAP)
                _LIBC.malloc_trim(0)


def give_back_free_memory() -> None:
    """Return what readers freed to the system: Arrow's pool keeps the buffers ADBC filled (~160 MB at 1M
    kernels) and glibc keeps what reader threads freed in their own arenas, where the analysis (main thread)
    cannot reuse it: ~390 MB of a 770 MB process after reading the 1M-kernel nsys export, its tables being
    330 MB. Cheap (a few ms); the analysis' peak then starts from the tables, not from the readers' high-water mark."""
    import sys
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        try:
            pa.default_memory_pool().release_unused()
        except Exception:  # an Arrow build without it: only a head start lost
            pass
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def slices(n: int) -> list[slice]:
    """Consecutive ``SLICE``-sized slices covering ``n`` rows: whole-run passes done a slice at a time keep
    their temporaries small (a 4M-kernel analysis peaked ~0.9 GB lower with its lookups and per-piece
    passes sliced)."""
    return [slice(i, i + SLICE) for i in range(0, n, SLICE)]
