"""Thread count of the kernels: every CPU by default, capped by $RECLOOP_THREADS."""

import threading
import time

import pytest

from recloop._runner import _worker_env
from recloop_base.threads import THREADS_ENV, cpus, n_threads, thread_map


def test_default_is_the_cpus(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert n_threads() == cpus() >= 1


def test_environment_variable_sets_the_threads(monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "3")
    assert n_threads() == 3


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", "1" * 20, "1025"])
def test_bad_environment_variable_is_named(monkeypatch, value):
    monkeypatch.setenv(THREADS_ENV, value)
    with pytest.raises(ValueError, match=rf"{THREADS_ENV} must be an integer in \[1, 1024\]"):
        n_threads()


def test_thread_map_keeps_order_and_raises_the_first_error():
    assert thread_map(lambda x: x * x, range(7), 3) == [x * x for x in range(7)]

    def boom(x):
        if x == 2:
            raise KeyError(x)
        return x

    with pytest.raises(KeyError):
        thread_map(boom, range(5), 2)


def test_worker_processes_share_the_cpus_and_user_settings_win(monkeypatch):
    for k in (THREADS_ENV, "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(k, raising=False)
    env = _worker_env(cpus())
    assert env[THREADS_ENV] == env["OPENBLAS_NUM_THREADS"] == "1"
    assert _worker_env(1)[THREADS_ENV] == str(cpus())
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert "OMP_NUM_THREADS" not in _worker_env(2)


def test_thread_map_raises_at_once_and_tells_long_calls_to_stop():
    stop = threading.Event()

    def work(x):
        if x == 0:
            raise KeyError("first")
        deadline = time.monotonic() + 30
        while not stop.is_set():  # a long call that checks `stop`
            if time.monotonic() > deadline:
                return "never stopped"
            time.sleep(0.001)
        raise RuntimeError("stopped")

    t0 = time.monotonic()
    with pytest.raises(KeyError, match="first"):
        thread_map(work, [0, 1], 2, stop=stop)
    assert stop.is_set() and time.monotonic() - t0 < 10


def test_blas_threads_caps_and_restores_without_changing_results():
    import numpy as np

    from recloop_base import threads

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(300, 200)), rng.normal(size=(200, 100))
    want = a @ b
    setter = threads._blas_local_setter()
    original = None
    if setter is not None:  # the setter returns the previous count: read it, put it back
        original = setter(2)
        setter(original)
    with threads.blas_threads(1):
        got = a @ b
        if setter is not None:
            assert setter(1) == 1  # capped inside the block
    # the same product, up to the last bits (BLAS sums in another order on other threads)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    if setter is not None:
        assert setter(original) == original  # restored after it


def test_the_suites_processes_give_blas_one_thread():
    """tests/conftest.py: one BLAS thread per test process (xdist runs several per core), as
    the harness gives its own workers; a second would oversubscribe the cores and spin."""
    import threadpoolctl

    info = threadpoolctl.threadpool_info()
    assert info and all(i["num_threads"] == 1 for i in info), info
