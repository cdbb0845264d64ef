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


#: Overrides that let a built-in scenario run here: its data replaced by a stand-in.
def overrides(name: str) -> list[str]:
    if name == "calibrated_campaign_bias":
        return [f"world.calibrate_from={small_movielens()}",
                "evaluations.0.ticks=[40, 45, 50, 55, 59]"]
    if name == "calibrated_loo_cf":
        return [f"world.calibrate_from={small_movielens()}", "world.n_factors=2"]
    return []


def load_builtin(name: str, path=None):
    """``load_scenario`` of a built-in scenario, with its stand-in data where it needs it."""
    return load_scenario(path or builtin_scenarios()[name], overrides=overrides(name))
