"""WorldConfig / CampaignConfig validation and presets."""

import dataclasses
import re

import pytest

from simulator import AppealShock, CampaignConfig, WorldConfig, preset
from simulator._presets import PRESETS, register_preset


class _Rec:
    def fit(self, profiles):
        return self

    def recommend(self, users, k, *, removed=None):
        raise NotImplementedError


SMALL = dict(n_users=10, n_items=20, n_ticks=50)


def _camp(**kw):
    base = dict(start=5, duration=3, reach=0.5, items=(1, 2, 3))
    base.update(kw)
    return base


# (kwargs for WorldConfig, exception, field named in the message, value in the message)
INVALID_WORLD = [
    pytest.param(dict(n_users=0), ValueError, "n_users", "0", id="n_users-zero"),
    pytest.param(dict(n_users=-5), ValueError, "n_users", "-5", id="n_users-negative"),
    pytest.param(dict(n_items=0), ValueError, "n_items", "0", id="n_items-zero"),
    pytest.param(dict(n_ticks=0), ValueError, "n_ticks", "0", id="n_ticks-zero"),
    pytest.param(dict(dim=0), ValueError, "dim", "0", id="dim-zero"),
    pytest.param(dict(n_users=2.5), TypeError, "n_users", "2.5", id="n_users-float"),
    pytest.param(dict(n_users=True), TypeError, "n_users", "True", id="n_users-bool"),
    pytest.param(dict(mean_profile_size=-1.0), ValueError, "mean_profile_size", "-1.0",
                 id="mean-negative"),
    pytest.param(dict(mean_profile_size=float("nan")), ValueError, "mean_profile_size", "nan",
                 id="mean-nan"),
    pytest.param(dict(taste_scale=float("inf")), ValueError, "taste_scale", "inf",
                 id="taste-scale-inf"),
    pytest.param(dict(appeal_mean=float("-inf")), ValueError, "appeal_mean", "-inf",
                 id="appeal-mean-minus-inf"),
    pytest.param(dict(activity_shape=1.0), ValueError, "activity_shape", "1.0",
                 id="shape-not-above-1"),
    pytest.param(dict(activity_halflife=0.0), ValueError, "activity_halflife", "0.0",
                 id="halflife-zero"),
    pytest.param(dict(ctr_halflife=-3.0), ValueError, "ctr_halflife", "-3.0",
                 id="ctr-halflife-negative"),
    pytest.param(dict(n_universal=21), ValueError, "n_universal", "21", id="universal-too-many"),
    pytest.param(dict(appeal_std=-0.1), ValueError, "appeal_std", "-0.1", id="appeal-std-neg"),
    pytest.param(dict(taste_scale=-1.0), ValueError, "taste_scale", "-1.0", id="taste-neg"),
    pytest.param(dict(drift_rate=-0.01), ValueError, "drift_rate", "-0.01", id="drift-neg"),
    pytest.param(dict(drift_terms=0), ValueError, "drift_terms", "0", id="drift-terms-zero"),
    pytest.param(dict(click_model="probit"), ValueError, "click_model", "probit",
                 id="click-model-unknown"),
    pytest.param(dict(item_birth=(0,) * 19), ValueError, "item_birth", "19",
                 id="birth-wrong-length"),
    pytest.param(dict(item_birth=(0,) * 19 + (50,)), ValueError, "item_birth[19]", "50",
                 id="birth-after-horizon"),
    pytest.param(dict(item_birth=(3,) * 20, item_death=(3,) * 20), ValueError,
                 "item_death[0]", "3", id="death-not-after-birth"),
    pytest.param(dict(shocks=(AppealShock(item=20, start=0, duration=1, delta=1.0),)),
                 ValueError, "shocks[0].item", "20", id="shock-item-out-of-range"),
    pytest.param(dict(shocks=(AppealShock(item=1, start=50, duration=1, delta=1.0),)),
                 ValueError, "shocks[0].start", "50", id="shock-after-horizon"),
    pytest.param(dict(campaigns=(CampaignConfig(**_camp(start=48, duration=5)),)),
                 ValueError, "campaigns[0]", "53", id="campaign-outside-horizon"),
    pytest.param(dict(campaigns=(CampaignConfig(**_camp(items=(1, 25))),)), ValueError,
                 "campaigns[0].items", "25", id="campaign-item-out-of-range"),
    pytest.param(dict(campaigns=(CampaignConfig(start=1, policy=_Rec(), k=21),)), ValueError,
                 "campaigns[0].k", "21", id="policy-k-above-items"),
    pytest.param(dict(campaigns=(CampaignConfig(start=1, items=(0, 1, 2), k=3),),
                      item_birth=(0, 10) + (0,) * 18), ValueError, "campaigns[0].k", "3",
                 id="k-above-alive-items"),
    pytest.param(dict(campaigns=CampaignConfig(**_camp())), TypeError, "campaigns",
                 "CampaignConfig", id="campaigns-not-tuple"),
    pytest.param(dict(user_weights=(1.0,) * 9), ValueError, "user_weights", "9",
                 id="user-weights-length"),
    pytest.param(dict(user_weights=(1.0,) * 9 + (-1.0,)), ValueError, "user_weights[9]",
                 "-1.0", id="user-weights-negative"),
    pytest.param(dict(user_weights=(0.0,) * 10), ValueError, "user_weights", "0",
                 id="user-weights-zero-sum"),
]


@pytest.mark.parametrize("kwargs, exc, field, value", INVALID_WORLD)
def test_invalid_world_config_rejected(kwargs, exc, field, value):
    with pytest.raises(exc) as info:
        WorldConfig(**{**SMALL, **kwargs})
    msg = str(info.value)
    assert f"`{field}" in msg or field in msg
    assert value in msg


INVALID_CAMPAIGN = [
    pytest.param(dict(start=-1), ValueError, "start", "-1", id="start-negative"),
    pytest.param(dict(duration=0), ValueError, "duration", "0", id="duration-zero"),
    pytest.param(dict(reach=1.5), ValueError, "reach", "1.5", id="reach-above-1"),
    pytest.param(dict(reach=-0.1), ValueError, "reach", "-0.1", id="reach-negative"),
    pytest.param(dict(boost=0.5), ValueError, "boost", "0.5", id="boost-below-1"),
    pytest.param(dict(items=(1, 1)), ValueError, "items", "(1, 1)", id="items-repeated"),
    pytest.param(dict(items=()), ValueError, "items", "()", id="items-empty"),
    pytest.param(dict(items=(1, -2)), ValueError, "items[1]", "-2", id="item-negative"),
    pytest.param(dict(k=4), ValueError, "k", "4", id="k-above-list"),
    pytest.param(dict(k=0), ValueError, "k", "0", id="k-zero"),
    pytest.param(dict(items=None), ValueError, "items", "None", id="neither-items-nor-policy"),
    pytest.param(dict(policy=_Rec()), ValueError, "policy", "items", id="both-items-and-policy"),
    pytest.param(dict(items=None, policy=object(), k=1), TypeError, "policy", "fit",
                 id="policy-without-protocol"),
    pytest.param(dict(items=None, policy=_Rec()), ValueError, "k", "None", id="policy-without-k"),
]


@pytest.mark.parametrize("kwargs, exc, field, value", INVALID_CAMPAIGN)
def test_invalid_campaign_rejected(kwargs, exc, field, value):
    with pytest.raises(exc) as info:
        CampaignConfig(**_camp(**kwargs))
    assert field in str(info.value) and value in str(info.value)


def test_messages_state_the_allowed_range():
    with pytest.raises(ValueError,
                       match=re.escape("`reach` must be a finite number in [0.0, 1.0]; got 2.0")):
        CampaignConfig(**_camp(reach=2.0))
    with pytest.raises(ValueError, match=re.escape("`n_users` must be an int >= 1; got 0")) \
            as info:
        WorldConfig(n_users=0)
    # the same facts as data (what the scenario loader reads: no parsing of the message)
    assert (info.value.name, info.value.rule, info.value.got) == ("n_users", "an int >= 1", "0")


def test_fields_declare_their_documentation_and_range():
    from recloop_base.fields import field_specs

    specs = {s.name: s for s in field_specs(WorldConfig)}
    assert specs["activity_shape"].low == 1.0 and specs["activity_shape"].low_open
    assert specs["click_model"].choices == ("logistic", "linear")
    assert not specs["campaigns"].settable and "Karhunen" in specs["drift_terms"].doc
    # the class docstring's Parameters section is written from the same declarations
    assert "activity_shape : float, default 2.0" in WorldConfig.__doc__
    assert "Karhunen-Loeve" in WorldConfig.__doc__

def test_valid_config_is_frozen_and_normalised():
    cfg = WorldConfig(**SMALL, campaigns=[CampaignConfig(start=0, items=[3, 4])])
    assert isinstance(cfg.campaigns, tuple) and cfg.campaigns[0].items == (3, 4)
    assert cfg.campaigns[0].k == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.n_users = 3


def test_preset_viadeo_like_and_overrides():
    cfg = preset("viadeo_like")
    assert cfg.n_users == 20_000 and cfg.n_items == 180
    assert [c.start for c in cfg.campaigns] == [330, 430]
    assert cfg.n_ticks > 500
    small = preset("viadeo_like", n_users=3000)
    assert small.n_users == 3000 and small.campaigns == cfg.campaigns


def test_preset_unknown_name_lists_known_ones():
    with pytest.raises(ValueError, match="unknown preset 'nope'.*viadeo_like"):
        preset("nope")


def test_preset_unknown_override_named():
    with pytest.raises(ValueError, match="n_user"):
        preset("viadeo_like", n_user=10)


def test_preset_override_is_validated():
    with pytest.raises(ValueError, match="n_users"):
        preset("viadeo_like", n_users=0)


def test_register_preset_refuses_silent_replacement():
    name = "test_only_preset"
    register_preset(name, lambda: WorldConfig(**SMALL))
    try:
        assert preset(name, n_items=30).n_items == 30
        with pytest.raises(ValueError, match="already registered"):
            register_preset(name, lambda: WorldConfig(**SMALL))
    finally:
        PRESETS.pop(name)
