"""The world's numba kernels against their Python versions (same function, interpreted)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import _kernels
from simulator._world import _alias_table


def _span_inputs(seed, n_users, n_items, n_ticks, dim, n_terms, events, logistic):
    rng = np.random.default_rng(seed)
    lam = 1.0 + rng.pareto(2.0, n_users)
    counts = rng.integers(0, events + 1, n_ticks)
    starts = np.zeros(n_ticks + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    # visiting users, ascending within each tick (repeats: several events of one user)
    users = np.concatenate([np.sort(rng.choice(n_users, c, p=lam / lam.sum()))
                            for c in counts]).astype(np.int64)
    n = users.size
    r = rng.random(n)
    tables = [_alias_table(w / w.sum()) for w in rng.random((n_ticks, n_items)) + 0.05]
    prob = np.stack([tb[0] for tb in tables])
    alias = np.stack([tb[1] for tb in tables])
    # repeated (user, item) pairs within and across ticks: the state must carry over
    coins = rng.random(n) * 0.5
    has = rng.random((n_users, n_items)) < 0.2
    taste0 = rng.normal(0, 1, (n_users, dim))
    drift_z = rng.normal(0, 1, (n_users, dim, n_terms)) if n_terms else np.zeros((0, 0, 0))
    basis = rng.normal(0, 1, (n_ticks, n_terms))
    features = rng.normal(0, 1, (n_items, dim))
    appeal = rng.normal(0, 1, (n_ticks, n_items))
    decay = rng.random((n_ticks, n_items))
    return (users, r, coins, starts, prob, alias, has, taste0, drift_z, basis, 0.1, features,
            appeal, decay, logistic)


def _items(args):
    """The item of every event, by the alias method in numpy (the reference)."""
    _, r, _, starts, prob, alias = args[:6]
    tick = np.repeat(np.arange(starts.size - 1), np.diff(starts))
    x = r * prob.shape[1]
    col = np.minimum(x.astype(np.int64), prob.shape[1] - 1)
    return np.where(x - col < prob[tick, col], col, alias[tick, col]), tick


span_cases = st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 60), st.integers(1, 8),
                       st.integers(1, 6), st.integers(1, 4), st.sampled_from([0, 3]),
                       st.integers(0, 80), st.booleans())


def _py_args(args, span_ticks, origin=None, theta=0.0):
    """The arguments of ``organic_span_py`` (up to ``logistic``) from ``_span_inputs``'s,
    with the OU drift's ``origin``, ``theta`` and the span's ticks inserted."""
    origin = np.zeros(0, np.int64) if origin is None else origin
    return (*args[:11], origin, theta, np.asarray(span_ticks, np.int64), *args[11:])


@settings(max_examples=30, deadline=None)
@given(span_cases, st.integers(1, 70), st.sampled_from([1, 2]), st.sampled_from([0.0, 0.05]))
def test_span_kernel_matches_python_and_ignores_blocks_and_threads(case, block, threads,
                                                                    theta):
    args = _span_inputs(*case)
    # the reference: the Python function, interpreted, one block holding every user
    has0 = args[6]
    has_ref = has0.copy()
    n, n_users = args[0].size, has0.shape[0]
    flag_ref, u_ref, i_ref = np.zeros(n, np.uint8), np.full(n, -1), np.full(n, -1)
    span_ticks = 100 + np.arange(args[3].size - 1)  # the span's ticks in the world
    origin = np.random.default_rng(case[0]).integers(90, 130, n_users)
    py = _py_args(args, span_ticks, origin, theta)
    _kernels.organic_span_py(*py[:6], has_ref, *py[7:], n_users, 0, n_users, flag_ref,
                             u_ref, i_ref)
    has = has0.copy()
    users, items, when = _kernels.organic_span(*args[:6], has, *args[7:], span_ticks,
                                               block=block, threads=threads, min_split=1,
                                               origin=origin, theta=theta)
    hit = flag_ref.astype(bool)
    item_ref, tick_ref = _items(args)
    assert np.array_equal(users, u_ref[hit])
    assert np.array_equal(items, i_ref[hit])
    assert np.array_equal(items, item_ref[hit])
    assert np.array_equal(when, span_ticks[tick_ref[hit]])
    assert np.array_equal(has, has_ref)
    # every adoption is a new (user, item) pair, now held
    assert not np.any(has0[users, items])
    assert np.all(has[users, items])
    assert np.unique(users * 1000 + items).size == users.size


def test_span_kernel_adopts_only_when_the_coin_is_below_p():
    # p = decay (score -> +inf with the linear model clipped to 1): coins below decay adopt
    args = list(_span_inputs(3, 10, 4, 2, 2, 0, 50, False))
    args[12] = np.full_like(args[12], 50.0)  # appeal: clip(score) = 1
    args[6] = np.zeros_like(args[6])
    n = args[0].size
    flag, out_u, out_i = np.zeros(n, np.uint8), np.zeros(n, np.int64), np.zeros(n, np.int64)
    n_users = args[6].shape[0]
    _kernels.organic_span_py(*_py_args(args, np.arange(args[3].size - 1)), 5, 0, n_users,
                             flag, out_u, out_i)
    items, tick = _items(args)
    coins, decay = args[2], args[13]
    below = coins < decay[tick, items]
    assert np.all(~flag.astype(bool) | below)  # never adopts above p
    assert flag.sum() > 0


def _span_in_child(case):
    args = _span_inputs(*case)
    has = args[6].copy()
    out = _kernels.organic_span(*args[:6], has, *args[7:], np.arange(args[3].size - 1),
                                block=4, threads=2, min_split=1)
    return [a.tolist() for a in out]


def test_two_threads_work_in_a_forked_child():
    # the parent's worker thread does not survive a fork; the child must make its own
    # (instead of waiting forever on a dead executor)
    import multiprocessing as mp

    case = (5, 40, 6, 4, 2, 0, 60, True)
    here = _span_in_child(case)  # starts the parent's worker
    with mp.get_context("fork").Pool(1) as pool:
        there = pool.apply_async(_span_in_child, (case,)).get(timeout=60)
    assert there == here
    assert len(here[0]) > 0


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.integers(2, 8), st.integers(1, 4),
       st.sampled_from([0, 2]), st.booleans(), st.sampled_from([1, 2]),
       st.sampled_from([0.0, 0.05]))
def test_campaign_kernel_matches_python_and_the_vectorised_hash(seed, n, n_items, k,
                                                                n_terms, logistic, threads,
                                                                theta):
    from simulator._crn import hash_uniforms, seed_key

    rng = np.random.default_rng(seed)
    n_users, dim, t = 40, 3, 17
    users = rng.choice(n_users, n, replace=False)
    slate = np.stack([rng.permutation(n_items)[:min(n_items, 5)] for _ in range(n)])
    key = seed_key(seed, 2)
    has0 = rng.random((n_users, n_items)) < 0.3
    alive = rng.random(n_items) < 0.8
    taste0 = rng.normal(0, 1, (n_users, dim))
    drift_z = rng.normal(0, 1, (n_users, dim, n_terms)) if n_terms else np.zeros((0, 0, 0))
    rest = (taste0, drift_z, rng.normal(0, 1, n_terms), 0.1, rng.normal(0, 1, (n_items, dim)),
            rng.normal(0, 1, n_items), rng.random(n_items), logistic)
    has = has0.copy()
    origin = rng.integers(0, 40, n_users)
    offered, accepted = _kernels.campaign_offers(users, slate, k, t, 3.0, key, has, alive,
                                                 *rest, threads=threads, min_split=2,
                                                 origin=origin, theta=theta)
    has_ref = has0.copy()
    off_ref, acc_ref = np.zeros(slate.shape, np.uint8), np.zeros(slate.shape, np.uint8)
    with np.errstate(over="ignore"):  # uint64 scalars wrap, as the hash wants
        _kernels.campaign_offers_py(users, slate, k, t, 3.0, np.uint64(key), has_ref, alive,
                                    *rest[:4], origin, theta, *rest[4:], off_ref, acc_ref)
    assert np.array_equal(offered, off_ref.astype(bool))
    assert np.array_equal(accepted, acc_ref.astype(bool))
    assert np.array_equal(has, has_ref)
    # offers: the first k alive items not held of each row; acceptances among them
    uu = np.broadcast_to(users[:, None], slate.shape)
    valid = alive[slate] & ~has0[uu, slate]
    assert np.array_equal(offered, valid & (np.cumsum(valid, axis=1) <= k))
    assert not np.any(accepted & ~offered)
    # acceptance: the world's counter-based coin below 1 - (1 - p)**boost, p in numpy
    x = taste0[uu]
    if n_terms:  # the OU drift scales the constant part by exp(-theta |t - origin|)
        if theta:
            x = x * np.exp(-theta * np.abs(t - origin[uu]))[..., None]
        x = x + 0.1 * np.einsum("nldk,k->nld", drift_z[uu], rest[2])
    score = rest[5][slate] + (x * rest[4][slate]).sum(axis=-1)
    p = 1 / (1 + np.exp(-score)) if logistic else np.clip(score, 0, 1)
    p = p * rest[6][slate]
    coins = hash_uniforms(key, uu, slate, t)
    assert np.array_equal(accepted, offered & (coins < 1 - (1 - p) ** 3.0))
