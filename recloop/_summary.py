"""Estimates against the truth, over independent logs: the one computation behind every
summary recloop prints.

The terminal summary of ``recloop run``, the first table of ``report.md`` and
``report.html``, ``Results.summary()`` of the Python API and the evaluation kinds'
leaderboards all call :func:`summarize` on the per-log estimates of a run
(``estimates.csv.gz``: one row per estimator and log, with its interval and the truth).
Rows are grouped by (evaluation, agent, variant, metric, tick, params) -- never across
ticks or swept values -- and each group is summarised over its units (its logs; the logs
of several seeds are pooled, they are independent draws).

With ``e_i`` the estimate on unit ``i``, ``t_i`` its truth, ``[l_i, h_i]`` its interval and
``n`` the units with a finite estimate:

* ``estimate`` = mean of ``e_i``; ``sd`` their standard deviation (``n - 1`` in the
  denominator); ``se = sd / sqrt(n)`` (for ``n = 1``: the unit's own standard error);
* ``truth`` = the truth (the mean of ``t_i`` when it differs between units, e.g. one world
  per seed); ``bias`` = mean of ``e_i - t_i``; ``rmse`` = ``sqrt(mean((e_i - t_i)^2))`` --
  over the units with a truth;
* ``coverage`` = share of the units with an interval whose interval contains ``t_i``
  (``l_i <= t_i <= h_i``); ``nan`` (blank in the reports) when no unit has an interval or
  every interval has zero width (an exact computation has nothing to cover);
* ``n_nan``: units whose estimate is missing (``nan``: the estimator failed or had no
  support) -- left out of everything above.

A *unit* is one row of the input. For evaluations that draw many logs per cell (``ope``,
``bred_vs_replay``, ...) each is one log; for those whose cell computes one estimate per
seed (``campaign_bias``'s LOO scores), each is one seed: the seed is the log.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import numpy as np

__all__ = ["SummaryRow", "summarize"]

#: The fields of a per-log estimate :func:`summarize` reads (a mapping's keys or an
#: object's attributes, e.g. a :class:`recloop.Measurement`).
FIELDS = ("evaluation", "agent", "variant", "metric", "tick", "params", "estimate", "stderr",
          "ci_low", "ci_high", "truth")


@dataclass(frozen=True)
class SummaryRow:
    """One group of per-log estimates summarised against the truth (see the module's
    docstring for the definitions)."""

    evaluation: str
    agent: str
    variant: str
    metric: str
    tick: int | None
    params: Mapping[str, Any]
    n: int
    n_nan: int
    estimate: float
    sd: float
    se: float
    truth: float
    bias: float
    rmse: float
    coverage: float
    n_ci: int

    @property
    def key(self) -> tuple:
        """(evaluation, agent, variant, metric, tick, params as canonical JSON)."""
        return (self.evaluation, self.agent, self.variant, self.metric, self.tick,
                json.dumps(dict(self.params), sort_keys=True))

    @property
    def n_logs(self) -> int:
        """Units in the group, with or without an estimate."""
        return self.n + self.n_nan

    @property
    def nan_rate(self) -> float:
        """Share of the units without an estimate."""
        return self.n_nan / self.n_logs if self.n_logs else math.nan

    @property
    def has_truth(self) -> bool:
        return not math.isnan(self.truth)

    @property
    def relative_rmse(self) -> float:
        """RMSE over ``|truth|`` (OBP's relative estimation error); ``nan`` for a truth of 0."""
        return self.rmse / abs(self.truth) if self.has_truth and self.truth != 0 else math.nan

    @property
    def is_truth_itself(self) -> bool:
        """Every estimate equals its truth exactly: the truth reported against itself (the
        twin's score, an exact LOO), not an estimate."""
        return self.has_truth and self.n > 0 and self.rmse == 0.0


def _get(record, name: str):
    if isinstance(record, Mapping):
        return record[name]
    return getattr(record, name)


def _key(record) -> tuple:
    params = _get(record, "params") or {}
    return (_get(record, "evaluation"), _get(record, "agent") or "",
            _get(record, "variant") or "", _get(record, "metric"), _get(record, "tick"),
            json.dumps(dict(params), sort_keys=True))


def summarize(records: Iterable) -> list[SummaryRow]:
    """Per-log estimates summarised per (evaluation, agent, variant, metric, tick, params).

    Parameters
    ----------
    records : iterable of mappings or objects
        Per-log estimates with the fields ``evaluation``, ``agent``, ``variant``,
        ``metric``, ``tick``, ``params``, ``estimate``, ``stderr``, ``ci_low``,
        ``ci_high``, ``truth`` (``nan`` where there is none): the rows of
        ``estimates.csv.gz``, ``Results.per_log()`` as records, or
        :class:`recloop.Measurement` objects.

    Returns
    -------
    list of SummaryRow
        One per group, in the order the groups first appear.

    Examples
    --------
    >>> rows = [{"evaluation": "ev", "agent": "a", "variant": "ips", "metric": "value",
    ...          "tick": None, "params": {}, "estimate": e, "stderr": 0.1,
    ...          "ci_low": e - 0.2, "ci_high": e + 0.2, "truth": 0.5} for e in (0.4, 0.8)]
    >>> s = summarize(rows)[0]
    >>> round(s.bias, 12), round(s.rmse, 12), s.coverage
    (0.1, 0.22360679775, 0.5)
    """
    groups: dict[tuple, list] = {}
    first: dict[tuple, Any] = {}
    for r in records:
        key = _key(r)
        if key not in groups:
            groups[key] = []
            first[key] = r
        groups[key].append(tuple(float(_get(r, f)) for f in ("estimate", "stderr", "ci_low",
                                                            "ci_high", "truth")))
    return [_row(key, first[key], np.array(units, dtype=np.float64).reshape(-1, 5))
            for key, units in groups.items()]


def _row(key: tuple, r, units: np.ndarray) -> SummaryRow:
    nan = math.nan
    value, stderr, lo, hi, truth = units.T
    finite = np.isfinite(value)
    n = int(finite.sum())
    v = value[finite]
    estimate = float(v.mean()) if n else nan
    sd = float(v.std(ddof=1)) if n > 1 else nan
    se = sd / math.sqrt(n) if n > 1 else (float(stderr[finite][0]) if n == 1 else nan)
    t = truth[finite]
    has_t = np.isfinite(t)
    truth_mean = bias = rmse = coverage = nan
    n_ci = 0
    if has_t.any():
        tt = t[has_t]
        truth_mean = float(tt[0]) if np.all(tt == tt[0]) else float(tt.mean())
        err = v[has_t] - tt
        bias = float(err.mean())
        rmse = math.sqrt(float(np.mean(err ** 2)))
        low, high = lo[finite][has_t], hi[finite][has_t]
        ci = np.isfinite(low) & np.isfinite(high)
        n_ci = int(ci.sum())
        if n_ci and np.any(high[ci] > low[ci]):  # zero width everywhere: exact, nothing to cover
            covered = (low[ci] <= tt[ci]) & (tt[ci] <= high[ci])
            coverage = int(covered.sum()) / n_ci
    evaluation, agent, variant, metric, tick, _ = key
    params = _get(r, "params") or {}
    return SummaryRow(evaluation=evaluation, agent=agent, variant=variant, metric=metric,
                      tick=tick, params=MappingProxyType(dict(params)), n=n,
                      n_nan=int(value.size - n), estimate=estimate, sd=sd, se=se,
                      truth=truth_mean, bias=bias, rmse=rmse, coverage=coverage, n_ci=n_ci)
