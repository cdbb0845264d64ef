"""Threads for compiled kernels that release the GIL."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor


def n_threads() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def thread_map(fn, items, n: int) -> list:
    """``[fn(x) for x in items]`` on up to ``n`` threads (in the caller's thread if n == 1);
    the first exception is re-raised in the caller."""
    items = list(items)
    if n <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(n, len(items))) as pool:
        return list(pool.map(fn, items))
