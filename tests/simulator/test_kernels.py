"""The world's numba kernels against their Python versions (same function, interpreted)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import _kernels


def _span_inputs(seed, n_users, n_items, n_ticks, dim, n_terms, events, logistic):
    rng = np.random.default_rng(seed)
    lam = 1.0 + rng.pareto(2.0, n_users)
    cdf = np.append(np.cumsum(lam) / lam.sum(), 2.0)
    g = 3 * n_users
    guide = np.searchsorted(cdf[:-1], np.arange(g + 1) / g, side="right")
    counts = rng.integers(0, events + 1, n_ticks)
    starts = np.zeros(n_ticks + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    keys = np.concatenate([np.sort(rng.random(c)) for c in counts])
    n = keys.size
    items = rng.integers(0, n_items, n)
    # repeated (user, item) pairs within and across ticks: the state must carry over
    coins = rng.random(n) * 0.5
    has = rng.random((n_users, n_items)) < 0.2
    taste0 = rng.normal(0, 1, (n_users, dim))
    drift_z = rng.normal(0, 1, (n_users, dim, n_terms)) if n_terms else np.zeros((0, 0, 0))
    basis = rng.normal(0, 1, (n_ticks, n_terms))
    features = rng.normal(0, 1, (n_items, dim))
    appeal = rng.normal(0, 1, (n_ticks, n_items))
    decay = rng.random((n_ticks, n_items))
    return (keys, items, coins, starts, cdf, guide, has, taste0, drift_z, basis, 0.1,
            features, appeal, decay, logistic)


span_cases = st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 60), st.integers(1, 8),
                       st.integers(1, 6), st.integers(1, 4), st.sampled_from([0, 3]),
                       st.integers(0, 80), st.booleans())


@settings(max_examples=30, deadline=None)
@given(span_cases, st.integers(1, 70), st.sampled_from([1, 2]))
def test_span_kernel_matches_python_and_ignores_blocks_and_threads(case, block, threads):
    args = _span_inputs(*case)
    # the reference: the Python function, interpreted, one block holding every user
    has_ref = args[6].copy()
    n = args[0].size
    flag_ref, u_ref = np.zeros(n, np.uint8), np.full(n, -1, np.int64)
    _kernels.organic_span_py(*args[:6], has_ref, *args[7:], args[6].shape[0], 0,
                             args[6].shape[0], flag_ref, u_ref)
    has = args[6].copy()
    flag, out_u = _kernels.organic_span(*args[:6], has, *args[7:], block=block,
                                        threads=threads, min_split=1)
    assert np.array_equal(flag, flag_ref)
    hit = flag.astype(bool)
    assert np.array_equal(out_u[hit], u_ref[hit])
    assert np.array_equal(has, has_ref)
    # every adoption is a new (user, item) pair, now held
    assert not np.any(args[6][out_u[hit], args[1][hit]])
    assert np.all(has[out_u[hit], args[1][hit]])


def test_span_kernel_adopts_only_when_the_coin_is_below_p():
    # p = decay (score -> +inf with the linear model clipped to 1): coins below decay adopt
    args = list(_span_inputs(3, 10, 4, 2, 2, 0, 50, False))
    args[12] = np.full_like(args[12], 50.0)  # appeal: clip(score) = 1
    args[6] = np.zeros_like(args[6])
    flag, out_u = _kernels.organic_span(*args, threads=1)
    items, coins, starts, decay = args[1], args[2], args[3], args[13]
    tick = np.repeat(np.arange(starts.size - 1), np.diff(starts))
    below = coins < decay[tick, items]
    assert np.all(~flag.astype(bool) | below)  # never adopts above p
    assert flag.sum() > 0
