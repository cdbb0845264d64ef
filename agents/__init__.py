"""Agents: bandit policies and recommenders, one protocol (see ``agents._base``).

``agents`` imports numpy, scipy (numba for its kernels, on first use) and ``recloop_base``,
never ``simulator``, ``evaluators`` or ``recloop``.
"""

from agents._bandits import UCB1, EpsilonGreedy, LinUCB, ThompsonSampling, UniformRandom
from agents._base import (
                          BanditPolicy,
                          BatchedBanditPolicy,
                          Recommender,
                          SupportsBatch,
                          SupportsReplayArrays,
                          as_generator,
)
from agents._batched import (
                          BatchedEpsilonGreedy,
                          BatchedLinUCB,
                          BatchedThompsonSampling,
                          BatchedUCB1,
                          BatchedUniformRandom,
)
from agents._check import AgentCheckError, check_agent
from agents._knn import KNNRating
from agents._mf import ImplicitMF
from agents._plackett_luce import PlackettLuce
from agents._recency import RecencyPopularity
from agents._recommenders import Constant, NaiveCF, Popularity, UserCosineCF, UserKNN
from recloop_base.fast_paths import fast_path, register_fast_path, why_no_fast_path

__all__ = [
    "BanditPolicy",
    "BatchedBanditPolicy",
    "Recommender",
    "SupportsReplayArrays",
    "SupportsBatch",
    "fast_path",
    "register_fast_path",
    "why_no_fast_path",
    "as_generator",
    "UniformRandom",
    "UCB1",
    "LinUCB",
    "EpsilonGreedy",
    "ThompsonSampling",
    "BatchedUniformRandom",
    "BatchedUCB1",
    "BatchedLinUCB",
    "BatchedEpsilonGreedy",
    "BatchedThompsonSampling",
    "Constant",
    "Popularity",
    "UserCosineCF",
    "NaiveCF",
    "UserKNN",
    "RecencyPopularity",
    "ImplicitMF",
    "KNNRating",
    "PlackettLuce",
    "check_agent",
    "AgentCheckError",
]
