"""One row of a results table: a measurement, ideally beside its ground truth."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

__all__ = ["Measurement"]


@dataclass(frozen=True)
class Measurement:
    """A single measurement produced by an experiment (long format, one row per number).

    The harness adds the ``scenario``, ``cell`` and ``seed`` columns; experiments fill in
    the rest. ``truth`` is ``nan`` when the simulator has no ground truth for the metric;
    ``error`` is ``estimate - truth``. ``params`` holds the cell's swept parameters
    (e.g. ``{"T": 1000}``).

    ``log`` is ``None`` for a row of the results table (often a summary over the cell's
    logs: a mean, a bias, an RMSE) and the index of the log for a *per-log estimate*: one
    estimator's estimate on one independent log, with its interval and the truth, from
    which :func:`recloop.summarize` computes bias, RMSE and coverage over logs (the harness
    writes them to ``estimates.csv.gz``).
    """

    evaluation: str
    agent: str
    metric: str
    estimate: float
    stderr: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    truth: float = math.nan
    n: int | None = None
    tick: int | None = None
    variant: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    log: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        if self.log is not None:
            if isinstance(self.log, bool) or not isinstance(self.log, numbers.Integral) \
                    or self.log < 0:
                raise ValueError(f"`log` must be None or an integer >= 0; got {self.log!r}.")
            object.__setattr__(self, "log", int(self.log))
        for name in ("estimate", "stderr", "ci_low", "ci_high", "truth"):
            object.__setattr__(self, name, float(getattr(self, name)))

    @property
    def error(self) -> float:
        return self.estimate - self.truth

    @classmethod
    def from_estimate(cls, estimate, *, evaluation: str, agent: str, metric: str,
                      truth: float = math.nan, **kw) -> "Measurement":
        """Build a row from an ``evaluators.Estimate``."""
        return cls(evaluation=evaluation, agent=agent, metric=metric, estimate=estimate.value,
                   stderr=estimate.stderr, ci_low=estimate.ci_low, ci_high=estimate.ci_high,
                   truth=truth, n=estimate.n, **kw)
