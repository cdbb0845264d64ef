"""Threads for compiled kernels that release the GIL (the World's span kernels, ``loo_knn``,
``bred``)."""

from __future__ import annotations

import contextlib
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


#: The most threads ``$RECLOOP_THREADS`` may ask for (far above any machine's cores: a value
#: beyond it is a typo, and numba refuses thread counts above its own pool).
MAX_THREADS = 1024


def n_threads() -> int:
    """Threads for a kernel: ``$RECLOOP_THREADS`` if set (an integer in ``[1,``
    :data:`MAX_THREADS` ``]``, else ``ValueError``), else :func:`cpus`."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return cpus()
    # ASCII digits only (str.isdigit takes superscripts that int() refuses), a few of them
    n = int(value) if len(value) <= 6 and value.isascii() and value.isdigit() else 0
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"environment variable {THREADS_ENV} must be an integer in "
                         f"[1, {MAX_THREADS}]; got {value[:40]!r}"
                         + ("..." if len(value) > 40 else "") + ".")
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


_BLAS_LOCAL = []  # [function or None], looked up once


def _blas_local_setter():
    """OpenBLAS's ``openblas_set_num_threads_local`` of the library numpy uses, or None.

    It sets the thread count of BLAS calls made *by the calling thread* (OpenBLAS >= 0.3.27,
    which numpy's wheels bundle) and returns the previous count. None where numpy uses
    another BLAS or an older OpenBLAS: then nothing is changed.
    """
    if not _BLAS_LOCAL:
        fn = None
        try:
            import ctypes
            import glob

            import numpy as np

            libs = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs",
                                                 "*openblas*")))
            if libs:
                fn = ctypes.CDLL(libs[0]).openblas_set_num_threads_local
                fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int]
        except (OSError, AttributeError, ImportError):
            fn = None
        _BLAS_LOCAL.append(fn)
    return _BLAS_LOCAL[0]


@contextlib.contextmanager
def blas_threads(n: int):
    """Run the block's BLAS calls (numpy's matmul) on at most ``n`` threads, in this thread.

    Many numpy products of moderate size stall on a loaded machine when BLAS runs them on
    several threads (each call waits for all of its threads to be scheduled): the calibration
    fit measured 3x slower with 2 BLAS threads than with 1 at a load average of 4-7 on 2
    cores. Only the calling thread is affected; a no-op where numpy's BLAS is not an
    OpenBLAS with thread-local settings.
    """
    fn = _blas_local_setter()
    if fn is None:
        yield
        return
    old = fn(int(n))
    try:
        yield
    finally:
        fn(old)
