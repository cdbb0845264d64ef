"""Built-in scenarios whose data is not shipped, loaded with a small generated stand-in."""

import functools
import tempfile
from pathlib import Path

import numpy as np

from recloop._scenario import builtin_scenarios, load_scenario


@functools.lru_cache(maxsize=1)
def small_movielens() -> Path:
    """A MovieLens-100K-format ``u.data`` (user, item, rating, timestamp) simulated by a
    small known world: 150 users, 40 items, 60 daily ticks."""
    import simulator

    config = simulator.WorldConfig(n_users=150, n_items=40, n_ticks=60, dim=2,
                                   mean_profile_size=8.0, n_universal=0, appeal_mean=-2.0)
    world = simulator.World(config, seed=0)
    world.simulate(59)
    e = world.edges
    rng = np.random.default_rng(0)
    folder = Path(tempfile.mkdtemp(prefix="recloop-test-data-"))
    path = folder / "u.data"
    path.write_text("".join(f"{u + 1}\t{i + 1}\t{int(rng.integers(1, 6))}\t"
                            f"{880_000_000 + 86400 * t}\n"
                            for u, i, t in zip(e.user, e.item, e.tick, strict=True)))
    return path


def write_small_obd(folder: Path, *, n: int = 300, n_items: int = 6, seed: int = 0) -> Path:
    """An Open-Bandit-Dataset-format folder (``random/`` and ``bts/`` logs of the three
    campaigns, ``item_context.csv``, ``prior_bts.yaml``) of ``n`` rows per log: uniform
    random and Bernoulli TS logging of ``n_items`` items over 3 positions, clicks of known
    rates."""
    import csv
    from datetime import datetime, timedelta, timezone

    g = np.random.default_rng(seed)
    t0 = datetime(2019, 11, 24, tzinfo=timezone.utc)
    rate = np.linspace(0.02, 0.2, n_items)
    alpha, beta = 1.0 + 100 * rate, 1.0 + 100 * (1 - rate)
    (folder).mkdir(parents=True, exist_ok=True)
    (folder / "prior_bts.yaml").write_text("".join(
        f"{c}:\n  alpha:\n" + "".join(f"    - {a}\n" for a in alpha) + "  beta:\n"
        + "".join(f"    - {b}\n" for b in beta) for c in ("all", "men", "women")))
    for policy in ("random", "bts"):
        for campaign in ("all", "men", "women"):
            sub = folder / policy / campaign
            sub.mkdir(parents=True, exist_ok=True)
            with open(sub / "item_context.csv", "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["", "item_id", "item_feature_0", "item_feature_1"])
                for i in range(n_items):
                    w.writerow([i, i, float(i) / n_items, f"h{i % 2}"])
            with open(sub / f"{campaign}.csv", "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["", "timestamp", "item_id", "position", "click",
                            "propensity_score", *(f"user_feature_{f}" for f in range(4))])
                for j in range(n):
                    item = int(g.integers(0, n_items))
                    w.writerow([j, (t0 + timedelta(seconds=j)).isoformat(sep=" "), item,
                                int(g.integers(1, 4)), int(g.random() < rate[item]),
                                1.0 / n_items if policy == "random" else 0.5,
                                *(f"u{f}{int(g.integers(0, 3))}" for f in range(4))])
    return folder


@functools.lru_cache(maxsize=1)
def small_obd() -> Path:
    """:func:`write_small_obd` in a temporary folder."""
    return write_small_obd(Path(tempfile.mkdtemp(prefix="recloop-test-obd-")) / "obd")


def write_small_jester(path: Path, *, n_users: int = 120, seed: int = 0) -> Path:
    """A Jester-format ratings CSV (``userId,jokeId,rating``, ratings in [-10, 10]) of
    ``n_users`` users: each rates the eight jokes of ``evaluators.datasets.JESTER_JOKES``
    (a taste in one latent dimension, the action jokes' ratings following the context
    jokes'), and two other jokes; one user in ten skips a joke of the set."""
    from evaluators.datasets import JESTER_JOKES

    g = np.random.default_rng(seed)
    lines = ["userId,jokeId,rating"]
    for u in range(1, n_users + 1):
        taste = g.normal()
        for j, joke in enumerate((*JESTER_JOKES, 3, 40)):
            if u % 10 == 0 and j == 2:
                continue
            r = float(np.clip(3 * taste * (1 if j % 2 else -1) + 4 * g.normal(), -10, 10))
            lines.append(f"{u},{joke},{r:.3f}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@functools.lru_cache(maxsize=1)
def small_jester() -> Path:
    """:func:`write_small_jester` in a temporary folder."""
    return write_small_jester(Path(tempfile.mkdtemp(prefix="recloop-test-jester-"))
                              / "jester.csv")


#: Overrides that let a built-in scenario run here: its data replaced by a stand-in.
def overrides(name: str) -> list[str]:
    if name == "calibrated_campaign_bias":
        return [f"world.calibrate_from={small_movielens()}",
                "evaluations.0.ticks=[40, 45, 50, 55, 59]"]
    if name == "ope_real":
        return [f"evaluations.0.data={small_obd()}", f"evaluations.2.data={small_obd()}",
                f"evaluations.4.data={small_jester()}"]
    if name == "calibrated_loo_cf":
        return [f"world.calibrate_from={small_movielens()}", "world.n_factors=2"]
    return []


def load_builtin(name: str, path=None):
    """``load_scenario`` of a built-in scenario, with its stand-in data where it needs it."""
    return load_scenario(path or builtin_scenarios()[name], overrides=overrides(name))
