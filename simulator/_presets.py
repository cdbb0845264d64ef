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


#: Items pushed by the two viadeo_like campaigns. Items 0-9 are the universal (most popular)
#: items; the campaigns push half of them (5-9) plus two ordinary items, so that at tick 300
#: the most pushed items and the most popular never-pushed items (0-4) start with similar
#: shares, as the skills Viadeo promoted were already popular ones.
VIADEO_CAMPAIGN_ITEMS = ((5, 6, 7, 8, 9), (7, 8, 9, 40, 41))


def _viadeo_like() -> WorldConfig:
    """A professional social network in the spirit of Viadeo's skill profiles.

    Launch at tick 0 (activity decays with a 100-tick half-life), about 20,000 users,
    180 items, power-law profile sizes (mean about 5-6 at tick 300), two campaigns at ticks
    330 and 430 pushing fixed item lists; the evaluation window is ticks 300-500 (hence
    ``n_ticks = 501``). Calibrated so that the campaigns move the item marginal strongly, as
    in de Myttenaere et al. (2014).
    """
    a, b = VIADEO_CAMPAIGN_ITEMS
    return WorldConfig(
        n_users=20_000, n_items=180, n_ticks=501, dim=8,
        mean_profile_size=6.0, activity_shape=2.0, activity_halflife=100.0,
        n_universal=10, universal_appeal=0.0, appeal_mean=-2.5, appeal_std=0.75,
        taste_scale=1.5, exposure=1.0,
        campaigns=(
            CampaignConfig(start=330, duration=20, reach=0.7, items=a, k=3, boost=6.0),
            CampaignConfig(start=430, duration=20, reach=0.7, items=b, k=3, boost=6.0),
        ),
    )


register_preset("viadeo_like", _viadeo_like)
