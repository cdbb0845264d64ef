"""One large evaluation on a Dask cluster (issue 17): the same bits as in this process.

Every test here shares one 2-worker LocalCluster (module scope: a cluster costs seconds to
start). ``loo_knn``, ``offline_score`` (exhaustive and sampled), ``bred`` and
``simulator.online_value`` must give identical results whatever the executor and the number
of partitions; bad clients are refused before any work is sent; a worker killed mid-run
changes nothing.
"""

import os
import signal
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agents
import simulator
from evaluators import NoMatchWarning, bred, loo_knn, offline_score
from evaluators.datasets import synthetic_ratings
from recloop.testing.strategies import rating_triples

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0",
                                       env={"RECLOOP_THREADS": "1"})
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def same_loo(a, b):
    assert a.prediction.tobytes() == b.prediction.tobytes()
    for name in ("n_neighbours", "fallback", "index", "user", "item"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert (a.mae, a.rmse) == (b.mae, b.rmse) or (np.isnan(a.mae) and np.isnan(b.mae))


# -- loo_knn ------------------------------------------------------------------------------


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rating_triples(), n_partitions=st.integers(1, 7),
       similarity=st.sampled_from(["pearson", "cosine", "adjusted_cosine", "pearson_corated"]))
def test_loo_knn_on_the_cluster_equals_local(client, data, n_partitions, similarity):
    u, i, r = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        here = loo_knn((u, i, r), similarity=similarity, k=3)
        there = loo_knn((u, i, r), similarity=similarity, k=3, executor=client,
                        n_partitions=n_partitions)
    same_loo(here, there)


def test_loo_knn_partitions_users_and_subsets(client):
    u, i, r = synthetic_ratings(300, 200, 6000, rng=1)
    held, nbrs = np.arange(0, 300, 3), np.arange(1, 300, 2)
    here = loo_knn((u, i, r), k=10, users=held, neighbours=nbrs, n_partitions=1)
    for p in (None, 2, 13):
        same_loo(here, loo_knn((u, i, r), k=10, users=held, neighbours=nbrs, executor=client,
                               n_partitions=p, progress=True))


def test_loo_knn_inside_a_task_of_the_same_cluster_does_not_deadlock(client):
    # one thread per worker: the outer task must free its thread while its partitions run
    u, i, r = synthetic_ratings(80, 60, 1200, rng=2)

    def cell():
        return loo_knn((u, i, r), k=5, executor=distributed.get_client(), n_partitions=4).mae

    assert client.submit(cell, pure=False).result(timeout=120) == loo_knn((u, i, r), k=5).mae


# -- offline_score ------------------------------------------------------------------------


def test_offline_score_exhaustive_and_sampled_equal_local(client):
    g = np.random.default_rng(3)
    profiles = sp.csr_array((g.random((400, 60)) < 0.08).astype(float))
    for rec in (agents.Popularity(), agents.UserCosineCF()):
        for n_samples in (None, 3000):
            kw = dict(k=5, n_samples=n_samples, rng=7, batch_size=97)
            here = offline_score(profiles, rec, **kw)
            for p in (None, 3):
                there = offline_score(profiles, rec, executor=client, n_partitions=p, **kw)
                assert (there.value, there.stderr, there.ci_low, there.ci_high, there.n) == \
                    (here.value, here.stderr, here.ci_low, here.ci_high, here.n)


class OutOfRange:
    """A recommender whose list for user 7 holds an item id past the catalogue."""

    def fit(self, profiles):
        self.n_items = profiles.shape[1]
        return self

    def recommend(self, users, k, *, removed=None):
        out = np.tile(np.arange(k), (len(users), 1))
        out[np.asarray(users) == 7, 0] = self.n_items + 2
        return out

    def __repr__(self):
        return "OutOfRange()"


def test_bad_recommender_output_names_the_first_bad_row_on_the_cluster_too(client):
    profiles = sp.csr_array(np.ones((10, 6)))
    msg = r"`recommender` OutOfRange\(\) returned item id 8 outside \[0, 6\) in row 42 " \
          r"\(user 7, item 0 removed\)"
    with pytest.raises(ValueError, match=msg):
        offline_score(profiles, OutOfRange(), k=2, batch_size=4)
    with pytest.raises(ValueError, match=msg):
        offline_score(profiles, OutOfRange(), k=2, batch_size=4, executor=client,
                      n_partitions=5)


# -- bred and online_value ----------------------------------------------------------------


def _linucb(gen):
    a = agents.LinUCB(0.5)
    a.reset(gen)
    return a


def _ucb1(gen):
    a = agents.UCB1()
    a.reset(gen)
    return a


def _thompson(gen):
    a = agents.ThompsonSampling()
    a.reset(gen)
    return a


# UCB1: a compiled batched twin; ThompsonSampling: a twin stepping in Python. (LinUCB's
# kernels take ~10 s to compile in each worker; its partitions are tested in this process.)
@pytest.mark.parametrize("make", [_ucb1, _thompson], ids=["ucb1", "thompson"])
@pytest.mark.parametrize("reveal", ["every", "once"])
def test_bred_on_the_cluster_equals_local(client, make, reveal):
    log, _ = simulator.collect_log(simulator.preset("bred_linear"), 300, rng=4)
    kw = dict(n_bootstrap=7, reveal=reveal, rng=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoMatchWarning)
        here = bred(log, make, n_partitions=1, **kw)
        for p in (None, 3):
            there = bred(log, make, executor=client, n_partitions=p, **kw)
            np.testing.assert_array_equal(there.replicate_values, here.replicate_values)
            np.testing.assert_array_equal(there.replicate_matches, here.replicate_matches)
            assert (there.value, there.stderr, there.ci_low, there.ci_high) == \
                (here.value, here.stderr, here.ci_low, here.ci_high)


@pytest.mark.parametrize("method", ["batched", "loop"])
def test_online_value_on_the_cluster_equals_local(client, method):
    c = simulator.LinearBanditConfig()
    kw = dict(n_runs=5, rng=3, method=method)

    def make(gen):
        a = agents.UCB1()
        a.reset(gen)
        return a

    here = simulator.online_value(c, make, 120, **kw)
    for p in (None, 2):
        there = simulator.online_value(c, make, 120, executor=client, n_partitions=p, **kw)
        assert there.curve.tobytes() == here.curve.tobytes()
        assert there.curve_stderr.tobytes() == here.curve_stderr.tobytes()


# -- bad clients ----------------------------------------------------------------------------


def test_closed_client_is_refused_before_any_work(client):
    closed = distributed.Client(client.scheduler.address)
    closed.close()
    u, i, r = synthetic_ratings(20, 10, 100, rng=0)
    for call in (lambda: loo_knn((u, i, r), executor=closed),
                 lambda: bred(simulator.collect_log("bred_linear", 50, rng=0)[0], _linucb,
                              n_bootstrap=2, executor=closed),
                 lambda: simulator.online_value("bred_linear", _linucb, 5, n_runs=2,
                                                executor=closed),
                 lambda: offline_score(sp.csr_array(np.eye(3)), agents.Popularity(), k=1,
                                       executor=closed)):
        with pytest.raises(ValueError, match=r"`executor` must be None or a running .*; got "
                                             r"a closed Client"):
            call()


def test_client_without_scheduler_or_workers_is_refused():
    cluster = distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0")
    lonely = distributed.Client(cluster.scheduler_address)
    u, i, r = synthetic_ratings(20, 10, 100, rng=0)
    with pytest.raises(ValueError, match="got a Client whose cluster has no worker"):
        loo_knn((u, i, r), executor=lonely)
    cluster.close()
    with pytest.raises(ValueError, match=r"`executor` must be None or a running"):
        loo_knn((u, i, r), executor=lonely)  # the scheduler is gone
    lonely.close()


@pytest.mark.parametrize("call", [
    pytest.param(lambda ex: loo_knn(([0, 0], [0, 1], [1.0, 2.0]), executor=ex), id="loo_knn"),
    pytest.param(lambda ex: offline_score(np.eye(3), agents.Popularity(), k=1, executor=ex),
                 id="offline_score"),
    pytest.param(lambda ex: bred(simulator.collect_log("bred_linear", 50, rng=0)[0], _linucb,
                                 n_bootstrap=2, executor=ex), id="bred"),
    pytest.param(lambda ex: simulator.online_value("bred_linear", _linucb, 5, n_runs=2,
                                                   executor=ex), id="online_value"),
])
def test_executor_of_the_wrong_type_is_a_type_error_naming_it(call):
    with pytest.raises(TypeError, match=r"`executor` must be None or a running "
                                        r"dask.distributed.Client .*; got str"):
        call("tcp://127.0.0.1:8786")


# -- a worker lost mid-run --------------------------------------------------------------------


@pytest.mark.slow
def test_a_worker_killed_mid_run_changes_nothing(client):
    u, i, r = synthetic_ratings(1500, 1200, 150_000, rng=5)
    here = loo_knn((u, i, r), k=20)
    pids = client.run(os.getpid)
    victim, pid = sorted(pids.items())[0]
    killed = threading.Event()

    def kill_when_busy():
        deadline = time.time() + 60
        while time.time() < deadline and not killed.is_set():
            if client.processing().get(victim):
                os.kill(pid, signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    killer.start()
    there = loo_knn((u, i, r), k=20, executor=client, n_partitions=24)
    killer.join(timeout=1)
    assert killed.is_set(), "the worker was not killed while it held a partition"
    same_loo(here, there)
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it for the next tests
