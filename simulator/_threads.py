"""Threads for compiled kernels that release the GIL (the World's span kernels, ``loo_knn``,
``bred``)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

#: Environment variable capping the threads of recloop's kernels (default: every CPU the
#: process may run on). The harness sets it in its worker processes so that workers times
#: threads does not exceed the CPUs.
THREADS_ENV = "RECLOOP_THREADS"


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def n_threads() -> int:
    """Threads for a kernel: ``$RECLOOP_THREADS`` if set, else :func:`cpus`."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return cpus()
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"environment variable {THREADS_ENV} must be a positive integer; "
                         f"got {value!r}.")
    return n


def thread_map(fn, items, n: int) -> list:
    """``[fn(x) for x in items]`` on up to ``n`` threads (in the caller's thread if n == 1);
    the first exception is re-raised in the caller."""
    items = list(items)
    if n <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(n, len(items))) as pool:
        return list(pool.map(fn, items))
