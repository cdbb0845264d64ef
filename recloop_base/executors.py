"""The ``executor=`` of large evaluations: this process (``None``) or a Dask cluster.

``evaluators.loo_knn``, ``evaluators.offline_score``, ``evaluators.bred`` and
``simulator.online_value`` split their work into partitions (held-out users, replicates,
runs) whose results are independent and are put back in a fixed order, so that the numbers
never depend on where, or in how many partitions, they were computed. This module runs the
partitions: on threads of this process, or as tasks of a ``dask.distributed.Client`` with the
shared inputs scattered once to every worker (``broadcast=True``). Dask is imported only when
a client is given; without the ``dask`` extra everything else works.

Rules (issue 17):

* a client that is closed, unreachable or has no worker is refused before any work is sent;
  anything other than ``None`` or a Client is a ``TypeError`` naming ``executor``;
* a worker lost mid-run: Dask reruns its tasks elsewhere (the scattered inputs are on every
  worker), and the result is the same;
* called from inside a task of the same cluster (an evaluation inside a sweep cell), the
  task secedes from its worker's thread pool while it waits for its partitions and rejoins
  afterwards, so one-thread workers do not deadlock.
"""

from __future__ import annotations

import threading

from recloop_base.threads import thread_map
from recloop_base.validation import ArgumentTypeError, ArgumentValueError

__all__ = ["check_executor", "executor_threads", "run_partitions", "split_evenly",
           "split_by_cost"]

_RULE = "None or a running dask.distributed.Client with at least one worker"
_PING_S = 10.0  # seconds a live scheduler has to answer before it counts as unreachable


def check_executor(executor, name: str = "executor"):
    """``executor`` checked: ``None``, or a running ``dask.distributed.Client`` with workers.

    Parameters
    ----------
    executor : None or dask.distributed.Client
    name : str
        The argument's name in messages.

    Returns
    -------
    None or dask.distributed.Client

    Raises
    ------
    ArgumentTypeError (a TypeError)
        Anything else (also any object when Dask is not installed).
    ArgumentValueError (a ValueError)
        A closed client, one whose scheduler does not answer within 10 s, or one with no
        worker -- before any work is sent.
    """
    if executor is None:
        return None
    try:
        from distributed import Client
    except ImportError:  # the dask extra is not installed: nothing can be a Client
        raise ArgumentTypeError(name, _RULE + " (install the extra: pip install "
                                "'recloop[dask]')", type(executor).__name__) from None
    if not isinstance(executor, Client):
        raise ArgumentTypeError(name, _RULE, type(executor).__name__)
    if executor.status != "running":
        what = ("a closed Client" if executor.status in ("closed", "closing") else
                "a Client that lost its scheduler")
        raise ArgumentValueError(name, _RULE, f"{what} (status {executor.status!r})")
    try:
        workers = executor.sync(executor.scheduler.ncores, callback_timeout=_PING_S)
    except Exception as err:  # noqa: BLE001 - any failure to reach the scheduler
        raise ArgumentValueError(name, _RULE, f"a Client whose scheduler "
                                 f"{executor.scheduler.address if executor.scheduler else ''} "
                                 f"did not answer ({type(err).__name__}: {err})") from None
    if not workers:
        raise ArgumentValueError(name, _RULE, "a Client whose cluster has no worker")
    return executor


def executor_threads(client) -> int:
    """Worker threads of a (checked) client's cluster, in total."""
    return max(1, sum(client.nthreads().values()))


def split_evenly(n: int, parts: int) -> list[range]:
    """``range(n)`` cut into at most ``parts`` contiguous, non-empty, near-equal ranges."""
    parts = max(1, min(int(parts), n))
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    # adjacent pairs: bounds[1:] is one shorter on purpose
    return [range(lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False) if hi > lo]


def split_by_cost(cost, parts: int) -> list[range]:
    """Contiguous ranges of items with near-equal total ``cost`` (at most ``parts``)."""
    import numpy as np

    cost = np.asarray(cost, dtype=np.float64)
    n = cost.size
    parts = max(1, min(int(parts), n))
    if n == 0:
        return []
    cum = np.cumsum(cost)
    total = cum[-1]
    if not total > 0:
        return split_evenly(n, parts)
    cuts = np.searchsorted(cum, total * np.arange(1, parts) / parts, side="left") + 1
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    # adjacent pairs: bounds[1:] is one shorter on purpose
    return [range(int(lo), int(hi)) for lo, hi in zip(bounds, bounds[1:], strict=False) if hi > lo]


def _in_dask_task() -> bool:
    try:
        from distributed.worker import thread_state
    except ImportError:
        return False
    return getattr(thread_state, "key", None) is not None


def run_partitions(fn, parts, *, shared=(), executor=None, threads: int = 1,
                   progress: bool = False, desc: str | None = None,
                   stop: threading.Event | None = None) -> list:
    """``[fn(*shared, part) for part in parts]``, here or on a Dask cluster, in order.

    Parameters
    ----------
    fn : callable
        A module-level function (Dask pickles it by reference) whose result depends only on
        its arguments.
    parts : sequence
        One item per partition (small: sent with each task).
    shared : tuple
        Inputs every partition reads (large arrays): passed as they are locally, scattered
        once to every worker of the cluster (``broadcast=True``) otherwise.
    executor : None or checked dask.distributed.Client
        See :func:`check_executor`.
    threads : int
        Threads of this process for the partitions when ``executor`` is None (``fn`` must
        release the GIL to gain from more than one).
    progress : bool
        A tqdm bar over the partitions (local and distributed); inside a harness cell the
        partitions report to the harness instead (:mod:`recloop_base.progress`).
    desc : str, optional
        The bar's label.
    stop : threading.Event, optional
        Set (locally) as soon as a partition fails or the caller is interrupted, for
        partitions that check it between steps to end early.

    Returns
    -------
    list
        ``fn``'s results in the order of ``parts``. The first exception raised by a
        partition is re-raised here (the other partitions are cancelled).
    """
    from recloop_base.progress import Bar

    parts = list(parts)
    bar = Bar(len(parts), desc=desc, show=progress, unit="partition")
    try:
        if executor is None:
            lock = threading.Lock()

            def one(part):
                out = fn(*shared, part)
                with lock:
                    bar.update()
                return out

            return thread_map(one, parts, threads, stop=stop)
        return _run_on_dask(fn, parts, shared, executor, bar)
    finally:
        bar.close()


def _run_on_dask(fn, parts, shared, client, bar) -> list:
    from distributed import as_completed, rejoin, secede

    seceded = _in_dask_task()
    if seceded:  # free this worker's thread while the partitions run (no nested deadlock)
        secede()
    scattered, futures = [], []
    try:
        scattered = [client.scatter([x], broadcast=True, hash=False)[0] for x in shared]
        futures = [client.submit(fn, *scattered, part, pure=False) for part in parts]
        position = {f.key: i for i, f in enumerate(futures)}
        out = [None] * len(parts)
        for f in as_completed(futures):
            out[position[f.key]] = f.result()  # re-raises a partition's exception
            f.release()
            bar.update()
        return out
    finally:
        pending = [f for f in futures if not f.done()] + scattered
        if pending:
            client.cancel(pending)
        if seceded:
            rejoin()
