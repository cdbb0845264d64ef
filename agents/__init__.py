"""Agents: bandit policies and recommenders, one protocol (see ``agents._base``).

``agents`` imports numpy and scipy only, never ``simulator``, ``evaluators`` or ``recloop``.
"""

from agents._base import BanditPolicy, Recommender, as_generator

__all__ = [
    "BanditPolicy",
    "Recommender",
    "as_generator",
]
