"""recloop_base.executors without a cluster: the splits, the local runner, the argument."""

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recloop_base.executors import check_executor, run_partitions, split_by_cost, split_evenly
from recloop_base.validation import ArgumentTypeError


@given(n=st.integers(0, 200), parts=st.integers(1, 50))
def test_split_evenly_covers_in_order(n, parts):
    ranges = split_evenly(n, parts)
    assert [i for r in ranges for i in r] == list(range(n))
    assert len(ranges) == min(parts, n) and all(len(r) > 0 for r in ranges)
    if ranges:
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1


@given(cost=st.lists(st.floats(0, 1e6), max_size=100), parts=st.integers(1, 20))
def test_split_by_cost_covers_in_order_and_balances(cost, parts):
    ranges = split_by_cost(cost, parts)
    assert [i for r in ranges for i in r] == list(range(len(cost)))
    assert len(ranges) <= parts and all(len(r) > 0 for r in ranges)
    c = np.asarray(cost, dtype=float)
    if c.sum() > 0:  # no part exceeds its share by more than one item's cost
        share = c.sum() / len(ranges)
        assert all(c[r.start:r.stop].sum() <= share + c.max() * 1.000001 + 1e-9 for r in ranges)


def test_run_partitions_keeps_the_order_on_threads():
    out = run_partitions(lambda base, p: base + p, list(range(40)), shared=(100,), threads=4)
    assert out == [100 + p for p in range(40)]


def test_run_partitions_raises_the_first_failure_and_sets_stop():
    stop = threading.Event()

    def f(p):
        if p == 3:
            raise ValueError("part 3 failed")
        return p

    with pytest.raises(ValueError, match="part 3 failed"):
        run_partitions(f, range(8), threads=2, stop=stop)
    assert stop.is_set()


@pytest.mark.parametrize("bad", ["tcp://127.0.0.1:8786", 2, object()], ids=["str", "int", "obj"])
def test_an_executor_of_the_wrong_type_is_a_type_error(bad):
    with pytest.raises(ArgumentTypeError, match="`executor` must be None or a running "
                                                 "dask.distributed.Client"):
        check_executor(bad)
    assert check_executor(None) is None


def test_everything_works_without_dask_installed():
    # dask is an optional extra: imported only when a client is given
    import subprocess
    import sys

    code = """
import sys
sys.modules["distributed"] = None  # as if the dask extra were not installed
sys.modules["dask"] = None
import numpy as np, agents, simulator
from evaluators import bred, loo_knn, offline_score
from evaluators.datasets import synthetic_ratings
u, i, r = synthetic_ratings(30, 20, 300, rng=0)
assert np.isfinite(loo_knn((u, i, r), k=3, n_partitions=3).mae)
class First:  # no compiled kernel: keeps the subprocess fast
    def __init__(self, g): self.g = g
    def act(self, obs): return int(np.flatnonzero(obs["available"])[0])
    def update(self, obs, a, r): pass
make = First
log, _ = simulator.collect_log("bred_linear", 100, rng=0)
assert np.isfinite(bred(log, make, n_bootstrap=3, rng=0).value)
assert np.isfinite(simulator.online_value("bred_linear", make, 20, n_runs=2, rng=0).value)
assert offline_score(np.eye(3), agents.Popularity(), k=1).n == 3
try:
    loo_knn((u, i, r), executor=object())
except TypeError as err:
    assert "pip install 'recloop[dask]'" in str(err), err
else:
    raise AssertionError("no TypeError")
"""
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("package", ["simulator", "agents", "evaluators"])
def test_importing_the_packages_does_not_import_dask(package):
    import subprocess
    import sys

    code = (f"import sys, {package}; "
            f"print(','.join(m for m in ('dask', 'distributed', 'tqdm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"import {package} loaded {out}"
