"""Registration of recloop's Gymnasium environments under the ``recloop/`` namespace.

:func:`register_envs` runs when ``simulator`` is imported, so ``import simulator`` followed by
``gymnasium.make("recloop/LinearBandit-v0")`` works, and so does the one-liner
``gymnasium.make("simulator:recloop/LinearBandit-v0")`` (Gymnasium imports the module named
before the colon). Entry points are strings, so registering imports nothing heavy.

Gymnasium >= 1.0 no longer loads ``gymnasium.envs`` plugin entry points (0.26 did), so
recloop declares none: importing ``simulator`` is the one way in.

Episode lengths (``max_episode_steps`` of the spec):

* ``recloop/DynamicNews-v0``: its horizon (7,520 ticks, when the supply of news runs out);
  the environment truncates there by itself, and the spec says so, so that wrappers and
  ``gymnasium.make_vec`` know the episode length.
* ``recloop/LinearBandit-v0``: none. The BRED test bed is a static bandit -- its arms never
  die, its CTRs never change -- so it is a continuing task without a horizon, and an
  episode never ends by itself (a random agent can step it forever). Give the length you
  want: ``gymnasium.make("recloop/LinearBandit-v0", max_episode_steps=10_000)``, or a
  config with ``lifetime`` (arms that die) whose horizon truncates the episode.
* ``recloop/Recommendation-v0``: the world's ``n_ticks`` (the environment truncates there).
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


def _max_episode_steps(kwargs: dict) -> int | None:
    """The horizon of a bandit environment's default config (``None``: it has none)."""
    name = kwargs.get("config")
    if name is None:
        return None
    from simulator._presets import preset

    return getattr(preset(name), "horizon", None)


def register_envs() -> None:
    """Register the environments (idempotent); called when ``simulator`` is imported."""
    from gymnasium.envs.registration import register, registry

    for env_id, entry, vector_entry, kwargs in _SPECS:
        if env_id not in registry:
            steps = _max_episode_steps(kwargs) if "LinearBandit" in entry else None
            register(id=env_id, entry_point=entry, vector_entry_point=vector_entry,
                     kwargs=dict(kwargs), disable_env_checker=False, max_episode_steps=steps)
