"""Property-based testing of users' own estimators against problems with known truth.

``check_ope_estimator``, ``check_learning_policy_evaluator`` and ``check_offline_metric``
work like Gymnasium's ``check_env``: call them in a plain pytest test. Hypothesis strategies
that draw small problems with their ground truth live in ``recloop.testing.strategies``
(imported on demand: hypothesis is a test dependency).
"""

from recloop.testing._checks import (
                                     HYGIENE_PROPERTIES,
                                     OPE_PROPERTIES,
                                     CheckFailed,
                                     CheckReport,
                                     PropertyResult,
                                     check_learning_policy_evaluator,
                                     check_offline_metric,
                                     check_ope_estimator,
)
from recloop.testing._problems import BanditProblem, DrawnLog, random_bandit_problem

__all__ = [
    "BanditProblem",
    "CheckFailed",
    "CheckReport",
    "DrawnLog",
    "HYGIENE_PROPERTIES",
    "OPE_PROPERTIES",
    "PropertyResult",
    "check_learning_policy_evaluator",
    "check_offline_metric",
    "check_ope_estimator",
    "random_bandit_problem",
]
