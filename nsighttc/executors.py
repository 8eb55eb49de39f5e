"""Where the per-rank analyses of a distributed job run: here, in local processes, or on a Dask cluster.

Why: a job of hundreds to thousands of ranks records one trace per rank (0.1-2 GB each); the per-rank analysis is the
expensive, independent part (the map), the job's verdict from the ranks' summaries is small (the reduce,
``analysis.ranks``). The map goes where the CPUs and the files are: one machine's processes by default, or a Dask
cluster its users already run (Slurm through dask-jobqueue, Kubernetes through dask-kubernetes): nsighttc brings no
scheduler of its own. The reduce always runs here.

Every executor answers the same way: a result per task, or a ``Failed`` saying why (the task raised, its worker died,
it ran past the timeout), so one bad rank is named in the job's verdict instead of ending it. Retries are left to
what is transient: Dask reschedules a task whose worker was lost (``distributed.scheduler.allowed-failures``, three
by default) and reports ``KilledWorker`` after that; a task that raised is not retried, since it would fail again.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable

# A task not back after this long is given up and named (a worker stuck on a huge trace, a cluster that lost it).
DEFAULT_TASK_TIMEOUT_S = 1800.0
# A scheduler not reached after this long is an error, not a wait.
DEFAULT_CONNECT_TIMEOUT_S = 30.0
EXECUTORS = ("processes", "local", "dask", "dask://HOST:PORT")


@dataclass
class Failed:
    """What came back instead of a result: why, in words the report can show."""
    reason: str
    error: BaseException | None = None


def _describe(exc: BaseException) -> str:
    from .errors import NsighttcError
    if isinstance(exc, NsighttcError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _settle(out: dict, key, res, on_done) -> None:
    """Keep a task's result, or what ``on_done`` made of it (a caller that packs results small returns the packed
    form: the executor then never holds every result unpacked at once)."""
    kept = on_done(key, res) if on_done else None
    out[key] = res if kept is None else kept


def _call(fn, args) -> Any:
    """``fn(*args)``, or a ``Failed`` carrying the error (a worker must not die of a bad input)."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the caller names the task that failed and why
        return Failed(_describe(exc), exc)


class Local:
    """Each task here and now, one after the other (the default for small jobs: no process start to pay)."""
    name = "local"

    def map(self, fn: Callable, tasks: list[tuple[Hashable, tuple]],
            on_done: Callable[[Hashable, Any], None] | None = None) -> dict:
        import gc
        out = {}
        # The analysis runs with the cyclic collector paused, so each task's cycles are freed before the next. A full
        # collection walks every object this process holds (0.12 s a task beside a big heap: 122 of them took 14.5 s in
        # one process running the analysis tests, under cProfile); what the process held before the tasks, and what
        # survived each one, is frozen, so each collection walks only what its task made (the first too: freezing
        # only after it left 7.2 s of those 14.5 s). Left alone where something else froze objects (a forked trace
        # writer relies on them staying frozen).
        own_freeze = gc.get_freeze_count() == 0
        if own_freeze:
            gc.freeze()
        try:
            for key, args in tasks:
                res = _call(fn, args)
                gc.collect()
                if own_freeze:
                    gc.freeze()
                _settle(out, key, res, on_done)
        finally:
            if own_freeze:
                gc.unfreeze()
        return out

    def map_keep(self, full: Callable, summary: Callable, tasks: list[tuple[Hashable, tuple]],
                 on_done: Callable[[Hashable, Any], None] | None = None) -> tuple[dict, Callable[[Hashable], Any]]:
        """``summary(full(*args))`` per task, each full result kept here for ``fetch(key)``."""
        kept: dict = {}

        def both(key, args):
            got = full(*args)
            kept[key] = got
            return summary(got)
        return self.map(both, [(key, (key, args)) for key, args in tasks], on_done), kept.__getitem__

    def close(self) -> None:
        pass


def _worker_start(preload: tuple[str, ...] = ()) -> None:
    """A worker process' start: the modules its tasks need first imported (``preload``, by name: the analysis takes
    ~1-2 s), and Ctrl-C left to the parent (which stops the pool), not a traceback per worker."""
    import importlib
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in preload:
        importlib.import_module(name)


def _ready() -> bool:
    return True


class Processes:
    """Tasks in ``jobs`` spawned processes of this machine (memory grows with ``jobs``, not with the task count).

    ``warm()`` starts them ahead of the tasks: the default run of a torchrun job does it while the job runs, so its
    ranks' analyses find workers with the analysis imported (``profile.default``); the pool then lives until
    ``close()``."""
    name = "processes"

    def __init__(self, jobs: int, timeout_s: float = DEFAULT_TASK_TIMEOUT_S):
        self.jobs, self.timeout_s = max(1, jobs), timeout_s
        self._pool = None

    @staticmethod
    def _new_pool(workers: int, preload: tuple[str, ...] = ()):
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        ctx = mp.get_context("spawn")  # no fork: the caller may hold threads (profile's progress, pools)
        return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_start,
                                   initargs=(tuple(preload),))

    def warm(self, preload: tuple[str, ...] = ()) -> "Processes":
        """Start every worker now, each importing the modules named in ``preload`` as it starts."""
        if self._pool is None:
            self._pool = self._new_pool(self.jobs, preload)
            for _ in range(self.jobs):
                self._pool.submit(_ready)  # (a task more than idle workers starts one more: all of them, here)
        return self

    def map(self, fn: Callable, tasks: list[tuple[Hashable, tuple]],
            on_done: Callable[[Hashable, Any], None] | None = None) -> dict:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool
        out: dict = {}
        warm = self._pool is not None
        pool = self._pool if warm else self._new_pool(min(self.jobs, len(tasks)) or 1)
        pending: set = set()
        broken = False
        try:
            futures = {pool.submit(_call, fn, args): key for key, args in tasks}
            pending = set(futures)
            deadline = time.monotonic() + self.timeout_s
            while pending:
                done, pending = wait(pending, timeout=max(deadline - time.monotonic(), 0), return_when=FIRST_COMPLETED)
                if not done:  # past the timeout: what is still running is given up
                    for f in pending:
                        _settle(out, futures[f], Failed(f"not analysed within {self.timeout_s:g} s (--rank-timeout)"),
                                on_done)
                    break
                for f in done:
                    key = futures.pop(f)  # (a finished future holds its result: let it go once settled)
                    try:
                        res = f.result()
                    except BrokenProcessPool as exc:
                        res = Failed("its worker process died (killed, or out of memory)", exc)
                        broken = True
                    except Exception as exc:  # noqa: BLE001 - e.g. a result that could not be sent back
                        res = Failed(_describe(exc), exc)
                    _settle(out, key, res, on_done)
                    del f, res
        finally:
            if not warm or pending or broken:  # (a warm pool is kept for the next map, unless a task is stuck in
                # it or a worker died)
                _stop_pool(pool)
                self._pool = None
        return out

    def map_keep(self, full: Callable, summary: Callable, tasks: list[tuple[Hashable, tuple]],
                 on_done: Callable[[Hashable, Any], None] | None = None) -> tuple[dict, Callable[[Hashable], Any]]:
        """``summary(full(*args))`` per task sent back; each full result written by its process to a temporary
        folder of this machine and read back only by ``fetch(key)`` (the client holds summaries, not results)."""
        import pickle
        import tempfile
        self._spill = tempfile.TemporaryDirectory(prefix="nsighttc-ranks-")
        spill = self._spill.name
        out = self.map(_full_spilled, [(k, (full, summary, spill, k, args)) for k, args in tasks], on_done)

        def fetch(key):
            with open(_spill_path(spill, key), "rb") as fh:
                return pickle.load(fh)
        return out, fetch

    def close(self) -> None:
        if self._pool is not None:
            _stop_pool(self._pool)
            self._pool = None
        spill = getattr(self, "_spill", None)
        if spill is not None:
            spill.cleanup()


def _spill_path(spill: str, key) -> str:
    import hashlib  # (not hash(): each process salts it differently)
    return os.path.join(spill, hashlib.sha1(repr(key).encode()).hexdigest() + ".pkl")


def _full_spilled(full, summary, spill: str, key, args):
    """In a worker process: the task's full result pickled to the spill folder, its summary returned."""
    import pickle
    got = full(*args)
    with open(_spill_path(spill, key), "wb") as fh:
        pickle.dump(got, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return summary(got)


def _stop_pool(pool) -> None:
    """Shut the pool down without waiting for a task past its timeout: its processes are killed."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.kill()  # (one still starting, its imports under way, too)
        except (OSError, ValueError, AttributeError):
            pass


def _summarize(summary, got):
    """On a worker: the summary of a full result (a ``Failed`` passes through)."""
    return got if isinstance(got, Failed) else _call(summary, (got,))


class Dask:
    """Tasks on a Dask cluster: an existing scheduler (``address``) or a ``LocalCluster`` sized to this machine.

    Each task is one rank's analysis, run where the cluster's workers are; they read the files where they lie (a
    shared filesystem path, or an fsspec URL) and send back only the rank's summary."""
    name = "dask"

    def __init__(self, address: str | None = None, timeout_s: float = DEFAULT_TASK_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S, workers: int | None = None):
        from .errors import UsageError
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise UsageError("--executor dask needs Dask's distributed scheduler: pip install 'nsighttc[dask]'") \
                from None
        self.timeout_s = timeout_s
        self.cluster = None
        if address is None:
            n = workers or os.cpu_count() or 1
            self.cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                                        host="127.0.0.1")
            address = self.cluster.scheduler_address
        self.address = address
        try:
            self.client = Client(address, timeout=connect_timeout_s, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            if self.cluster is not None:
                self.cluster.close()
            raise UsageError(f"--executor dask://{address.split('://')[-1]}: no Dask scheduler answered within "
                             f"{connect_timeout_s:g} s ({type(exc).__name__}); start one (dask scheduler, "
                             "dask-jobqueue, dask-kubernetes) or check the address") from None

    def map(self, fn: Callable, tasks: list[tuple[Hashable, tuple]],
            on_done: Callable[[Hashable, Any], None] | None = None) -> dict:
        import uuid
        run = uuid.uuid4().hex[:8]
        futures = {self.client.submit(_call, fn, args, pure=False, key=f"nsighttc-{run}-{i}"): key
                   for i, (key, args) in enumerate(tasks)}
        return self._map_futures(futures, on_done)

    def _map_futures(self, futures: dict, on_done) -> dict:
        from distributed import as_completed
        from distributed.client import FutureCancelledError
        out: dict = {}
        seq = as_completed(list(futures), timeout=self.timeout_s, loop=self.client.loop)
        try:
            for f in seq:
                key = futures[f]
                try:
                    res = f.result()
                except FutureCancelledError as exc:
                    res = Failed("cancelled on the cluster", exc)
                except Exception as exc:  # noqa: BLE001 - KilledWorker: its worker died every time it was tried
                    name = type(exc).__name__
                    res = Failed(("its worker died each time the task was tried (KilledWorker)"
                                  if name == "KilledWorker" else _describe(exc)), exc)
                f.release()
                _settle(out, key, res, on_done)
        except TimeoutError:
            for f, key in futures.items():
                if key not in out:
                    f.cancel()
                    _settle(out, key, Failed(f"not analysed within {self.timeout_s:g} s (--rank-timeout)"), on_done)
        return out

    def map_keep(self, full: Callable, summary: Callable, tasks: list[tuple[Hashable, tuple]],
                 on_done: Callable[[Hashable, Any], None] | None = None) -> tuple[dict, Callable[[Hashable], Any]]:
        """Each task's full result stays on the cluster (a future); only ``summary`` of it comes here, and
        ``fetch(key)`` brings one full result when asked (a worker lost since recomputes it from its inputs)."""
        import uuid
        run = uuid.uuid4().hex[:8]
        fulls = {key: self.client.submit(_call, full, args, pure=False, key=f"nsighttc-{run}-full-{i}")
                 for i, (key, args) in enumerate(tasks)}
        self._kept = list(fulls.values())
        summaries = [(key, (summary, fulls[key])) for key, _ in tasks]
        out = self._map_futures({self.client.submit(_summarize, fn, fut, pure=False, key=f"nsighttc-{run}-sum-{i}"): key
                                 for i, (key, (fn, fut)) in enumerate(summaries)}, on_done)

        def fetch(key):
            got = fulls[key].result(timeout=self.timeout_s)
            if isinstance(got, Failed):
                raise RuntimeError(got.reason)
            return got
        return out, fetch

    def close(self) -> None:
        try:
            for f in getattr(self, "_kept", []):
                f.release()
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()


def make(spec: str | None, jobs: int | None = None, timeout_s: float | None = None,
         connect_timeout_s: float | None = None):
    """The executor a ``--executor`` value names: ``processes`` (``jobs`` processes), ``local`` (here), ``dask`` (a
    ``LocalCluster`` sized to this machine) or ``dask://HOST:PORT`` / ``tcp://HOST:PORT`` (an existing scheduler)."""
    from .errors import UsageError
    timeout_s = DEFAULT_TASK_TIMEOUT_S if timeout_s is None else timeout_s
    connect_timeout_s = DEFAULT_CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s
    spec = (spec or "processes").strip()
    if spec == "local":
        return Local()
    if spec == "processes":
        return Processes(jobs or os.cpu_count() or 1, timeout_s)
    if spec == "dask":
        return Dask(None, timeout_s, connect_timeout_s, jobs)
    for prefix in ("dask://", "tcp://", "tls://"):
        if spec.startswith(prefix):
            rest = spec[len(prefix):]
            if not rest or ":" not in rest:
                raise UsageError(f"--executor {spec}: give the scheduler as dask://HOST:PORT")
            return Dask(("tls://" if prefix == "tls://" else "tcp://") + rest, timeout_s, connect_timeout_s)
    raise UsageError(f"--executor {spec}: expected one of {', '.join(EXECUTORS)}")
