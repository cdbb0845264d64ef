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

Each built-in kind declares its estimate beside its experiment; the helpers here
(:func:`world_bytes`, :func:`bandit_sizes`, :func:`log_bytes`) are what they share, with
:func:`ab_test_rules`, the cross-key rules of the A/B traffic budget of three kinds.
"""

from __future__ import annotations

import math
import os
from typing import Iterator, Mapping

__all__ = ["ESTIMATE_BYTES", "F8", "MAX_RUN_SECONDS", "PROCESS_BYTES", "ab_test_rules",
           "available_memory", "bandit_sizes", "cell_seconds", "drivers", "evaluation_bytes",
           "format_bytes", "format_seconds", "log_bytes", "traffic_bytes", "world_bytes",
           "world_config_or_none"]

#: Bytes of a float64 / int64.
F8 = 8

#: One estimate kept per log until the cell's summary (an ``Estimate`` of five floats and
#: the list slot holding it, with Python's object overhead).
ESTIMATE_BYTES = 200

#: Memory of a process running cells before its cell's arrays: the interpreter, numpy,
#: scipy, matplotlib and the compiled kernels (measured: 140 MiB after the imports, about
#: 250 MiB once the kernels are compiled).
PROCESS_BYTES = 256 * 2**20


#: Estimated wall time of a run (its cells' estimated CPU time over its workers) past which
#: ``recloop run`` and ``recloop.run`` refuse it without ``--force`` / ``force=True``: a day.
#: The estimates come from the kinds that declare a cost per log (``Chunks.cost``: ``ope``,
#: ``estimator_selection``, ...; within a factor of 2 to 5 on an idle machine); other kinds'
#: cells are not counted.
MAX_RUN_SECONDS = 24 * 3600.0


def cell_seconds(kind, ctx) -> float | None:
    """Estimated CPU seconds of one cell (``ctx``: its :class:`recloop._cells.CellContext`)
    on one core of an idle machine: its logs times the kind's cost of a log
    (:class:`recloop._registry.Chunks`); ``None`` when the kind declares no cost."""
    if kind.chunks is None:
        return None
    try:
        seconds = float(kind.chunks.n_logs(ctx)) * float(kind.chunks.cost(ctx))
    except Exception:  # an estimate that fails must not stop a run: no estimate
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def format_seconds(seconds: float) -> str:
    """``90`` -> ``"90 s"``, ``7200`` -> ``"2 h"``, ``86400`` -> ``"24 h"``, ``3e7`` ->
    ``"347 days"``."""
    for unit, size in (("years", 365 * 86400.0), ("days", 86400.0), ("h", 3600.0),
                       ("min", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"


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
    from recloop._worlds import world_config

    try:
        c = world_config(dict(world))
    except Exception:  # an invalid world is the loader's business, not an estimate's
        return {}
    out: dict[str, int] = {}
    if hasattr(c, "n_users") and hasattr(c, "n_items"):
        out["world.n_items x world.dim: item features"] = c.n_items * c.dim * F8
        out["world.n_users x world.dim: user tastes"] = c.n_users * c.dim * F8
        out["world.n_users x world.n_items: adoption matrix"] = c.n_users * c.n_items
        out["world.n_ticks x world.n_items: rate calibration"] = 5 * c.n_ticks * c.n_items * F8
        out["min(world.n_users, 1000) x world.n_items: calibration sample"] = (
            5 * min(c.n_users, 1000) * c.n_items * F8)
        if getattr(c, "drift_rate", 0) > 0:
            out["world.n_users x world.dim x world.drift_terms: taste drift"] = (
                c.n_users * c.dim * c.drift_terms * F8)
        pushes = sum(min(camp.reach, 1.0) * c.n_users * (camp.k or 0)
                     for camp in getattr(c, "campaigns", ()))
        edges = c.n_users * c.mean_profile_size + pushes
        out["world.n_users x world.mean_profile_size: profile edges"] = int(edges * (25 + 12))
    elif hasattr(c, "n_arms") and hasattr(c, "dim"):
        out["world.n_arms x world.dim: arms"] = c.n_arms * c.dim * F8 * 4
    return out


def world_config_or_none(world):
    from recloop._worlds import world_config

    try:
        return world_config(dict(world)) if world else None
    except Exception:
        return None


def bandit_sizes(world) -> tuple[int, int]:
    """``(n_arms, dim)`` of a bandit world (10, 10 when unknown)."""
    c = world_config_or_none(world)
    return (getattr(c, "n_arms", 10), getattr(c, "dim", 10)) if c is not None else (10, 10)


def log_bytes(T: int, K: int, d: int) -> int:
    """One logged dataset: contexts, actions, rewards, propensities, times, availability."""
    return T * (d * F8 + 4 * F8 + K)


def traffic_bytes(params, world) -> dict[str, int]:
    """The logs a cell draws besides its ``n_logs`` ones: the online A/B test's
    (``ab_users`` records per log, one log at a time) and the agent targets' training log
    (``n_train`` records, kinds that have it)."""
    K, d = bandit_sizes(world)
    out = {}
    if params.get("ab_users"):
        out["ab_users x world.dim: the A/B test's log"] = log_bytes(params["ab_users"], K, d)
    if params.get("n_train"):
        out["n_train x world.dim: the agents' training log"] = log_bytes(params["n_train"], K,
                                                                        d)
    return out


def _total(parts) -> int:
    return int(sum(parts.values())) if isinstance(parts, Mapping) else int(parts)


def evaluation_bytes(kind, ev: dict, world: Mapping | None) -> tuple[int, dict[str, int]] | None:
    """Peak bytes of the largest cell of evaluation ``ev`` (over its sweep) and that cell's
    breakdown; ``None`` when the kind declares no estimate."""
    from recloop._schema import sweep_values

    func = kind.resources
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


def ab_test_rules(params, agents, world) -> Iterator[tuple[str, str]]:
    """The A/B test's traffic: 0 or at least 2 users, within the world's horizon, and no
    estimator of the same name."""
    from recloop._schema import entry_name

    ab = params.get("ab_users") or 0
    if ab == 1:
        yield "ab_users", "expected 0 (no A/B test) or at least 2 users, got 1"
    c = world_config_or_none(world)
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
