"""What a scenario may ask of the machine: memory estimates per cell, and the cross-key rules
of the built-in evaluation kinds that only their run would otherwise find.

An :class:`recloop._registry.EvaluationKind` may declare ``resources(params, world)``: the
peak memory of one cell's largest arrays, in bytes, from the sizes that drive it (``params``
are the evaluation's values for one sweep combination, ``world`` the resolved ``[world]``
table or ``None``). It returns an ``int``, or a mapping ``label -> bytes`` whose labels name
the keys behind each part (``"world.n_items x world.dim: item features"``); the estimate is
then the sum. :func:`evaluation_bytes` takes the largest cell of an evaluation;
:func:`available_memory` is what the machine can give. The estimates count the largest
arrays the code allocates (float64 = 8 bytes); each process running cells adds about
:data:`PROCESS_BYTES` (the interpreter, numpy, scipy, compiled kernels), counted separately.
They are coarse -- the fit-once tables of ``fast_loo_cf`` at 3,000 users: 568 MiB estimated,
673 MiB peak RSS of the whole process; ``campaign_bias`` at 20,000 users: 54 MiB estimated,
310 MiB peak RSS, most of it the process itself -- but enough to refuse a cell that asks
for 74.5 GiB before anything is written.

:data:`BUILTIN_RESOURCES` and :data:`BUILTIN_CHECKS` hold the estimates and the extra rules
of the built-in kinds whose declarations (in ``recloop.experiments``) do not state them yet;
the loader and the runner use a kind's own ``resources`` / ``check`` first, then these.
"""

from __future__ import annotations

import math
import os
from typing import Callable, Iterator, Mapping

__all__ = ["BUILTIN_CHECKS", "BUILTIN_RESOURCES", "PROCESS_BYTES", "available_memory",
           "evaluation_bytes", "format_bytes", "resources_of", "world_bytes"]

_F8 = 8  # bytes of a float64 / int64

#: Memory of a process running cells before its cell's arrays: the interpreter, numpy,
#: scipy, matplotlib and the compiled kernels (measured: 140 MiB after the imports, about
#: 250 MiB once the kernels are compiled).
PROCESS_BYTES = 256 * 2**20


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"`` (binary units, three significant digits)."""
    if not math.isfinite(n):
        return str(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if abs(n) < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} EiB"  # pragma: no cover


def available_memory() -> int | None:
    """Bytes this process can still allocate: ``MemAvailable`` of ``/proc/meminfo`` (else
    ``SC_AVPHYS_PAGES * SC_PAGE_SIZE``), capped by the cgroup's limit (v2 ``memory.max`` -
    ``memory.current``) when the process runs in a container; ``None`` if unknown."""
    found = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            found = None
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as f:
            current = int(f.read().strip())
        if limit != "max":
            room = max(0, int(limit) - current)
            found = room if found is None else min(found, room)
    except (OSError, ValueError):
        pass
    return found


# --- worlds ------------------------------------------------------------------------------------

def world_bytes(world: Mapping | None) -> dict[str, int]:
    """Largest arrays of one simulated world of the resolved ``[world]`` table, by label.

    ``WorldConfig`` worlds (viadeo_like): item features ``n_items x dim``, user tastes
    ``n_users x dim``, the adoption matrix ``n_users x n_items`` (bool), the rate
    calibration's ``n_ticks x n_items`` tables (five float64 at once), the taste drift
    ``n_users x dim x drift_terms`` (when ``drift_rate > 0``) and the profile edges (about
    ``n_users x mean_profile_size`` plus the campaigns' pushes, 25 bytes each and a CSR of
    them). Linear bandit worlds: the arms' weights (``n_arms x dim``), small.
    """
    if not world:
        return {}
    from recloop._scenario import world_config

    try:
        c = world_config(dict(world))
    except Exception:  # an invalid world is the loader's business, not an estimate's
        return {}
    out: dict[str, int] = {}
    if hasattr(c, "n_users") and hasattr(c, "n_items"):
        out["world.n_items x world.dim: item features"] = c.n_items * c.dim * _F8
        out["world.n_users x world.dim: user tastes"] = c.n_users * c.dim * _F8
        out["world.n_users x world.n_items: adoption matrix"] = c.n_users * c.n_items
        out["world.n_ticks x world.n_items: rate calibration"] = 5 * c.n_ticks * c.n_items * _F8
        out["min(world.n_users, 1000) x world.n_items: calibration sample"] = (
            5 * min(c.n_users, 1000) * c.n_items * _F8)
        if getattr(c, "drift_rate", 0) > 0:
            out["world.n_users x world.dim x world.drift_terms: taste drift"] = (
                c.n_users * c.dim * c.drift_terms * _F8)
        pushes = sum(min(camp.reach, 1.0) * c.n_users * (camp.k or 0)
                     for camp in getattr(c, "campaigns", ()))
        edges = c.n_users * c.mean_profile_size + pushes
        out["world.n_users x world.mean_profile_size: profile edges"] = int(edges * (25 + 12))
    elif hasattr(c, "n_arms") and hasattr(c, "dim"):
        out["world.n_arms x world.dim: arms"] = c.n_arms * c.dim * _F8 * 4
    return out


def _world_config(world):
    from recloop._scenario import world_config

    try:
        return world_config(dict(world)) if world else None
    except Exception:
        return None


def _total(parts) -> int:
    return int(sum(parts.values())) if isinstance(parts, Mapping) else int(parts)


# --- estimates of the built-in kinds -----------------------------------------------------------

def _selfcheck(params, world):
    return {"n: pulls": 2 * params["n"] * _F8}


def _campaign_bias(params, world):
    """World and its counterfactual twin, and the per-edge LOO qualities of the window."""
    out = {f"{k} (world and twin)": 2 * v for k, v in world_bytes(world).items()}
    c = _world_config(world)
    if c is not None and hasattr(c, "n_users"):
        edges = c.n_users * c.mean_profile_size
        out["k x profile edges: LOO recommendations"] = int(
            edges * params.get("k", 5) * _F8 * 2)
    return out


def _bandit_sizes(world) -> tuple[int, int]:
    c = _world_config(world)
    return (getattr(c, "n_arms", 10), getattr(c, "dim", 10)) if c is not None else (10, 10)


def _log_bytes(T: int, K: int, d: int) -> int:
    """One logged dataset: contexts, actions, rewards, propensities, times, availability."""
    return T * (d * _F8 + 4 * _F8 + K)


def _bandit_eval(params, world):
    """One log at a time; BRED's (n_bootstrap, K x T) resample index and float32 jitter
    chunk; the truth's n_truth_runs curves of length T."""
    K, d = _bandit_sizes(world)
    T = params["T"]
    B = params.get("n_bootstrap", 1)
    return {"T x world.n_arms x world.dim: one log": _log_bytes(T, K, d),
            "n_bootstrap x world.n_arms x T: BRED resamples": B * K * T * _F8,
            "n_truth_runs x T: online truth": params.get("n_truth_runs", 1) * T * _F8 * 2}


def _offline_vs_online(params, world):
    out = _bandit_eval(params, world)
    out["n_logs x T: the logs"] = params.get("n_logs", 1) * _log_bytes(params["T"],
                                                                      *_bandit_sizes(world))
    return out


def _ope(params, world):
    """Per log: the contexts and, per target policy, its action distribution
    ``(n_rounds, n_actions)``; the estimators' copies of it."""
    K, d = _bandit_sizes(world)
    K = params.get("n_actions") or K
    n = params["n_rounds"]
    targets = len(params.get("targets") or ()) + 4
    return {"n_rounds x world.dim: one log": _log_bytes(n, K, d),
            "n_rounds x n_actions x targets: action distributions": 3 * targets * n * K * _F8}


def _fast_loo_cf(params, world):
    """The leaky fit-once protocols' dense ``(n_users, n_users)`` similarity tables (about
    eight at once) and the ratings; with a `data` file, the ratings from its size."""
    if params.get("data"):
        try:
            size = os.path.getsize(params["data"])
        except OSError:
            size = 0
        return {"data: ratings (from the file's size)": size * 8}
    n_users = params["n_users"]
    return {"n_users x n_users: fit-once similarities": 8 * n_users * n_users * _F8,
            "n_ratings: ratings and predictions": params["n_ratings"] * 12 * _F8}


#: ``resources(params, world)`` of the built-in kinds (until their declarations carry it).
BUILTIN_RESOURCES: dict[str, Callable] = {
    "selfcheck": _selfcheck, "campaign_bias": _campaign_bias,
    "bred_vs_replay": _bandit_eval, "dynamic_news": _bandit_eval,
    "offline_vs_online": _offline_vs_online, "ope": _ope, "fast_loo_cf": _fast_loo_cf,
}


def resources_of(kind) -> Callable | None:
    """The kind's own ``resources``, else the built-in table's entry for it."""
    own = getattr(kind, "resources", None)
    if own is not None:
        return own
    return BUILTIN_RESOURCES.get(kind.name) if kind.origin == "built-in" else None


def evaluation_bytes(kind, ev: dict, world: Mapping | None) -> tuple[int, dict[str, int]] | None:
    """Peak bytes of the largest cell of evaluation ``ev`` (over its sweep) and that cell's
    breakdown; ``None`` when the kind declares no estimate."""
    from recloop._scenario import sweep_values

    func = resources_of(kind)
    if func is None:
        return None
    base = {p.name: ev[p.name] for p in kind.params if p.name in ev}
    best: tuple[int, dict] | None = None
    for combo in sweep_values(ev):
        try:
            parts = func({**base, **combo}, world)
        except Exception:  # an estimate that fails must not stop a run: no estimate
            return None
        breakdown = dict(parts) if isinstance(parts, Mapping) else {"": int(parts)}
        total = _total(parts)
        if best is None or total > best[0]:
            best = (total, breakdown)
    return best


def drivers(breakdown: Mapping[str, int], *, top: int = 3) -> str:
    """The largest parts of a breakdown, e.g. ``"world.n_items x world.dim: item features
    74.5 GiB"``."""
    parts = sorted(((v, k) for k, v in breakdown.items() if k), reverse=True)[:top]
    return "; ".join(f"{k} {format_bytes(v)}" for v, k in parts if v > 0)


# --- cross-key rules the built-in kinds' declarations do not state yet ----------------------

def _campaign_bias_rules(params, agents, world) -> Iterator[tuple[str, str]]:
    """Lists no longer than the items, and the campaigns g1 is built from."""
    c = _world_config(world)
    if c is None or not hasattr(c, "n_items") or not hasattr(c, "campaigns"):
        return
    k = params["k"]
    if k > c.n_items:
        yield "k", f"expected k <= n_items = {c.n_items} of the world, got {k}"
    for j, p in enumerate(params.get("p_values") or ()):
        if isinstance(p, int) and not isinstance(p, bool) and p > c.n_items:
            yield f"p_values[{j}]", (f"expected a number of items <= n_items = {c.n_items} "
                                     f"of the world, got {p}")
    ticks = params.get("ticks") or []
    if not ticks:
        return
    t0, t1 = min(ticks), max(ticks)
    in_window = {i for camp in c.campaigns if camp.items is not None and camp.reach > 0
                 and camp.start <= t1 and camp.end > t0 for i in camp.items}
    for a in agents:
        if a.get("kind") == "constant" and len(a.get("items") or ()) < k:
            yield "k", (f"expected k <= {len(a['items'])}, the length of constant agent "
                        f"{a['name']!r}'s items, got {k}")
        if a.get("kind") == "constant_agreeing" and len(in_window) < k <= c.n_items:
            yield "k", (f"expected k <= {len(in_window)}, the items pushed by the world's "
                        f"campaigns in the window [{t0}, {t1}] (agent {a['name']!r} "
                        f"recommends the k most pushed), got {k}")


def _ab_test_rules(params, agents, world) -> Iterator[tuple[str, str]]:
    """The A/B test's traffic: 0 or at least 2 users, within the world's horizon, and no
    estimator of the same name."""
    from recloop._plugins import entry_name

    ab = params.get("ab_users") or 0
    if ab == 1:
        yield "ab_users", "expected 0 (no A/B test) or at least 2 users, got 1"
    c = _world_config(world)
    horizon = getattr(c, "horizon", None) if c is not None else None
    if ab and horizon is not None and ab > horizon:
        yield "ab_users", (f"expected at most the world's horizon {horizon} (one user per "
                           f"tick), got {ab}")
    if ab:
        for j, entry in enumerate(params.get("estimators") or ()):
            try:
                name = entry_name(entry)
            except Exception:  # a malformed entry is reported by the estimators' own check
                continue
            if name == "ab_test":
                yield f"estimators[{j}]", ("expected no estimator named 'ab_test' when "
                                           "ab_users runs the A/B test of that name, got one")


#: Extra ``check(params, agents, world)`` rules of built-in kinds, run after the kind's own.
BUILTIN_CHECKS: dict[str, Callable] = {
    "campaign_bias": _campaign_bias_rules, "bred_vs_replay": _ab_test_rules,
    "offline_vs_online": _ab_test_rules, "ope": _ab_test_rules,
}


def checks_of(kind) -> list[Callable]:
    """The kind's own ``check`` and the built-in table's extra rules for it."""
    out = [kind.check] if kind.check else []
    if kind.origin == "built-in" and kind.name in BUILTIN_CHECKS:
        out.append(BUILTIN_CHECKS[kind.name])
    return out
