"""Named world configurations.

:data:`PRESETS` maps a name to a factory (no arguments) returning a frozen config dataclass;
other modules add theirs with :func:`register_preset`. :func:`preset` applies overrides with
``dataclasses.replace``, so the config's own validation runs on the result.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from simulator._config import CampaignConfig, WorldConfig

__all__ = ["preset", "register_preset", "PRESETS"]

#: name -> factory returning a config dataclass (WorldConfig or another environment config).
PRESETS: dict[str, Callable[[], Any]] = {}


def register_preset(name: str, factory: Callable[[], Any], *, replace: bool = False) -> None:
    """Register ``factory`` (no-argument callable returning a config dataclass) as ``name``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"`name` must be a non-empty str; got {name!r}.")
    if not callable(factory):
        raise TypeError(f"`factory` must be callable; got {type(factory).__name__}.")
    if name in PRESETS and not replace:
        raise ValueError(f"preset {name!r} is already registered; pass replace=True to replace it.")
    PRESETS[name] = factory


def preset(name: str, **overrides) -> Any:
    """The configuration called ``name``, with some fields overridden.

    Parameters
    ----------
    name : str
        A registered preset (see ``PRESETS``), e.g. ``"viadeo_like"``.
    **overrides
        Field values replacing the preset's (validated like any config).

    Raises
    ------
    ValueError
        Unknown preset (the message lists the known ones) or unknown field, or an override
        out of range.

    Examples
    --------
    >>> preset("viadeo_like", n_users=3000).n_users
    3000
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}.")
    base = PRESETS[name]()
    known = {f.name for f in dataclasses.fields(base)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(map(repr, unknown))} for preset {name!r} "
                         f"({type(base).__name__}); known fields: {', '.join(sorted(known))}.")
    return dataclasses.replace(base, **overrides) if overrides else base


#: Items pushed by the two viadeo_like campaigns, disjoint. The first, large campaign pushes
#: the 5 universal (already popular) items 0-4, as Viadeo promoted popular skills; the second,
#: smaller one pushes 5 ordinary items. The most popular never-pushed items are then ordinary
#: items, which the campaigns only dilute.
VIADEO_CAMPAIGN_ITEMS = ((0, 1, 2, 3, 4), (40, 41, 42, 43, 44))


def _viadeo_like() -> WorldConfig:
    """A professional social network in the spirit of Viadeo's skill profiles.

    Launch at tick 0 (activity decays with a 100-tick half-life), about 20,000 users,
    180 items of which 5 are universal, power-law profile sizes (mean about 5.5 at tick 300),
    two campaigns pushing fixed item lists (:data:`VIADEO_CAMPAIGN_ITEMS`); the evaluation
    window is ticks 300-500 (hence ``n_ticks = 501``). Campaign edges are about 28% of the
    profile edges at tick 500 (mean profile about 8.3 then).

    * Tick 330, 20 ticks: the 5 universal items to 70% of the users (all 5 offered).
    * Tick 430, 20 ticks: 5 ordinary items to 20% of the users (all 5 offered).

    Calibrated so that the findings of de Myttenaere et al. (2014) reproduce over the window
    (``recloop.experiments.campaign_bias``; g1 = the 5 most pushed items, which are the
    universal ones, g2 = the 5 most frequent never-pushed items at tick 300): without weights
    g1 rises by about 40% and g2 falls by about 30%; with all items reweighted both stay at
    their tick-300 value and at the counterfactual twin's; and g2 needs a larger ``p`` than g1
    to stabilise. The first campaign moves the marginals of g1's items more than any other
    item's (more than the dilution of the popular never-pushed items, since those are less
    popular than the pushed universal items, and more than the second campaign's items), so
    the ``p = 5`` items of largest gap are g1's at every tick and already fix g1. g2's items
    lose share only by dilution, spread over the profiles that received any pushed item: with
    ``p = 5`` the second campaign's items stay unweighted, and the fit, which can only move
    g1's weights, even pushes g2 further down while trading off their excess; g2 is fixed once
    all 10 pushed items (or more) are reweighted.
    """
    a, b = VIADEO_CAMPAIGN_ITEMS
    return WorldConfig(
        n_users=20_000, n_items=180, n_ticks=501, dim=8,
        mean_profile_size=6.0, activity_shape=2.0, activity_halflife=100.0,
        n_universal=5, universal_appeal=0.0, appeal_mean=-2.5, appeal_std=0.75,
        taste_scale=1.5, exposure=1.0,
        campaigns=(
            CampaignConfig(start=330, duration=20, reach=0.7, items=a, k=5, boost=6.0),
            CampaignConfig(start=430, duration=20, reach=0.2, items=b, k=5, boost=6.0),
        ),
    )


register_preset("viadeo_like", _viadeo_like)
