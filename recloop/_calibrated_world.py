"""A scenario's ``[world]`` fitted to a real log (``calibrate_from``) or loaded (``file``).

``[world] calibrate_from = "u.data"`` (with ``format`` and the calibration options) fits a
world to the log with :func:`simulator.calibrate`; ``[world] file = "world.npz"`` loads one
fitted before (``recloop calibrate PATH --out world.npz``). Either world then behaves like a
preset: campaigns, the counterfactual twin, the same ground truth. Campaigns may be placed
relative to the fitted horizon (``start_fraction``) and push the log's most popular items
(``most_popular``), which are only known once the log is read.

Validation reads the log (a file that is not of its format is a validation error, with the
file and line) but does not fit it; the runner fits it once, before the run directory is
created, re-validates the scenario on the fitted world, then saves it as ``world.npz`` in the
run directory -- every cell and a resumed run load that file, and its sha256 goes into
``environment.json``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from recloop._schema import REQUIRED, Bool, FilePath, Float, Int, ListOf, Param, Str

__all__ = ["CALIBRATION_KEYS", "CAMPAIGN_KEYS", "FILE_KEYS", "config_of", "fit",
           "is_calibrated", "validate"]

_FORMATS = ("movielens", "jester", "csv")

#: ``[world]`` keys of a world fitted to a log.
CALIBRATION_KEYS: tuple[Param, ...] = (
    Param("calibrate_from", FilePath(), REQUIRED, "Fit the world to this rating file "
          "(instead of `preset`; relative to the scenario file; `--set "
          "world.calibrate_from=PATH` on the command line)."),
    Param("format", Str(choices=_FORMATS), "movielens", "Format of `calibrate_from`: "
          "`movielens` (100K `u.data` or 1M `ratings.dat`), `jester`, `csv`."),
    Param("columns", ListOf(Str(), min_len=3, max_len=4), None, "`csv` only: header names of "
          "the user, item, rating[, timestamp] columns (default user, item, rating)."),
    Param("rating_scale", ListOf(Float(), min_len=2, max_len=2), None, "`csv` only: "
          "[low, high]; a rating outside is an error naming the line."),
    Param("min_rating", Float(), None, "Count only ratings >= min_rating as interactions."),
    Param("n_factors", Int(low=0, high=200), 8, "Rank of the fitted user and item tastes."),
    Param("ctr", Float(low=0.0, high=1.0, low_open=True, high_open=True), 0.3, "Assumed mean "
          "adoption probability of the observed pairs (not identifiable from a log)."),
    Param("exposure", Float(low=0.0), 1.0, "Assumed: organic meetings favour item i by "
          "exp(exposure x appeal_i)."),
    Param("seconds_per_tick", Float(low=0.0, low_open=True), 86400.0, "Length of a tick of "
          "a log with timestamps (the horizon is the log's span)."),
    Param("ratings", Bool(), True, "Fit the rating model (when the log has ratings): the "
          "world rates its adoptions."),
    Param("seed", Int(low=0, high=2**63 - 1), 0, "Seed of the fit (the start of its sparse "
          "SVD): the same file and seed, the same world (as `recloop calibrate PATH --seed "
          "N`)."),
)

#: ``[world]`` keys of a world loaded from a file.
FILE_KEYS: tuple[Param, ...] = (
    Param("file", FilePath(), REQUIRED, "Load a fitted world (`recloop calibrate PATH --out "
          "world.npz`) instead of `preset`."),
)

#: Keys of ``[[world.campaigns]]`` on a fitted world.
CAMPAIGN_KEYS: tuple[Param, ...] = (
    Param("start", Int(low=0), None, "First tick of the campaign (or `start_fraction`)."),
    Param("start_fraction", Float(low=0.0, high=1.0, high_open=True), None, "First tick as "
          "a fraction of the fitted horizon (0.7: at 70% of the log's span)."),
    Param("duration", Int(low=1), 1, "Number of ticks; each reached user is pushed once in "
          "it."),
    Param("reach", Float(low=0.0, high=1.0), 0.5, "Fraction of users reached."),
    Param("items", ListOf(Int(low=0), unique=True), None, "Pushed items (ids of the fitted "
          "world, or `most_popular`)."),
    Param("most_popular", Int(low=1), None, "Push the log's `most_popular` most popular "
          "items instead of `items`."),
    Param("k", Int(low=1), None, "Slate size (default: all the campaign's items)."),
    Param("boost", Float(low=1.0), 5.0, "Acceptance boost: a pushed item is accepted with "
          "probability 1 - (1 - p)^boost."),
)

_CALIBRATION_OPTIONS = ("min_rating", "n_factors", "ctr", "exposure", "seconds_per_tick",
                        "ratings")


def is_calibrated(world) -> bool:
    """Whether a (raw or resolved) ``[world]`` table is fitted or loaded, not a preset."""
    return isinstance(world, dict) and ("calibrate_from" in world or "file" in world)


def validate(problems, raw: dict, check_table, world_keys) -> dict:
    """Validate a fitted or loaded ``[world]`` table; read the log or the file (not fit).
    ``check_table`` and ``world_keys`` (the keys every ``[world]`` table has besides its
    source: ``campaigns``) are the validator's (:mod:`recloop._validate`)."""
    keys = ("calibrate_from" in raw, "file" in raw, "preset" in raw)
    if sum(keys) > 1:
        problems.add("world", "expected exactly one of `preset`, `calibrate_from`, `file`, got "
                     + ", ".join(f"`{k}`" for k, there
                                 in zip(("calibrate_from", "file", "preset"), keys, strict=True)
                                 if there))
        return {}
    params = (CALIBRATION_KEYS if keys[0] else FILE_KEYS) + tuple(world_keys)
    before = len(problems.items)
    resolved = check_table(problems, "world.", raw, params)
    campaigns = raw.get("campaigns")
    if isinstance(campaigns, list):
        resolved["campaigns"] = []
        for j, c in enumerate(campaigns):
            if not isinstance(c, dict):
                continue
            prefix = f"world.campaigns[{j}]."
            table = check_table(problems, prefix, c, CAMPAIGN_KEYS)
            if ("start" in table) == ("start_fraction" in table):
                problems.add(f"{prefix}start", "expected exactly one of `start` and "
                             "`start_fraction`, got " + ("both" if "start" in table
                                                         else "neither"))
            if ("items" in table) == ("most_popular" in table):
                problems.add(f"{prefix}items", "expected exactly one of `items` and "
                             "`most_popular`, got " + ("both" if "items" in table
                                                       else "neither"))
            resolved["campaigns"].append(table)
    if len(problems.items) > before:
        return resolved
    if keys[0]:
        if resolved.get("format") != "csv":
            for key in ("columns", "rating_scale"):
                if key in resolved:
                    problems.add(f"world.{key}", f"expected no `{key}` for format "
                                 f"{resolved['format']!r} (csv only), got {resolved[key]!r}")
        if len(problems.items) > before:
            return resolved
        try:
            _interactions(resolved["calibrate_from"], resolved["format"],
                          tuple(resolved["columns"]) if resolved.get("columns") else None,
                          tuple(resolved["rating_scale"]) if resolved.get("rating_scale")
                          else None)
        except Exception as exc:  # DatasetFormatError, ValueError: the loader names the line
            problems.add("world.calibrate_from", f"expected a {resolved['format']} rating "
                         f"file, got {type(exc).__name__}: {exc}")
    else:
        try:
            _load_file(*_file_key(resolved["file"]))
        except Exception as exc:
            problems.add("world.file", f"expected a fitted world (.npz written by recloop "
                         f"calibrate), got {type(exc).__name__}: {exc}")
    return resolved


def _file_key(path) -> tuple[str, int, int]:
    st = os.stat(path)
    return str(Path(path).resolve()), st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=4)
def _interactions(path, format, columns, rating_scale):
    """``(RatingData, sha256)`` of the file (read once per process)."""
    from recloop.calibration import read_rating_file

    return read_rating_file(path, format=format,
                            columns=list(columns) if columns is not None else None,
                            rating_scale=tuple(rating_scale) if rating_scale else None)


@functools.lru_cache(maxsize=4)
def _load_file(path: str, mtime: int, size: int):
    import simulator

    return simulator.CalibratedWorld.load(path)


def fit(world: dict):
    """Fit the world of a validated ``calibrate_from`` table (one fit per process and set of
    options): a :class:`simulator.CalibratedWorld`."""
    return _fit(world["calibrate_from"], world["format"],
                tuple(world["columns"]) if world.get("columns") else None,
                tuple(world["rating_scale"]) if world.get("rating_scale") else None,
                tuple((k, world[k]) for k in _CALIBRATION_OPTIONS if k in world),
                world.get("seed", 0), _file_key(world["calibrate_from"]))


@functools.lru_cache(maxsize=2)
def _fit(path, format, columns, rating_scale, options, seed, key):
    from recloop.calibration import fit_world

    data, sha = _interactions(path, format, columns, rating_scale)
    # the same function as `recloop calibrate`: the same file and seed give the same world
    cal, _ = fit_world(data, seed=seed, source=Path(path).name, source_sha256=sha,
                       **dict(options))
    return cal


def calibrated_world(world: dict):
    """The :class:`simulator.CalibratedWorld` of a fitted or loaded table."""
    if "file" in world:
        return _load_file(*_file_key(world["file"]))
    return fit(world)


def config_of(world: dict):
    """The simulator config of a fitted or loaded ``[world]`` table, with its campaigns
    resolved against the fitted world (``start_fraction``, ``most_popular``)."""
    import numpy as np

    import simulator

    cal = calibrated_world(world)
    n_ticks = cal.config.n_ticks
    popular = None
    campaigns = []
    for c in world.get("campaigns", ()):
        if c.get("most_popular") is not None and popular is None:
            counts = np.bincount(cal.observed.item, minlength=cal.n_items)
            popular = np.argsort(-counts, kind="stable")
        start = c["start"] if c.get("start") is not None else int(c["start_fraction"] * n_ticks)
        items = (tuple(int(i) for i in popular[:c["most_popular"]])
                 if c.get("most_popular") is not None else tuple(c["items"]))
        campaigns.append(simulator.CampaignConfig(
            start=start, duration=c.get("duration", 1), reach=c.get("reach", 0.5),
            items=items, k=c.get("k"), boost=c.get("boost", 5.0)))
    return cal.with_campaigns(tuple(campaigns))
