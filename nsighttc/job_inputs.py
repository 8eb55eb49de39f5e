"""Which inputs make one job, and which rank each is: the checks ``analyze`` makes before anything is analysed.

- The same recording given twice (identical content) would count its work twice (``no_recording_twice``).
- Recordings that cannot be ranks of one job (other world sizes, GPUs, backends, days apart) are split by job
  (``job_groups``, the facts from ``parse.same_job``).
- Several ranks' inputs are grouped by rank (``rank_groups``): a file of one of them that cannot be opened is a
  failed rank, named in the verdict, not a failed job.
"""
from __future__ import annotations

from pathlib import Path

from .errors import InputError, NsighttcError, UsageError
from .parse import Parsed, ranks as rank_inputs


def no_recording_twice(paths: list) -> None:
    """The same recording given twice (identical content) would count its work twice: an error naming both."""
    from .parse import same_job
    twice = same_job.duplicates([p for p in paths if not isinstance(p, Parsed)])
    if twice:
        a, b = twice[0]
        raise InputError(f"the same recording as {a} (identical content): given twice, its kernels and steps would "
                         "count twice; give each rank's file once", b)


def job_groups(paths: list) -> tuple[list[list], str] | None:
    """(the inputs split by job, why) when the timeline inputs cannot all be ranks of one job, else None. Counter
    inputs (ncu) go with every job."""
    from .parse import same_job
    from .parse.sniff import Kind
    timelines, counters, items = [], [], []
    for p in paths:
        if isinstance(p, Parsed):
            return None  # the default run's own inputs: one run by construction
        try:
            kind = _kind(p)
        except NsighttcError:
            continue  # (named later as a bad input)
        if kind in (Kind.NCU_CSV, Kind.NCU_REP):
            counters.append(p)
            continue
        if hasattr(p, "url"):
            from .remote_inputs import head
            h = head(p, 1 << 20)
        else:
            h = rank_inputs._head(Path(p)) if kind is Kind.KINETO_JSON else None
        timelines.append(p)
        items.append((p, same_job.facts(p, h, kind)))
    if len(items) < 2:
        return None
    groups, why = same_job.job_groups(items)
    if why is None:
        return None
    return [g + counters for g in groups], why


def _kind(p):
    """The kind of an input (a path, a parsed input, a URL's ``RemoteInput``) from its start."""
    from .parse.sniff import HEAD_BYTES, kind_of, sniff
    if isinstance(p, Parsed):
        return p.kind
    if hasattr(p, "url"):
        from .remote_inputs import head
        return kind_of(p.name, head(p, HEAD_BYTES), p.url)
    return sniff(Path(p))


def rank_groups(paths: list):
    """(inputs by rank, shared counter inputs, rank infos, ranks that could not be opened) when the inputs hold two
    ranks or more, else None. A file that cannot be opened (missing, of no known kind) whose rank its path names is
    such a rank (``rank_map.RankFailure``): the job is judged without it and says so."""
    from .parse.sniff import Kind
    from .rank_map import RankFailure
    kinds, plain, bad = {}, [], {}
    for p in paths:
        path = p.path if isinstance(p, Parsed) else p if hasattr(p, "url") else Path(p)
        try:
            kinds[path] = _kind(p)
        except NsighttcError as exc:
            bad[path] = exc
            continue
        plain.append(path)
    if len(plain) + len(bad) < 2 and not (plain and kinds[plain[0]] is Kind.NSYS_SQLITE
                                          and not isinstance(paths[0], Parsed)):
        return None  # one file is one process, unless it is an nsys export of a whole job
    by_rank, counters, infos = rank_inputs.group(plain, kinds)
    unread: list[RankFailure] = []
    for path, exc in bad.items():
        r = rank_inputs.rank_of(path).rank
        if r is None or r in by_rank:
            return None  # the single-run path reports the bad file with its usual message
        unread.append(RankFailure(r, [str(path)], exc.message, exc))
    if len([r for r in by_rank if r >= 0]) + len(unread) < 2:
        return None
    # inputs the caller had parsed already (profile's default run planned on them) are analysed as they are
    given = {p.path: p for p in paths if isinstance(p, Parsed)}
    if given:
        by_rank = {r: [given.get(x, x) if isinstance(x, Path) else x for x in xs] for r, xs in by_rank.items()}
        counters = [given.get(x, x) if isinstance(x, Path) else x for x in counters]
    if -1 in by_rank:
        raise UsageError("inputs of several ranks, but no rank for "
                         + ", ".join(str(p) for p in by_rank[-1][:3])
                         + " (name it rank<N>, or keep each rank's files in a rank<N>/ directory)")
    if not by_rank:
        raise unread[0].error
    return by_rank, counters, infos, unread
