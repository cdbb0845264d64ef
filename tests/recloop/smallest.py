"""Every built-in scenario at its smallest size: every categorical value it sweeps (data
sets, loggers, click models, families: the names it emits), numeric sweeps cut to their
smallest value, a few logs, bootstrap replicates and truth runs, small worlds."""

from __future__ import annotations

import copy
import tomllib

from recloop._scenario import builtin_scenarios

#: Parameters set to a small value wherever an evaluation has them.
SMALL = {"n_logs": 2, "n_bootstrap": 2, "n_truth_runs": 2, "n_samples": 200, "n_sim": 1000,
         "n_train": 200, "ab_users": 0}
#: Parameters capped at a value.
CAP = {"n_rounds": 300, "T": 200, "n_users": 60, "n_items": 40, "n_ratings": 600,
       "window": 100}


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def smallest(name: str) -> dict:
    """The built-in scenario ``name`` as a dict, at its smallest size."""
    data = tomllib.loads(builtin_scenarios()[name].read_text())
    data = copy.deepcopy(data)
    data["run"]["replicates"] = 1
    data["run"].pop("seeds", None)
    world = data.get("world", {})
    if world.get("preset") == "viadeo_like":  # the quickstart's size: its campaigns hold
        world["n_users"] = min(world.get("n_users", 3000), 3000)
    for ev in data.get("evaluations", []):
        for k, v in SMALL.items():
            if k in ev and _numeric(ev[k]):
                ev[k] = min(ev[k], v)
        for k, v in CAP.items():
            if k in ev and _numeric(ev[k]):
                ev[k] = min(ev[k], v)
        sweep = ev.get("sweep") or {}
        for k, vs in list(sweep.items()):
            if all(_numeric(x) for x in vs):
                sweep[k] = [min(vs)] if k not in CAP else [min(min(vs), CAP[k])]
            if k in SMALL:
                sweep[k] = [min(min(vs), SMALL[k])]
    return data
