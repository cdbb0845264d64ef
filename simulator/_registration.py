"""Registration of recloop's Gymnasium environments under the ``recloop/`` namespace.

:func:`register_envs` runs when ``simulator`` is imported, so ``import simulator`` followed by
``gymnasium.make("recloop/LinearBandit-v0")`` works, and so does the one-liner
``gymnasium.make("simulator:recloop/LinearBandit-v0")`` (Gymnasium imports the module named
before the colon). Entry points are strings, so registering imports nothing heavy.

Gymnasium >= 1.0 no longer loads ``gymnasium.envs`` plugin entry points (0.26 did), so
recloop declares none: importing ``simulator`` is the one way in.
"""

from __future__ import annotations

#: ids registered by :func:`register_envs`, with their entry points and default kwargs.
ENV_IDS = ("recloop/LinearBandit-v0", "recloop/DynamicNews-v0", "recloop/Recommendation-v0")

_SPECS = (
    ("recloop/LinearBandit-v0", "simulator._bandit:LinearBanditEnv",
     "simulator._vector:LinearBanditVectorEnv", {}),
    ("recloop/DynamicNews-v0", "simulator._bandit:LinearBanditEnv",
     "simulator._vector:LinearBanditVectorEnv", {"config": "dynamic_news"}),
    ("recloop/Recommendation-v0", "simulator._envs:RecommendationEnv",
     "simulator._vector:RecommendationVectorEnv", {}),
)


def register_envs() -> None:
    """Register the environments (idempotent); called when ``simulator`` is imported."""
    from gymnasium.envs.registration import register, registry

    for env_id, entry, vector_entry, kwargs in _SPECS:
        if env_id not in registry:
            register(id=env_id, entry_point=entry, vector_entry_point=vector_entry,
                     kwargs=dict(kwargs), disable_env_checker=False)
