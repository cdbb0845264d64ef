"""The ``[world]`` of a scenario: a simulator preset with overrides, or a world fitted to a
log or loaded from a file (:mod:`recloop._calibrated_world`).

:func:`world_config` builds the simulator config of a resolved ``[world]`` table (the
evaluation kinds, the memory estimates and the loader all use it); :func:`world_params` and
:func:`campaign_params` are the keys a ``[world]`` and its ``[[world.campaigns]]`` accept,
read from the simulator's config declarations (``recloop_base.fields``) with the harness's
own size limits.
"""

from __future__ import annotations

from recloop import _calibrated_world as _calibrated
from recloop._schema import REQUIRED, Bool, Float, Int, ListOf, OneOf, Param, Str

__all__ = ["MAX_TICKS", "campaign_params", "config_fields", "presets", "world_config",
           "world_params"]

#: The most ticks a world may simulate (``world.n_ticks`` and ``run.horizon`` alike).
MAX_TICKS = 10**6


def presets() -> dict:
    """The simulator's world presets (name -> config factory)."""
    import simulator

    return dict(simulator.PRESETS)


#: Upper bounds the harness puts on world sizes (the simulator has none): a scenario must not
#: be able to ask validation itself for terabytes.
_SIZE_LIMITS = {"n_users": 10**8, "n_items": 10**6, "n_ticks": MAX_TICKS, "dim": 10**4,
                "n_arms": 10**6, "n_universal": 10**6, "n_nonzero": 10**4, "drift_terms": 10**4,
                "n_alive": 10**6, "lifetime": 10**9}


def _field_type(fs, name: str = ""):
    """The scenario type of a config field from its declaration
    (``recloop_base.fields.FieldSpec``: Python type, range, choices); None: not settable."""
    import typing

    if not fs.settable:
        return None
    base = fs.base
    cap = _SIZE_LIMITS.get(name)
    if base is int:
        high = fs.high if fs.high is not None else (cap if cap is not None else 2**63 - 1)
        return Int(low=fs.low, high=min(high, cap) if cap is not None else high)
    if base is float:
        return Float(low=fs.low, high=fs.high, low_open=fs.low_open,
                         high_open=fs.high_open)
    if base is bool:
        return Bool()
    if base is str:
        return Str(choices=fs.choices)
    if typing.get_origin(base) is tuple and len(typing.get_args(base)) == 2 \
            and Ellipsis not in typing.get_args(base):
        item = Int() if typing.get_args(base)[0] is int else Float()
        return ListOf(item, min_len=2, max_len=2)
    if base is tuple or typing.get_origin(base) is tuple:
        return ListOf(OneOf((Int(), Float())), min_len=0, max_len=10**6)
    return None


def config_fields(config) -> list[Param]:
    """The settable fields of a config, as scenario parameters (the config's own values as
    defaults, its declared docs)."""
    from recloop_base.fields import field_specs

    out = []
    for fs in field_specs(type(config)):
        t = _field_type(fs, fs.name)
        if t is not None:
            out.append(Param(fs.name, t, getattr(config, fs.name), fs.doc))
    return out


def world_params() -> tuple[Param, ...]:
    """The override keys of ``[world]``: fields of the presets' config types (union)."""
    seen: dict[str, Param] = {}
    users: dict[str, list[str]] = {}
    for name, factory in presets().items():
        for p in config_fields(factory()):
            seen.setdefault(p.name, p)
            users.setdefault(p.name, []).append(name)
    return tuple(Param(p.name, p.type, None, f"{p.doc} (presets {', '.join(users[p.name])})")
                 for p in seen.values())


def campaign_params() -> tuple[Param, ...]:
    """The keys of ``[[world.campaigns]]``: the settable fields of
    ``simulator.CampaignConfig``. In a scenario ``items`` is required (a campaign policy
    object cannot be named in a file)."""
    import dataclasses

    import simulator
    from recloop_base.fields import field_specs

    out = []
    for fs in field_specs(simulator.CampaignConfig):
        t = _field_type(fs, fs.name)
        if t is None:
            continue
        if fs.name == "items":
            t = ListOf(Int(low=0), unique=True)
        default = REQUIRED if fs.default is dataclasses.MISSING or fs.name == "items" \
            else fs.default
        out.append(Param(fs.name, t, default, fs.doc))
    return tuple(out)


def world_config(world: dict):
    """The simulator config of a resolved ``[world]`` table (a preset with overrides, or a
    world fitted to a log or loaded from a file: :mod:`recloop._calibrated_world`)."""
    import simulator

    if _calibrated.is_calibrated(world):
        return _calibrated.config_of(world)

    overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in world.items()
                 if k not in ("preset", "campaigns")}
    if "campaigns" in world:
        overrides["campaigns"] = tuple(
            simulator.CampaignConfig(**{k: tuple(v) if isinstance(v, list) else v
                                        for k, v in c.items()}) for c in world["campaigns"])
    return simulator.preset(world["preset"], **overrides)
