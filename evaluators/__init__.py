"""Offline evaluators: every estimator returns an :class:`Estimate` with its uncertainty.

Estimators never see ground truth; they read logs (``simulator.logs``) and talk to agents
through the agents' protocol (duck typing).
"""

from evaluators import datasets, metrics, splits  # public submodules
from evaluators._ab import ABTestResult, ab_test
from evaluators._bred import JITTER_C, BredEstimate, bred
from evaluators._cv_ope import select_by_cv
from evaluators._estimate import EmptySampleWarning, Estimate, normal_estimate, wilson_estimate
from evaluators._evaluate import (
                             EstimatorRow,
                             LogDiagnostics,
                             LogEvaluation,
                             evaluate_log,
)
from evaluators._loo_knn import LooKnnWarning, LooResult, kfold_loo_knn, loo_knn
from evaluators._mips import mips
from evaluators._offline import EmptyProfilesWarning, LooQuality, loo_quality, offline_score
from evaluators._ope import (
                             NoSupportWarning,
                             OPEEstimate,
                             UndefinedStderrWarning,
                             direct_method,
                             doubly_robust,
                             dr_os,
                             ips,
                             sndr,
                             snips,
                             subgaussian_ips,
                             switch_dr,
)
from evaluators._pasif import select_by_pasif
from evaluators._replay import NoMatchWarning, ReplayEstimate, replay
from evaluators._reward_models import RewardModel, fit_reward_model
from evaluators._select import CANDIDATES, CandidateScore, ImplausibleEstimateWarning, Selection
from evaluators._slate_ope import (
                             SLATE_ESTIMATORS,
                             SlateRewardModel,
                             cascade_dr,
                             independent_ips,
                             pseudoinverse,
                             reward_interaction_ips,
                             slate_ips,
)
from evaluators._slope import SLOPE_DEFAULTS, SelectionEstimate, select_by_slope, select_estimator
from evaluators._twin import select_by_twin
from evaluators._weights import (
                             ItemWeights,
                             UnmatchedItemsWarning,
                             fit_item_weights,
                             kl_objective,
                             reference_gradient,
)

__all__ = [
    "evaluate_log",
    "LogEvaluation",
    "LogDiagnostics",
    "EstimatorRow",
    "ABTestResult",
    "ab_test",
    "LooKnnWarning",
    "LooResult",
    "kfold_loo_knn",
    "loo_knn",
    "replay",
    "ReplayEstimate",
    "NoMatchWarning",
    "bred",
    "BredEstimate",
    "JITTER_C",
    "ips",
    "snips",
    "direct_method",
    "doubly_robust",
    "sndr",
    "switch_dr",
    "dr_os",
    "subgaussian_ips",
    "mips",
    "fit_reward_model",
    "RewardModel",
    "select_estimator",
    "SelectionEstimate",
    "SLOPE_DEFAULTS",
    "select_by_twin",
    "select_by_cv",
    "select_by_pasif",
    "select_by_slope",
    "Selection",
    "CandidateScore",
    "CANDIDATES",
    "ImplausibleEstimateWarning",
    "OPEEstimate",
    "NoSupportWarning",
    "SLATE_ESTIMATORS",
    "SlateRewardModel",
    "slate_ips",
    "independent_ips",
    "reward_interaction_ips",
    "pseudoinverse",
    "cascade_dr",
    "UndefinedStderrWarning",
    "datasets",
    "metrics",
    "splits",
    "Estimate",
    "EmptySampleWarning",
    "EmptyProfilesWarning",
    "ItemWeights",
    "LooQuality",
    "UnmatchedItemsWarning",
    "fit_item_weights",
    "kl_objective",
    "loo_quality",
    "offline_score",
    "reference_gradient",
    "normal_estimate",
    "wilson_estimate",
]
