"""The ordered-logit rating model: levels, probabilities and draws, the gradient of its
likelihood, and the fit recovering a known model."""

import numpy as np
import pytest
from scipy.special import expit

from simulator import RatingModel
from simulator import _ratings as R


def test_levels_of_a_discrete_and_a_continuous_scale():
    levels, bounds = R.rating_levels([1, 2, 2, 5, 4, 4])
    assert levels.tolist() == [1, 2, 4, 5] and bounds.tolist() == [1.5, 3.0, 4.5]
    # more than 20 values: 20 bins of width 1 over [-10, 10]; a level is its bin's mean
    r = np.array([-10.0, -9.5, -9.25, 0.2, 0.4, 9.9, 10.0] + [3.3 + 0.01 * j for j in range(20)])
    levels, bounds = R.rating_levels(r)
    assert levels[0] == pytest.approx(np.mean([-10.0, -9.5, -9.25]))
    assert levels[-1] == pytest.approx(np.mean([9.9, 10.0]))
    # empty bins join the next non-empty one: cuts at the left edges of bins 10, 13, 19
    assert levels.size == 4 and bounds.tolist() == [0.0, 3.0, 9.0]


def _model(k=4, n_users=3, n_items=2):
    return RatingModel(levels=np.arange(1.0, k + 1), bounds=np.arange(1.5, k),
                       thresholds=np.linspace(-1.5, 1.5, k - 1), slope=0.8,
                       user_offset=np.zeros(n_users), item_offset=np.zeros(n_items))


def test_probabilities_and_draws_follow_the_cumulative_logit():
    m = _model()
    eta = np.array([-2.0, 0.0, 0.7])
    p = m.probabilities(eta)
    cum = expit(m.thresholds[None, :] - eta[:, None])
    assert p[:, 0] == pytest.approx(cum[:, 0])
    assert p[:, 1] == pytest.approx(cum[:, 1] - cum[:, 0])
    assert p[:, -1] == pytest.approx(1 - cum[:, -1])
    assert p.sum(axis=1) == pytest.approx(np.ones(3))
    rng = np.random.default_rng(0)
    draws = m.draw(np.full(100_000, 0.7), rng.random(100_000))
    freq = np.bincount(draws.astype(int) - 1, minlength=4) / 1e5
    assert freq == pytest.approx(p[2], abs=0.006)
    assert m.level_of([1.0, 1.49, 1.5, 4.0]).tolist() == [0, 0, 1, 3]


def test_the_model_is_validated():
    with pytest.raises(ValueError, match="`ratings.thresholds` must be strictly increasing"):
        RatingModel(levels=[1, 2, 3], bounds=[1.5, 2.5], thresholds=[1.0, 0.0], slope=1.0,
                    user_offset=[0.0], item_offset=[0.0])
    with pytest.raises(ValueError, match="`ratings.bounds` must be 2 entries"):
        RatingModel(levels=[1, 2, 3], bounds=[1.5], thresholds=[0.0, 1.0], slope=1.0,
                    user_offset=[0.0], item_offset=[0.0])


def test_the_gradient_equals_central_differences():
    rng = np.random.default_rng(1)
    n, n_users, n_items, k = 60, 5, 4, 4
    users, items = rng.integers(0, n_users, n), rng.integers(0, n_items, n)
    level, score = rng.integers(0, k, n), rng.normal(0, 1, n)
    params = rng.normal(0, 0.5, 1 + n_users + n_items + k - 1)
    args = (level, score, users, items, n_users, n_items, 0.7, k)
    _, grad = R._nll_grad(params, *args)
    for j in range(params.size):
        plus, minus = params.copy(), params.copy()
        plus[j] += 1e-6
        minus[j] -= 1e-6
        num = (R._nll_grad(plus, *args)[0] - R._nll_grad(minus, *args)[0]) / 2e-6
        assert grad[j] == pytest.approx(num, rel=1e-5, abs=1e-6)


@pytest.mark.slow
def test_the_fit_recovers_a_known_model():
    rng = np.random.default_rng(2)
    n_users, n_items, n = 300, 80, 40_000
    truth = RatingModel(levels=[1.0, 2.0, 3.0, 4.0, 5.0], bounds=[1.5, 2.5, 3.5, 4.5],
                        thresholds=[-2.5, -1.0, 0.7, 2.6], slope=1.2,
                        user_offset=rng.normal(0, 0.8, n_users),
                        item_offset=rng.normal(0, 0.6, n_items))
    users, items = rng.integers(0, n_users, n), rng.integers(0, n_items, n)
    score = rng.normal(0, 1, n)
    eta = truth.slope * score + truth.user_offset[users] + truth.item_offset[items]
    ratings = truth.draw(eta, rng.random(n))
    model, info = R.fit_ratings(users, items, ratings, score, n_users, n_items, reg=1.0)
    assert info["converged"]
    assert model.slope == pytest.approx(truth.slope, abs=0.05)
    # thresholds and offsets are identified up to a common shift: compare centred
    shift = np.mean(model.item_offset) - np.mean(truth.item_offset)
    assert model.thresholds - shift == pytest.approx(truth.thresholds, abs=0.15)
    assert np.corrcoef(model.user_offset, truth.user_offset)[0, 1] > 0.9
    # the fitted model reproduces the histogram of the ratings it was fitted to
    p = model.probabilities(model.slope * score + model.user_offset[users]
                            + model.item_offset[items]).mean(axis=0)
    hist = np.bincount(ratings.astype(int) - 1, minlength=5) / n
    assert 0.5 * np.abs(p - hist).sum() < 0.01
