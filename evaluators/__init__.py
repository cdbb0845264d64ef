"""Offline evaluators: every estimator returns an :class:`Estimate` with its uncertainty.

Estimators never see ground truth; they read logs (``simulator.logs``) and talk to agents
through the agents' protocol (duck typing).
"""

from evaluators._estimate import Estimate, normal_estimate, wilson_estimate

__all__ = [
    "Estimate",
    "normal_estimate",
    "wilson_estimate",
]
