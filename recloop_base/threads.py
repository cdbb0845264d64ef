"""Threads for compiled kernels that release the GIL (the World's span kernels, ``loo_knn``,
``bred``)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

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


def thread_map(fn, items, n: int, *, stop: threading.Event | None = None) -> list:
    """``[fn(x) for x in items]`` on up to ``n`` threads (in the caller's thread if n == 1).

    The first exception raised by a call (or an interrupt of the caller) is re-raised in the
    caller as soon as it happens; ``stop`` is set first, so that long calls which check it
    can end early instead of being waited for.
    """
    items = list(items)
    if n <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(n, len(items))) as pool:
        futures = [pool.submit(fn, x) for x in items]
        try:
            _, running = wait(futures, return_when=FIRST_EXCEPTION)
            if running:  # a call raised: re-raise it now
                next(f for f in futures if f.done() and f.exception() is not None).result()
            return [f.result() for f in futures]
        except BaseException:
            if stop is not None:
                stop.set()
            for f in futures:
                f.cancel()
            raise
