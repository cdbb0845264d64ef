"""The campaign plan (issue 33): who is pushed, and when, against the documented law.

``CampaignConfig``: "each reached user is pushed once, at a tick drawn uniformly in
``[start, start + duration)``"; a fraction ``reach`` of the users is reached. The world draws
both from keyed uniforms; the tests here read only what the world did (the offers per tick,
``World.push_counts``) and compare it with that law by goodness-of-fit tests, never with the
world's own hashing. A push tick drawn from the reach stream instead of its own landed every
push in ticks 10-18 of a window 10-39 (reach 0.3 keeps the reach uniforms below 0.3).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from simulator import CampaignConfig, World, WorldConfig

N_USERS = 3000


def offers_per_tick(seed, *, start=10, duration=30, reach=0.3, n_ticks=60):
    """Offers of the campaign's one item at each tick. The item is born at the campaign's
    start and profiles are small, so nearly every reached user is offered it (an offer needs
    a user who does not hold it yet)."""
    cfg = WorldConfig(n_users=N_USERS, n_items=20, n_ticks=n_ticks, mean_profile_size=0.3,
                      item_birth=(start,) + (0,) * 19, item_death=(n_ticks,) * 20,
                      campaigns=(CampaignConfig(start=start, duration=duration, reach=reach,
                                                items=(0,)),))
    world = World(cfg, seed, method="numpy").simulate(n_ticks - 1)
    return np.array([world.push_counts(t, t)[0] for t in range(n_ticks)]), world


@pytest.mark.parametrize("reach", [0.3, 0.8])
def test_push_ticks_are_uniform_over_the_window(reach):
    """Pooled over three seeds, the offers per tick of the window [10, 40) fit the uniform law
    (chi-square, p > 1e-4: about 30 offers a tick per seed at reach 0.3), and no offer falls
    outside the window."""
    per = sum(offers_per_tick(seed, reach=reach)[0] for seed in range(3))
    assert per[:10].sum() == 0 and per[40:].sum() == 0
    window = per[10:40]
    assert stats.chisquare(window).pvalue > 1e-4, window.tolist()
    # and not only overall: both halves of the window get half of the pushes
    assert stats.binomtest(int(window[:15].sum()), int(window.sum()), 0.5).pvalue > 1e-4


def test_a_fraction_reach_of_the_users_is_pushed():
    """About reach * n_users offers (binomial bounds at 1e-4), allowing the users who adopted
    the item organically before their push: at most those who hold it at the end in the
    twin without campaigns (same events and coins up to the push)."""
    for reach in (0.3, 0.8):
        per, world = offers_per_tick(4, reach=reach)
        holders = int((world.without_campaigns().profiles(59)[:, [0]] != 0).sum())
        assert holders < 0.05 * N_USERS
        low = stats.binom.ppf(1e-4, N_USERS, reach) - holders
        high = stats.binom.isf(1e-4, N_USERS, reach)
        assert low <= per.sum() <= high, (reach, per.sum(), holders)


def test_a_one_tick_window_pushes_everybody_at_its_start():
    per, _ = offers_per_tick(0, start=25, duration=1, reach=0.5)
    assert per.sum() == per[25] > 0


def test_the_plan_follows_the_seed():
    """Same seed, the same offers tick for tick; two seeds, different plans."""
    a, _ = offers_per_tick(11)
    b, _ = offers_per_tick(11)
    c, _ = offers_per_tick(12)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
