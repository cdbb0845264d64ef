"""``recloop/Recommendation-v0``: one user visit per step in a simulated :class:`World`.

Each step a user visits (drawn with probability proportional to the world's user weights
``P(u)``); the agent sees the user's id, a context vector (the user's taste at the current
tick: a fully observed contextual setting) and the mask of items alive; it shows a slate of
``k`` distinct alive items; a click model (:mod:`simulator._click_models`) turns the world's
true probabilities ``p(u, i, t)`` of the shown items into clicks at positions -- by default
each shown item is clicked independently with probability ``p(u, i, t)``, else the
position-based, cascade or dependent click model; the reward is the number of clicks (or
whether any click happened). ``visits_per_tick`` visits make a tick; the episode ends
(truncation) at the world's horizon ``n_ticks``.

Common random numbers: the visiting user of step ``n`` and the click coin of
``(user, item, tick)`` are counter-based hashes of the episode key (see
:mod:`simulator._bandit`), so two agents run on the same seed meet the same users and the same
coin for the same ``(user, item, tick)`` (the DCM's continuation coin comes from another
stream, keyed the same way).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from recloop_base.validation import check_choice, check_float, check_int
from simulator import _bandit as _b
from simulator import _click_models as _cm
from simulator._config import WorldConfig
from simulator._world import World

__all__ = ["RecommendationConfig", "RecommendationEnv"]

_STREAM_VISIT = 11
_STREAM_REC_CLICK = 12
_STREAM_REC_CONTINUE = 13  # the DCM's continuation coins
_BLOCK = 512
_MAX_TABLE = 1 << 23  # cells of the cached user x item CTR table (64 MiB of float64)


@dataclass(frozen=True)
class RecommendationConfig:
    """Configuration of ``recloop/Recommendation-v0`` (validated, immutable).

    Parameters
    ----------
    world : WorldConfig or str, default "viadeo_like"
        The world (a preset name is looked up).
    world_seed : int, default 0
        Seed of the world (users, items, organic adoption); the episode seed given to
        ``reset`` drives only visits and clicks.
    k : int, default 1
        Slate size, in [1, fewest items alive at any tick of the episode].
    visits_per_tick : int, default 100
        User visits (steps) per tick, >= 1.
    start_tick : int, default 0
        Tick of the first visit, in [0, n_ticks - 1].
    add_clicks : bool, default False
        Whether clicked items enter the user's profile (edges with source ``recommended``;
        the world then simulates organic adoption up to the clicks' tick).
    click_model : {"independent", "pbm", "cascade", "dcm"}, default "independent"
        How the shown items' ``p(u, i, t)`` become clicks at positions (see
        :mod:`simulator._click_models`); ``"independent"`` is recloop's historical behaviour,
        unchanged bit for bit. Not to be confused with ``WorldConfig.click_model``, the
        link function of ``p`` itself.
    theta : sequence of k floats in [0, 1], optional
        ``"pbm"`` only: examination probability of each position. Default
        ``theta_j = 1 / (j + 1)^eta``.
    eta : float >= 0, optional
        ``"pbm"`` only, when ``theta`` is not given: the examination decay (default 1.0).
    dcm_lambda : float in [0, 1], optional
        ``"dcm"`` only: probability that the user goes on scanning after a click, the same
        at every position (default 0.5). Position-dependent values are not supported: the
        best slate would be a combinatorial search (it may mix the best and the worst
        items), and the value of a slate policy would have no exact form.
    reward : {"clicks", "any_click"}, default "clicks"
        The reward of a step: the number of clicks or whether any click happened.
    """

    world: WorldConfig | str = "viadeo_like"
    world_seed: int = 0
    k: int = 1
    visits_per_tick: int = 100
    start_tick: int = 0
    add_clicks: bool = False
    click_model: str = "independent"
    theta: tuple | None = None
    eta: float | None = None
    dcm_lambda: float | None = None
    reward: str = "clicks"

    def __post_init__(self):
        w = self.world
        if isinstance(w, str):
            from simulator._presets import preset
            w = preset(w)
            object.__setattr__(self, "world", w)
        if not isinstance(w, WorldConfig):
            raise TypeError(f"`world` must be a WorldConfig or a preset name; got "
                            f"{type(w).__name__}.")
        check_int(self.world_seed, "world_seed", low=0)
        check_int(self.visits_per_tick, "visits_per_tick", low=1)
        check_int(self.start_tick, "start_tick", low=0, high=w.n_ticks - 1)
        if not isinstance(self.add_clicks, bool):
            raise TypeError(f"`add_clicks` must be a bool; got {self.add_clicks!r}.")
        birth, death = w.birth_array(), w.death_array()
        ticks = np.arange(self.start_tick, w.n_ticks)[:, None]
        fewest = int(((birth <= ticks) & (ticks < death)).sum(axis=1).min())
        check_int(self.k, "k", low=1)
        if self.k > fewest:
            raise ValueError(f"`k` must be <= the number of items alive at every tick of the "
                             f"episode ({fewest}); got {self.k}.")
        self._check_click_model()

    def _check_click_model(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        model = check_choice(self.click_model, "click_model", _cm.SLATE_CLICK_MODELS)
        check_choice(self.reward, "reward", _cm.SLATE_REWARDS)
        for name, owner in (("theta", "pbm"), ("eta", "pbm"), ("dcm_lambda", "dcm")):
            if getattr(self, name) is not None and model != owner:
                raise ValueError(f"`{name}` is only used by click_model {owner!r}; got "
                                 f"{name}={getattr(self, name)!r} with click_model {model!r}.")
        if self.theta is not None and self.eta is not None:
            raise ValueError("`theta` and `eta` must not both be given (eta only sets the "
                             f"default theta); got theta={self.theta!r}, eta={self.eta!r}.")
        if self.eta is not None:
            set_("eta", check_float(self.eta, "eta", low=0.0))
        if self.theta is not None:
            set_("theta", _unit_tuple(self.theta, "theta", self.k))
        if self.dcm_lambda is not None:
            if isinstance(self.dcm_lambda, (tuple, list, np.ndarray)):
                raise TypeError("`dcm_lambda` must be one float in [0, 1], the same at every "
                                "position (with position-dependent values the best slate is "
                                "a combinatorial search and the policy values have no exact "
                                f"form here); got {self.dcm_lambda!r}.")
            set_("dcm_lambda", check_float(self.dcm_lambda, "dcm_lambda", low=0.0, high=1.0))

    @property
    def examination(self) -> np.ndarray:
        """Examination probability of each position, (k,) (ones unless ``"pbm"``)."""
        if self.click_model != "pbm":
            return np.ones(self.k)
        if self.theta is not None:
            return np.array(self.theta, dtype=np.float64)
        return _cm.default_examination(self.k, 1.0 if self.eta is None else self.eta)

    @property
    def continuation(self) -> np.ndarray:
        """Probability of going on after a click at each position, (k,) (``"dcm"``; ones --
        never stop -- for the other models, where it is unused)."""
        if self.click_model != "dcm":
            return np.ones(self.k)
        return np.full(self.k, 0.5 if self.dcm_lambda is None else self.dcm_lambda)

    @property
    def n_steps(self) -> int:
        """Length of an episode in steps (visits)."""
        return (self.world.n_ticks - self.start_tick) * self.visits_per_tick


def _unit_tuple(value, name: str, k: int) -> tuple:
    """A sequence of ``k`` probabilities as a tuple of floats (TOML lists accepted)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError(f"`{name}` must be a sequence of {k} floats in [0, 1]; got "
                        f"{type(value).__name__} {value!r}.")
    if len(value) != k:
        raise ValueError(f"`{name}` must have k = {k} entries (one per position); got "
                         f"{len(value)}.")
    return tuple(check_float(v, f"{name}[{j}]", low=0.0, high=1.0) for j, v in enumerate(value))


def resolve_config(config, *, k=None, click_model=None) -> RecommendationConfig:
    """The config of the environment: ``config`` (default ``RecommendationConfig()``) with
    ``k`` and ``click_model`` replaced when given (so that ``gym.make(...,
    k=5)`` works without building a config)."""
    if config is None:
        config = RecommendationConfig()
    if not isinstance(config, RecommendationConfig):
        raise TypeError("`config` must be a RecommendationConfig or None; got "
                        f"{type(config).__name__}.")
    changes = {name: v for name, v in (("k", k), ("click_model", click_model))
               if v is not None}
    if changes:
        import dataclasses

        config = dataclasses.replace(config, **changes)
    return config


class RecModel:
    """The world's click model as array operations over visits (shared with the vector env).

    :meth:`ctr` computes ``p(u, i, t)`` for all items with one matrix product per tick; the
    tests check it against ``World.true_ctr``, the reference.
    """

    def __init__(self, config: RecommendationConfig, world: World):
        self.config = config
        self.world = world
        w = config.world
        self.n_items = w.n_items
        self.features = np.asarray(world.item_features)
        self.birth, self.death = w.birth_array(), w.death_array()
        self.static_items = bool(np.all(self.birth <= config.start_tick)
                                 and np.all(self.death >= w.n_ticks))
        uw = np.asarray(world.user_weights, dtype=np.float64)
        cdf = np.cumsum(uw)
        self.user_cdf = cdf / cdf[-1]
        self.uniform_users = bool(np.all(uw == uw[0]))
        self._ones = np.ones(self.n_items, dtype=bool)
        self._tick_cache: dict[int, tuple] = {}
        self._static_taste = None
        self._table = False  # not computed yet
        self._best = None
        self._top = None
        self.click_model = config.click_model
        self.theta = config.examination
        self.lam = config.continuation

    def best_of_top(self, top: np.ndarray) -> np.ndarray:
        """Expected reward of the best slate from the sorted top-``k`` probabilities (n, k)."""
        c = self.config
        return _cm.best_reward(top, c.click_model, c.reward, theta=self.theta, lam=self.lam)

    def expected(self, p: np.ndarray) -> np.ndarray:
        """Expected reward of shown slates with probabilities ``p`` (n, k)."""
        c = self.config
        return _cm.expected_reward(p, c.click_model, c.reward, theta=self.theta, lam=self.lam)

    def true_slate_value(self, user, slate, tick):
        """Closed-form expected reward of slates (see ``RecommendationEnv.true_slate_value``)."""
        c, w = self.config, self.config.world
        batched = np.ndim(user) > 0 or np.ndim(tick) > 0 or np.ndim(slate) > 1
        users = np.atleast_1d(self.world._check_ids(user, "user", w.n_users))
        ticks = np.atleast_1d(self.world._check_ids(tick, "tick", w.n_ticks))
        s = self.world._check_ids(slate, "slate", w.n_items)
        if s.ndim == 1:
            s = s[None, :]
        n = max(users.size, ticks.size, s.shape[0])
        if s.ndim != 2 or s.shape[1] != c.k or s.shape[0] not in (1, n) or users.ndim != 1 \
                or ticks.ndim != 1 or users.size not in (1, n) or ticks.size not in (1, n):
            raise ValueError(f"`slate` must have shape (k,) or (n, k) with k = {c.k}, and "
                             f"`user`, `tick` be ints or arrays (n,); got shapes "
                             f"{np.shape(slate)}, {np.shape(user)}, {np.shape(tick)}.")
        users, ticks = np.broadcast_to(users, (n,)), np.broadcast_to(ticks, (n,))
        s = np.broadcast_to(s, (n, c.k))
        srt = np.sort(s, axis=1)
        bad = np.flatnonzero(np.any(srt[:, 1:] == srt[:, :-1], axis=1))
        if bad.size:
            raise ValueError(f"`slate` must hold {c.k} distinct items; got {s[bad[0]].tolist()}"
                             f" at row {bad[0]}.")
        alive = (self.birth[s] <= ticks[:, None]) & (ticks[:, None] < self.death[s])
        bad = np.flatnonzero(~alive.all(axis=1))
        if bad.size:
            j = int(bad[0])
            raise ValueError(f"`slate` items must be alive at `tick`; got {s[j].tolist()} at "
                             f"tick {ticks[j]} (row {j}).")
        p = self.world.true_ctr(users[:, None], s, ticks[:, None])
        value = self.expected(p)
        return value if batched else float(value[0])

    def shown_and_top(self, users, ticks, slate, A):
        """``(p (n, k) of the shown items, the k largest available p sorted decreasingly)``."""
        full = self._static_table()
        if full is not None:
            if self._top is None:
                self._top = top_k_sorted(self._table, np.ones(self._table.shape, bool),
                                         self.config.k)
            return full[users[:, None], slate], self._top[users]
        P = self.ctr(users, ticks)[0]
        return P[np.arange(users.size)[:, None], slate], top_k_sorted(P, A, self.config.k)

    def ticks(self, steps) -> np.ndarray:
        return self.config.start_tick + np.asarray(steps, np.int64) // self.config.visits_per_tick

    def users(self, keys, steps, *, skeys=None) -> np.ndarray:
        """Visiting users of steps ``steps`` of episodes ``keys`` (``skeys``: their visit
        stream keys, ``_stream_keys(keys, _STREAM_VISIT)``, if the caller cached them)."""
        if skeys is None:
            skeys = _b._stream_keys(keys, _STREAM_VISIT)
        u = _b._uniform2(skeys, steps, 0)
        n = self.user_cdf.size
        if self.uniform_users:  # same law as the search below, without the search
            return np.minimum((u * n).astype(np.int64), n - 1)
        return np.minimum(np.searchsorted(self.user_cdf, u, side="right"), n - 1).astype(np.int64)

    def visit(self, users, ticks):
        """``(taste (n, dim), alive (n, n_items))`` of visits; no CTRs."""
        ticks = np.asarray(ticks, np.int64)
        t0 = int(ticks[0])
        if ticks.size == 1 or (ticks == t0).all():  # the usual case: one tick for everyone
            taste, _, _, alive = self._per_tick(t0)
            return taste[users], np.broadcast_to(alive, (ticks.size, self.n_items))  # read-only
        X = np.empty((ticks.size, self.features.shape[1]))
        A = np.empty((ticks.size, self.n_items), dtype=bool)
        for t in np.unique(ticks).tolist():
            rows = np.flatnonzero(ticks == t)
            taste, _, _, alive = self._per_tick(t)
            X[rows], A[rows] = taste[users[rows]], alive
        return X, A

    def shown_and_best(self, users, ticks, slate, A):
        """``(p (n, k) of the shown items, best achievable expected clicks (n,))``."""
        full = self._static_table()
        if full is not None:
            return full[users[:, None], slate], self._best_table()[users]
        P = self.ctr(users, ticks)[0]
        return P[np.arange(users.size)[:, None], slate], top_k_sum(P, A, self.config.k)

    def _best_table(self):
        if self._best is None:
            self._best = top_k_sum(self._table, np.ones(self._table.shape, bool), self.config.k)
        return self._best

    def _per_tick(self, t: int):
        hit = self._tick_cache.get(t)
        if hit is None:
            w, c = self.world, self.config.world
            if c.drift_rate == 0:  # tastes do not move: compute them once
                if self._static_taste is None:
                    self._static_taste = w.user_taste(self.config.start_tick)
                taste = self._static_taste
            else:
                taste = w.user_taste(t)
            appeal = w.item_appeal(t)
            alive = (self.birth <= t) & (t < self.death)
            decay = alive.astype(np.float64)
            if c.ctr_halflife is not None:
                decay = np.where(alive, np.exp2(-np.maximum(t - self.birth, 0) / c.ctr_halflife),
                                 0.0)
            if len(self._tick_cache) > 16:
                self._tick_cache.clear()
            hit = self._tick_cache[t] = (taste, appeal, decay, alive)
        return hit

    def ctr(self, users, ticks):
        """``(p (n, n_items), taste (n, dim), alive (n, n_items))`` for visits
        ``(users, ticks)``."""
        users = np.asarray(users, np.int64)
        ticks = np.asarray(ticks, np.int64)
        full = self._static_table()
        if full is not None:  # p does not depend on the tick: one gather
            taste = self._per_tick(int(ticks[0]))[0]
            return full[users], taste[users], np.ones((users.size, self.n_items), dtype=bool)
        n = users.size
        uniq = np.unique(ticks)
        if uniq.size == 1:
            return self._ctr_tick(users, int(uniq[0]))
        P = np.empty((n, self.n_items))
        X = np.empty((n, self.features.shape[1]))
        A = np.empty((n, self.n_items), dtype=bool)
        for t in uniq.tolist():
            rows = np.flatnonzero(ticks == t)
            P[rows], X[rows], A[rows] = self._ctr_tick(users[rows], t)
        return P, X, A

    def _ctr_tick(self, users, t: int):
        taste, appeal, decay, alive = self._per_tick(t)
        x = taste[users]
        # einsum, not BLAS matmul: these products are small and BLAS threads thrash on a
        # busy machine (20x slower measured on 2 shared cores)
        score = np.einsum("nd,id->ni", x, self.features)
        score += appeal
        if self.config.world.click_model == "logistic":
            p = _sigmoid(score)
        else:
            p = np.clip(score, 0.0, 1.0)
        p *= decay
        return p, x, np.broadcast_to(alive, p.shape).copy()

    def _static_table(self):
        """``p(u, i)`` of every user and item when it does not depend on the tick (no taste
        drift, shocks, CTR decay or item lifetimes) and the table is small enough."""
        if self._table is False:
            c = self.config.world
            static = (c.drift_rate == 0 and not c.shocks and c.ctr_halflife is None
                      and self.static_items and c.n_users * c.n_items <= _MAX_TABLE)
            self._table = None
            if static:
                t = self.config.start_tick
                users = np.arange(c.n_users)
                self._table = np.concatenate(
                    [self._ctr_tick(users[j:j + 4096], t)[0]
                     for j in range(0, c.n_users, 4096)])
        return self._table


def _sigmoid(s: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-s))``, in place on ``s``; scipy's ``expit`` is several times slower
    here and differs from it by at most a few ulp (within 1e-15)."""
    np.negative(s, out=s)
    np.exp(s, out=s)
    s += 1.0
    return np.reciprocal(s, out=s)


def top_k_sum(P: np.ndarray, A: np.ndarray, k: int) -> np.ndarray:
    """Sum of the ``k`` largest probabilities among available items, per row."""
    Q = np.where(A, P, -np.inf)
    if k == 1:
        return Q.max(axis=1)
    part = np.partition(Q, Q.shape[1] - k, axis=1)[:, -k:]
    return part.sum(axis=1)


def top_k_sorted(P: np.ndarray, A: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest probabilities among available items per row, largest first."""
    Q = np.where(A, P, -np.inf)
    part = np.partition(Q, Q.shape[1] - k, axis=1)[:, -k:]
    return -np.sort(-part, axis=1)


def check_slate(action, k: int, n_items: int, available: np.ndarray, tick: int) -> np.ndarray:
    """Validate one slate; returns it as an int64 array (k,)."""
    if k == 1:
        if isinstance(action, np.ndarray) and action.shape == (1,):
            action = action[0]
        return np.array([_b.check_action(action, n_items, available, tick)], np.int64)
    a = np.asarray(action)
    if a.shape != (k,) or not (np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"`action` must be a slate of {k} integer item ids; got {action!r}.")
    a = a.astype(np.int64)
    bad = np.flatnonzero((a < 0) | (a >= n_items))
    if bad.size:
        raise ValueError(f"`action` items must be in [0, {n_items}); got {a[bad[0]]} at "
                         f"slot {bad[0]}.")
    if np.unique(a).size != k:
        raise ValueError(f"`action` must hold {k} distinct items; got {a.tolist()}.")
    bad = np.flatnonzero(~available[a])
    if bad.size:
        raise ValueError(f"`action` item {a[bad[0]]} (slot {bad[0]}) is not available at tick "
                         f"{tick}.")
    return a


class MaskedSlate(_b._MaskedMultiDiscrete):
    """``MultiDiscrete([n_items] * k)`` whose ``sample()`` draws ``k`` distinct items among the
    currently available ones (see :class:`simulator._bandit.MaskedDiscrete` for why)."""

    def _sample_available(self, current):
        k = self.shape[-1]
        r = self.np_random.random(current.shape)
        r[~current] = 2.0
        pick = np.argpartition(r, k - 1, axis=-1)[..., :k]
        return pick.astype(self.dtype)


class RecommendationEnv(gym.Env):
    """``recloop/Recommendation-v0``: a user visit per step; show a slate, count the clicks.

    Observation: ``{"user": () int64, "context": (dim,) float64 (the user's taste at the
    tick), "available": (n_items,) bool, "tick": () int64}``. Action: an item
    (``Discrete(n_items)``) when ``k == 1``, else ``MultiDiscrete([n_items] * k)`` of distinct
    available items. Reward: the number of clicks (or 1.0 if any click happened, with
    ``reward="any_click"``), under the config's ``click_model``. ``info``: ``ctr`` (k,) the
    true click (attraction) probabilities ``p(u, i, t)`` of the shown items, ``item_ctr``
    (n_items,) those of every item (0 for dead items), ``expected_reward`` (the slate's
    expected reward under the click model: the sum of ``ctr`` for independent clicks),
    ``best_expected_reward`` (the best slate's), ``clicks`` (k,) bool, the clicks per position,
    ``user`` and ``tick`` of the visit just played.

    Parameters
    ----------
    config : RecommendationConfig or None
        ``None``: ``RecommendationConfig()`` (the ``viadeo_like`` world, k = 1).
    k : int, optional
        Slate size, replacing ``config.k`` (``gym.make("recloop/Recommendation-v0", k=5)``).
    click_model : {"independent", "pbm", "cascade", "dcm"}, optional
        Replaces ``config.click_model``.
    render_mode : None
        No rendering.

    Notes
    -----
    The world (``env.unwrapped.world``) is built once; ``reset`` restores it to its pristine
    state when ``add_clicks`` is set. Ground truth: ``env.unwrapped.world.true_ctr``.
    """

    metadata = {"render_modes": []}

    def __init__(self, config=None, *, k=None, click_model=None, render_mode=None):
        self.config = resolve_config(config, k=k, click_model=click_model)
        _b._check_render_mode(render_mode)
        self.render_mode = None
        c = self.config
        self._pristine = World(c.world, seed=c.world_seed)
        self.world = self._pristine
        self.model = RecModel(c, self.world)
        n_items, k = c.world.n_items, c.k
        source = None if self.model.static_items else self._current_mask
        if k == 1:
            self.action_space = _b.MaskedDiscrete(n_items, source)
        else:
            self.action_space = MaskedSlate(np.full(k, n_items), self._current_mask)
        self.observation_space = spaces.Dict({
            "user": spaces.Box(0, c.world.n_users - 1, shape=(), dtype=np.int64),
            "context": spaces.Box(-np.inf, np.inf, shape=(c.world.dim,), dtype=np.float64),
            "available": spaces.Box(0, 1, shape=(n_items,), dtype=np.bool_),
            "tick": spaces.Box(0, c.world.n_ticks - 1, shape=(), dtype=np.int64),
        })
        self._key = None
        self._n_steps = c.n_steps
        # independent clicks counted: the historical path, kept bit for bit
        self._legacy = c.click_model == "independent" and c.reward == "clicks"
        self._theta_l = self.model.theta.tolist()
        self._lam_l = self.model.lam.tolist()

    @property
    def key(self):
        return self._key

    def true_slate_value(self, user, slate, tick):
        """Expected reward of showing ``slate`` to ``user`` at ``tick``, in closed form.

        Parameters
        ----------
        user : int or array (n,) of int
        slate : array (k,) or (n, k) of distinct item ids alive at ``tick``
        tick : int or array (n,) of int

        Returns
        -------
        float, or array (n,) when any argument is batched.

        Notes
        -----
        ``sum_j P(click at j)`` (reward ``"clicks"``) or ``P(any click)`` under the config's
        click model, with the world's true ``p(u, s_j, t)`` (see
        :func:`simulator._click_models.expected_reward`). The tests check it against the
        mean reward of many episodes.
        """
        return self.model.true_slate_value(user, slate, tick)

    def _current_mask(self):
        if self._key is None:
            return None
        return self._A[min(self._n - self._n0, self._A.shape[0] - 1)]

    def _fill_block(self, n0: int) -> None:
        m = self.model
        steps = np.arange(n0, min(n0 + _BLOCK, self.config.n_steps), dtype=np.int64)
        self._n0 = n0
        self._T = m.ticks(steps)
        self._U = m.users(self._key, steps)
        self._P, self._X, self._A = m.ctr(self._U, self._T)
        # observations and infos are read-only views of the block (0-d views for the
        # scalars): no per-step copies, and no object shared between two observations
        # (Gymnasium's checker asks for that)
        for arr in (self._X, self._A, self._P, self._U, self._T):
            arr.setflags(write=False)
        if self._legacy:
            self._best = top_k_sum(self._P, self._A, self.config.k)
        else:
            self._best = m.best_of_top(top_k_sorted(self._P, self._A, self.config.k))
        self._C = np.zeros(steps.size, dtype=bool)  # clicks of the k == 1 steps
        # Python lists for the per-step scalars (indexing numpy arrays costs more)
        self._Tl, self._Ul, self._bestl = self._T.tolist(), self._U.tolist(), self._best.tolist()

    def _obs(self, i=None) -> dict:
        i = self._n - self._n0 if i is None else i
        return {"user": self._U[i, ...], "context": self._X[i], "available": self._A[i],
                "tick": self._T[i, ...]}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.config.add_clicks:
            self.world = copy.deepcopy(self._pristine)
            self.model.world = self.world
            self.model._tick_cache.clear()
        self._key = _b.episode_key(self.np_random)
        self._click_skey = _b._stream_key(self._key, _STREAM_REC_CLICK)
        self._cont_skey = _b._stream_key(self._key, _STREAM_REC_CONTINUE)
        self._hc_tick = -1
        self._n = 0
        self._h1_tick = -1
        self._fill_block(0)
        return self._obs(), {}

    def step(self, action):
        c = self.config
        if self._key is None or self._n >= self._n_steps:
            raise RuntimeError("call `reset` before `step` (and after the episode ends).")
        i = self._n - self._n0
        t, user = self._Tl[i], self._Ul[i]
        n_items = self.model.n_items
        row = self._P[i]
        if t != self._h1_tick:  # the first half of the click hash depends on the tick only
            self._h1_tick, self._h1 = t, _b._mix_int(self._click_skey ^ ((t * _b._G) & _b._M64))
        h1 = self._h1
        if not self._legacy:
            return self._step_model(action, i, t, user, row, h1)
        if c.k == 1:  # the common case, without slate arrays
            a = _b.check_action(action, n_items, self._A[i], t)
            q = float(row[a])
            hit = _b._second_half(h1, user * n_items + a) < q
            n_clicks = int(hit)
            # views of the block (one cell of a per-block buffer for the click): no per-step
            # allocations, and no memory shared between two steps' infos
            self._C[i] = hit
            slate, p, clicks = [a], row[a:a + 1], self._C[i:i + 1]
            expected = q
        else:
            slate = check_slate(action, c.k, n_items, self._A[i], t)
            p = row[slate]
            base = user * n_items
            # one scalar hash per shown item: cheaper than a numpy call for a few items
            hits = [_b._second_half(h1, base + s) < q
                    for s, q in zip(slate.tolist(), p.tolist(), strict=True)]
            n_clicks = sum(hits)
            clicks = np.array(hits)
            expected = float(p.sum())
        if c.add_clicks and n_clicks:
            self.world.add_edges(np.full(n_clicks, user), np.asarray(slate)[clicks], t,
                                 "recommended")
        info = {"ctr": p, "item_ctr": row, "expected_reward": expected,
                "best_expected_reward": self._bestl[i], "clicks": clicks, "user": user,
                "tick": t}
        self._n += 1
        truncated = self._n >= self._n_steps
        if truncated:  # the episode is over: repeat the last observation
            obs = self._obs(i)
        else:
            if self._n - self._n0 >= self._T.size:
                self._fill_block(self._n)
            obs = self._obs()
        return obs, float(n_clicks), False, truncated, info

    def _step_model(self, action, i: int, t: int, user: int, row, h1: int):
        """``step`` under a position-aware click model or the ``any_click`` reward."""
        c = self.config
        n_items = self.model.n_items
        if c.k == 1:
            slate = np.array([_b.check_action(action, n_items, self._A[i], t)], np.int64)
        else:
            slate = check_slate(action, c.k, n_items, self._A[i], t)
        p = row[slate]
        base = user * n_items
        items, ps = slate.tolist(), p.tolist()
        # one scalar hash per shown item (as the independent path does)
        coins = [_b._second_half(h1, base + s) for s in items]
        model = c.click_model
        if model in ("independent", "pbm"):
            hits = [u < th * q for u, th, q in zip(coins, self._theta_l, ps, strict=True)]
        else:  # cascade, dcm: scan top-down
            hits = [False] * c.k
            if model == "dcm" and t != self._hc_tick:
                self._hc_tick = t
                self._hc = _b._mix_int(self._cont_skey ^ ((t * _b._G) & _b._M64))
            for j, (u, q) in enumerate(zip(coins, ps, strict=True)):
                if u < q:
                    hits[j] = True
                    if model == "cascade" or not (
                            _b._second_half(self._hc, base + items[j]) < self._lam_l[j]):
                        break
        n_clicks = sum(hits)
        clicks = np.array(hits)
        if c.add_clicks and n_clicks:
            self.world.add_edges(np.full(n_clicks, user), slate[clicks], t, "recommended")
        reward = float(n_clicks) if c.reward == "clicks" else float(n_clicks > 0)
        info = {"ctr": p, "item_ctr": row, "expected_reward": _expected_scalar(
                    ps, model, c.reward, self._theta_l, self._lam_l),
                "best_expected_reward": self._bestl[i], "clicks": clicks, "user": user,
                "tick": t}
        self._n += 1
        truncated = self._n >= self._n_steps
        if truncated:
            obs = self._obs(i)
        else:
            if self._n - self._n0 >= self._T.size:
                self._fill_block(self._n)
            obs = self._obs()
        return obs, reward, False, truncated, info


def _expected_scalar(ps, model: str, reward: str, theta, lam) -> float:
    """:func:`simulator._click_models.expected_reward` of one slate on Python floats (a numpy
    call per step would cost more than the step); equal to it within rounding."""
    if reward == "any_click":
        miss = 1.0
        for j, q in enumerate(ps):
            miss *= 1.0 - (theta[j] * q if model == "pbm" else q)
        return 1.0 - miss
    if model == "independent":
        return float(sum(ps))
    if model == "pbm":
        return float(sum(th * q for th, q in zip(theta, ps, strict=True)))
    total, reach = 0.0, 1.0
    for j, q in enumerate(ps):
        total += reach * q
        reach *= 1.0 - q if model == "cascade" else 1.0 - (1.0 - lam[j]) * q
    return total
