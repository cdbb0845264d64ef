"""Agents: bandit policies and recommenders, one protocol (see ``agents._base``).

``agents`` imports numpy and scipy only, never ``simulator``, ``evaluators`` or ``recloop``.
"""

from agents._bandits import EpsilonGreedy, LinUCB, ThompsonSampling, UCB1, UniformRandom
from agents._base import BanditPolicy, Recommender, as_generator
from agents._batched import (BatchedEpsilonGreedy, BatchedLinUCB, BatchedThompsonSampling,
                             BatchedUCB1, BatchedUniformRandom)
from agents._check import AgentCheckError, check_agent
from agents._knn import KNNRating
from agents._plackett_luce import PlackettLuce
from agents._recommenders import Constant, NaiveCF, Popularity, UserCosineCF, UserKNN

__all__ = [
    "BanditPolicy",
    "Recommender",
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
    "KNNRating",
    "PlackettLuce",
    "check_agent",
    "AgentCheckError",
]
