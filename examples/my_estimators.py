"""Your own off-policy estimators, compared with recloop's in a scenario file.

Run the study (from the repository root)::

    recloop run examples/my_study.toml --path examples

``--path examples`` puts this folder on the import path of recloop and of every worker, so
the scenario can name these functions as ``"my_estimators:clipped_ips"``. Each estimator
is called ``estimator(log, action_dist, *, rng)`` -- the same signature
``recloop.testing.check_ope_estimator`` checks -- where ``log`` is a
``simulator.logs.BanditLog`` and ``action_dist`` the target policy's probabilities of
OBP's shape ``(n_rounds, n_actions, 1)``. Return an ``evaluators.Estimate`` (with an
interval: the report then shows its coverage) or a plain float.
"""

import numpy as np

from evaluators import Estimate, normal_estimate


def clipped_ips(log, action_dist, *, clip=10.0, rng=None) -> Estimate:
    """IPS with importance weights clipped at ``clip``: lower variance, biased downwards
    wherever the target puts much more mass than the logger (weights above ``clip``)."""
    w = np.asarray(action_dist)[np.arange(log.n_rounds), log.action, 0] / log.pscore
    return normal_estimate(np.minimum(w, clip) * log.reward)


def optimist(log, action_dist, *, rng=None) -> float:
    """A deliberately biased estimator: the mean reward of the records where the target
    agrees with the logged action more than the logger did, as if the target were
    right everywhere. It has no interval (a float)."""
    p = np.asarray(action_dist)[np.arange(log.n_rounds), log.action, 0]
    agree = p > log.pscore
    return float(log.reward[agree].mean()) if agree.any() else float("nan")
