"""Native vector environments: N episodes stepped together with array operations.

``gymnasium.make_vec("recloop/LinearBandit-v0", num_envs=N)`` builds
:class:`LinearBanditVectorEnv` (the registered ``vector_entry_point``): one step computes the
N clicks, the N next contexts and the N x K true CTRs with a handful of numpy operations
instead of N Python environments. Sub-environment ``i`` reset with ``seed=s`` is the episode of
the single environment reset with ``seed=s + i`` (the convention of Gymnasium's
``SyncVectorEnv``), so vector and single runs can be compared draw for draw.
``gymnasium.make_vec("recloop/Recommendation-v0", num_envs=N)`` builds
:class:`RecommendationVectorEnv` the same way. Autoreset follows ``AutoresetMode.NEXT_STEP``:
the step after a truncation resets that sub-environment (its action is ignored, its reward is 0).
"""

from __future__ import annotations

import numbers

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from simulator import _bandit as _b
from simulator import _click_models as _cm

__all__ = ["LinearBanditVectorEnv", "RecommendationVectorEnv"]


def _check_num_envs(num_envs) -> int:
    if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral):
        raise TypeError(f"`num_envs` must be an int; got {type(num_envs).__name__}.")
    if num_envs < 1:
        raise ValueError(f"`num_envs` must be >= 1; got {num_envs}.")
    return int(num_envs)


def _check_max_steps(max_episode_steps):
    if max_episode_steps is None:
        return None
    if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, numbers.Integral):
        raise TypeError("`max_episode_steps` must be an int or None; "
                        f"got {type(max_episode_steps).__name__}.")
    if max_episode_steps < 1:
        raise ValueError(f"`max_episode_steps` must be >= 1; got {max_episode_steps}.")
    return int(max_episode_steps)


def _seed_list(seed, n: int):
    """Per-sub-environment seeds: ``s + i`` for an int, the list itself for a list."""
    if seed is None:
        return None
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return [int(seed) + i for i in range(n)]
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(f"`seed` must be an int or a list of {n} seeds; got {len(seeds)}.")
    return seeds


def _new_keys(key_rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` fresh episode keys (uint64) from the stream of later episodes."""
    return key_rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64)


def _first_keys(np_random: np.random.Generator, seed, n: int):
    """``reset``'s key stream for later episodes and the first ``n`` episode keys.

    ``seed`` as in ``reset`` (see :func:`_seed_list`); None draws the keys from the stream.
    """
    seeds = _seed_list(seed, n)
    # keys of later episodes: a stream distinct from the seeds' own (a list entropy never
    # equals an int seed), so an autoreset never replays episode s + i
    key_rng = np.random.default_rng([int(np_random.integers(2**63)), 0x5EED])
    if seeds is None:
        return key_rng, _new_keys(key_rng, n)
    return key_rng, np.array([_b.episode_key(np.random.default_rng(s)) for s in seeds],
                             dtype=np.uint64)


def _check_actions(actions, n_envs: int, n_actions: int, available: np.ndarray,
                   skip: np.ndarray) -> np.ndarray:
    a = np.asarray(actions)
    if a.shape != (n_envs,):
        raise ValueError(f"`actions` must have shape ({n_envs},); got {a.shape}.")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"`actions` must be integer arm indices; got dtype {a.dtype}.")
    a = a.astype(np.int64)
    bad = np.flatnonzero(((a < 0) | (a >= n_actions)) & ~skip)
    if bad.size:
        raise ValueError(f"`actions` must be in [0, {n_actions}); got {a[bad[0]]} in "
                         f"sub-environment {bad[0]}.")
    ok = np.where(skip, True, available[np.arange(n_envs), np.clip(a, 0, n_actions - 1)])
    bad = np.flatnonzero(~ok)
    if bad.size:
        raise ValueError(f"`actions` {a[bad[0]]} in sub-environment {bad[0]} is not an "
                         "available arm.")
    return a


class MaskedMultiDiscrete(_b._MaskedMultiDiscrete):
    """``MultiDiscrete([K] * N)`` whose ``sample()`` draws, for each sub-environment, an action
    among its currently available ones (see :class:`simulator._bandit.MaskedDiscrete`)."""

    def _sample_available(self, current):
        n_avail = current.sum(axis=1)
        pick = np.floor(self.np_random.random(current.shape[0]) * n_avail).astype(np.int64)
        # index of the pick-th available action of each row
        return (np.cumsum(current, axis=1) <= pick[:, None]).sum(axis=1).astype(self.dtype)


class LinearBanditVectorEnv(VectorEnv):
    """N episodes of ``recloop/LinearBandit-v0`` stepped with array operations.

    Parameters
    ----------
    num_envs : int
        Number of sub-environments N.
    config : LinearBanditConfig, str or None
        As for :class:`simulator.LinearBanditEnv`.
    max_episode_steps : int or None
        Truncate each episode after this many steps (besides ``config.horizon``).
    render_mode : None
        No rendering.

    Notes
    -----
    Observations are batched: ``context`` (N, d), ``available`` (N, K), ``tick`` (N,);
    ``info`` carries ``ctr`` (N, K), ``expected_reward`` (N,), ``best_expected_reward`` (N,)
    and ``tick`` (N,) of the rounds just played.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, config=None, *, max_episode_steps=None,
                 render_mode=None):
        self.num_envs = _check_num_envs(num_envs)
        self.config = _b.resolve_config(config)
        self.max_episode_steps = _check_max_steps(max_episode_steps)
        _b._check_render_mode(render_mode)
        self.render_mode = None
        single = _b.LinearBanditEnv(self.config)
        self.single_action_space = single.action_space
        self.single_observation_space = single.observation_space
        self.action_space = MaskedMultiDiscrete(
            np.full(self.num_envs, self.config.n_arms),
            None if self.config.lifetime is None else self._current_mask)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.n_actions = self.config.n_arms
        self._keys = None
        self._static_alive = self.config.lifetime is None

    def _current_mask(self):
        return None if self._keys is None else self._A

    @property
    def keys(self) -> np.ndarray:
        """The episode keys of the sub-environments (uint64, (N,))."""
        return self._keys.copy()

    def _observe(self) -> dict:
        c = self.config
        self._X = _b.contexts(c, self._keys, self._ticks)
        arms = None if self._static_alive else _b.arms_alive_between(
            c, int(self._ticks.min()), int(self._ticks.max()) + 1)
        self._P = _b.true_ctr(c, self._X, self._ticks, arms)
        if self._static_alive:
            self._A = np.ones((self.num_envs, c.n_arms), dtype=bool)
        else:
            self._A = _b.alive(c, self._ticks)
        return {"context": self._X.copy(), "available": self._A.copy(),
                "tick": self._ticks.copy()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed if isinstance(seed, numbers.Integral) else None)
        self._key_rng, self._keys = _first_keys(self.np_random, seed, self.num_envs)
        self._ticks = np.zeros(self.num_envs, np.int64)
        self._steps = np.zeros(self.num_envs, np.int64)
        self._autoreset = np.zeros(self.num_envs, bool)
        return self._observe(), {}

    def step(self, actions):
        if self._keys is None:
            raise RuntimeError("call `reset` before `step`.")
        N = self.num_envs
        skip = self._autoreset
        a = _check_actions(actions, N, self.n_actions, self._A, skip)
        a = np.where(skip, 0, a)
        rows = np.arange(N)
        p = self._P[rows, a]
        clicks = _b.click_uniforms(self._keys, self._ticks, a) < p
        reward = np.where(skip, 0.0, clicks.astype(np.float64))
        masked = np.where(self._A, self._P, -np.inf)
        info = {"ctr": self._P, "expected_reward": np.where(skip, 0.0, p),
                "best_expected_reward": np.where(skip, 0.0, masked.max(axis=1)),
                "tick": self._ticks.copy()}
        # advance; sub-environments truncated last step start a new episode instead
        self._ticks += 1
        self._steps += 1
        if skip.any():
            n = int(skip.sum())
            self._keys[skip] = _new_keys(self._key_rng, n)
            self._ticks[skip] = 0
            self._steps[skip] = 0
        truncated = np.zeros(N, bool)
        horizon = self.config.horizon
        if horizon is not None:
            truncated |= self._ticks >= horizon
        if self.max_episode_steps is not None:
            truncated |= self._steps >= self.max_episode_steps
        truncated &= ~skip
        self._autoreset = truncated
        obs = self._observe()
        return obs, reward, np.zeros(N, bool), truncated, info


class RecommendationVectorEnv(VectorEnv):
    """N episodes of ``recloop/Recommendation-v0`` stepped with array operations.

    All sub-environments share one :class:`World` (built once from the config, read only):
    visits and clicks come from each sub-environment's episode key. ``add_clicks`` is not
    supported here (the sub-environments would write into one shared profile graph).

    Parameters
    ----------
    num_envs : int
        Number of sub-environments N.
    config : RecommendationConfig or None
        As for :class:`simulator.RecommendationEnv`.
    k, click_model : optional
        Replace ``config.k`` and ``config.click_model``, as for
        :class:`simulator.RecommendationEnv`.
    max_episode_steps : int or None
        Truncate each episode after this many steps (besides the world's horizon).
    render_mode : None
        No rendering.

    Notes
    -----
    Batched observations: ``user`` (N,), ``context`` (N, dim), ``available`` (N, n_items),
    ``tick`` (N,). Actions: (N,) items when ``k == 1``, else (N, k) slates. ``info``:
    ``ctr`` (N, k), ``clicks`` (N, k) (per position, under the config's click model),
    ``expected_reward``, ``best_expected_reward``, ``user``, ``tick`` (N,) of the visits
    just played. Sub-environment ``i`` gives the clicks the single environment reset with
    the same seed gives, under every click model. Unlike the single environment it
    carries no ``item_ctr`` (N x n_items per step would dominate the cost); the model's
    ``env.model.ctr(users, ticks)`` gives it.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, config=None, *, k=None, click_model=None,
                 max_episode_steps=None, render_mode=None):
        from simulator import _envs

        self.num_envs = _check_num_envs(num_envs)
        self.config = _envs.resolve_config(config, k=k, click_model=click_model)
        if self.config.add_clicks:
            raise ValueError("`config.add_clicks` must be False for the vector environment "
                             "(its sub-environments share one world); got True.")
        self.max_episode_steps = _check_max_steps(max_episode_steps)
        _b._check_render_mode(render_mode)
        self.render_mode = None
        single = _envs.RecommendationEnv(self.config)
        self.world = single.world
        self.model = single.model
        self.single_action_space = single.action_space
        self.single_observation_space = single.observation_space
        N, k, n_items = self.num_envs, self.config.k, self.model.n_items
        source = None if (self.model.static_items and k == 1) else self._current_mask
        if k == 1:
            self.action_space = MaskedMultiDiscrete(np.full(N, n_items), source)
        else:
            self.action_space = _envs.MaskedSlate(np.full((N, k), n_items), source)
        self.observation_space = batch_space(self.single_observation_space, N)
        self._keys = None
        self._keys_version = self._skeys_of = self._cont_of = None
        self._envs = _envs

    def _current_mask(self):
        return None if self._keys is None else self._A

    def true_slate_value(self, user, slate, tick):
        """Closed-form expected reward of showing ``slate`` to ``user`` at ``tick`` (as
        :meth:`simulator.RecommendationEnv.true_slate_value`)."""
        return self.model.true_slate_value(user, slate, tick)

    def _observe(self) -> dict:
        m = self.model
        self._T = m.ticks(self._steps)
        if self._skeys_of is not self._keys_version:  # keys changed: new stream keys
            self._visit_skeys = _b._stream_keys(self._keys, self._envs._STREAM_VISIT)
            self._click_skeys = _b._stream_keys(self._keys, self._envs._STREAM_REC_CLICK)
            self._skeys_of = self._keys_version
        self._U = m.users(self._keys, self._steps, skeys=self._visit_skeys)
        self._X, self._A = m.visit(self._U, self._T)
        # `visit` returns a fresh gather of tastes and a fresh read-only broadcast of the alive
        # mask (zero-copy: (N, n_items) bools per step would cost more than the rest)
        return {"user": self._U.copy(), "context": self._X, "available": self._A,
                "tick": self._T.copy()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed if isinstance(seed, numbers.Integral) else None)
        self._key_rng, self._keys = _first_keys(self.np_random, seed, self.num_envs)
        self._keys_version = object()
        self._steps = np.zeros(self.num_envs, np.int64)
        self._autoreset = np.zeros(self.num_envs, bool)
        return self._observe(), {}

    def _check(self, actions, skip) -> np.ndarray:
        N, k, n_items = self.num_envs, self.config.k, self.model.n_items
        a = np.asarray(actions)
        shape = (N,) if k == 1 else (N, k)
        if a.shape != shape:
            raise ValueError(f"`actions` must have shape {shape}; got {a.shape}.")
        if not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"`actions` must be integer item ids; got dtype {a.dtype}.")
        a = np.where(skip.reshape((N,) + (1,) * (a.ndim - 1)), 0, a).astype(np.int64)
        a = a.reshape(N, k)
        bad = np.flatnonzero(np.any((a < 0) | (a >= n_items), axis=1))
        if bad.size:
            raise ValueError(f"`actions` items must be in [0, {n_items}); got {a[bad[0]]} in "
                             f"sub-environment {bad[0]}.")
        if k > 1:
            srt = np.sort(a, axis=1)
            bad = np.flatnonzero(np.any(srt[:, 1:] == srt[:, :-1], axis=1) & ~skip)
            if bad.size:
                raise ValueError(f"`actions` must hold {k} distinct items per slate; got "
                                 f"{a[bad[0]].tolist()} in sub-environment {bad[0]}.")
        if self.model.static_items:  # every item is alive at every tick: nothing to check
            return a
        ok = self._A[np.arange(N)[:, None], a].all(axis=1) | skip
        bad = np.flatnonzero(~ok)
        if bad.size:
            raise ValueError(f"`actions` {a[bad[0]].tolist()} in sub-environment {bad[0]} "
                             "holds an item that is not available.")
        return a

    def step(self, actions):
        if self._keys is None:
            raise RuntimeError("call `reset` before `step`.")
        N, n_items = self.num_envs, self.model.n_items
        skip = self._autoreset
        slate = self._check(actions, skip)
        c = self.config
        skey = self._click_skeys[:, None]
        counter = self._U[:, None] * n_items + slate
        if c.click_model == "independent" and c.reward == "clicks":  # historical path
            p, best = self.model.shown_and_best(self._U, self._T, slate, self._A)
            u = _b._uniform2(skey, self._T[:, None], counter)
            clicks = (u < p) & ~skip[:, None]
            reward = clicks.sum(axis=1).astype(np.float64)
            expected = p.sum(axis=1)
        else:
            m = self.model
            p, top = m.shown_and_top(self._U, self._T, slate, self._A)
            u = _b._uniform2(skey, self._T[:, None], counter)
            v = None
            if c.click_model == "dcm":
                if self._cont_of is not self._keys_version:
                    self._cont_skeys = _b._stream_keys(self._keys, self._envs._STREAM_REC_CONTINUE)
                    self._cont_of = self._keys_version
                v = _b._uniform2(self._cont_skeys[:, None], self._T[:, None], counter)
            clicks = _cm.simulate_clicks(p, u, c.click_model, theta=m.theta, lam=m.lam, v=v)
            clicks &= ~skip[:, None]
            n_clicks = clicks.sum(axis=1)
            reward = (n_clicks if c.reward == "clicks" else n_clicks > 0).astype(np.float64)
            expected, best = m.expected(p), m.best_of_top(top)
        info = {"ctr": p, "clicks": clicks,
                "expected_reward": np.where(skip, 0.0, expected),
                "best_expected_reward": np.where(skip, 0.0, best),
                "user": self._U.copy(), "tick": self._T.copy()}
        self._steps += 1
        if skip.any():
            self._keys[skip] = _new_keys(self._key_rng, int(skip.sum()))
            self._keys_version = object()
            self._steps[skip] = 0
        truncated = self._steps >= self.config.n_steps
        if self.max_episode_steps is not None:
            truncated |= self._steps >= self.max_episode_steps
        truncated &= ~skip
        self._autoreset = truncated
        # a sub-environment past its horizon shows its last visit again until the reset
        self._steps = np.where(self._steps >= self.config.n_steps, self.config.n_steps - 1,
                               self._steps)
        obs = self._observe()
        return obs, reward, np.zeros(N, bool), truncated, info
