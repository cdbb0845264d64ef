"""The BRED linear bandit test bed (``recloop/LinearBandit-v0``) and its dynamic variant.

Model (Mary, Preux & Nicol 2014, section 5; DESIGN.md source 4)
---------------------------------------------------------------
*Contexts.* ``x_t`` in ``{0, 1}^d``: with ``intercept=True`` (default) ``x_t[0] = 1`` and the
other ``d - 1`` coordinates are independent Bernoulli(``context_p``); without intercept all
``d`` coordinates are Bernoulli(``context_p``). The distribution is discrete with ``2^(d-1)``
atoms (512 for ``d = 10``), which makes the value of a static policy computable *exactly* by
enumeration (:func:`simulator.static_policy_value`).

*Arms.* ``n_universal`` "universal" arms have a constant CTR drawn in ``universal_ctr`` and
zero context weights; the other arms are "specific": a low base CTR drawn in
``specific_ctr`` plus ``n_nonzero`` positive weights (drawn in ``weight``) on randomly chosen
non-intercept coordinates. Universal arms are spread evenly over the arm indices (arm ``a``
is universal iff ``ceil(a U / K) < ceil((a + 1) U / K)``; arms 0, 2, 5, 7 for the default
``U = 4, K = 10``). Arm parameters are a deterministic function of ``arm_seed``: the world is
fixed by the config; an episode's seed only drives contexts and clicks.

*Click probability.* ``p(a, x, t) = clip(decay_a(t) * (b_a + w_a . x), 0, 1)`` while arm ``a``
is alive (``birth_a <= t < death_a``), else 0; ``decay_a(t) = 2^(-(t - birth_a) / half_life)``
(1 when ``half_life`` is ``None``).

*Large action spaces with embeddings* (``n_embedding_features = F > 0``). Arm ``a`` carries a
discrete embedding ``e_a`` in ``{0..C-1}^F`` (``C = n_categories``, each coordinate uniform,
drawn from ``arm_seed``). Its parameters are those of its embedding plus a residual of its
own: ``b_a = mean_f b'_{f, e_af} + residual * u_a`` and ``w_a = mean_f w'_{f, e_af}``, where the
``F * C`` category effects ``(b', w')`` are the arms of the same config with ``n_arms = F * C``
(universal and specific alike) and ``u_a`` is uniform in [-1, 1]. With ``residual = 0`` the
reward depends on the action only through its embedding (MIPS's "no direct effect"); the
residual breaks that on purpose. Exact values stay cheap at ``K = 10,000``: the CTR is still
linear in the context.

*Dynamic variant* (``lifetime`` set). Without ``n_alive`` every arm is born at tick 0 and dies
at ``lifetime`` (end of the episode). With ``n_alive < n_arms`` arms are *replaced*: arm ``a``
is born at ``floor((a + 1 - n_alive) * lifetime / n_alive)`` so about ``n_alive`` arms are
alive at every tick (arms ``< n_alive`` were born before tick 0 and are already ageing); the
episode is truncated at :attr:`LinearBanditConfig.horizon`, when the supply of arms runs out.

*Common random numbers.* Every random draw of an episode is a counter-based hash
(splitmix64) of the episode key and the entity: the context bit ``(t, j)`` and the click
uniform ``(t, a)``. Two agents run with the same seed therefore meet the same contexts and,
when they pull the same arm at the same tick, the same click.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, fields

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from recloop_base.fields import check_fields, documented, spec
from recloop_base.validation import ArgumentTypeError, ArgumentValueError, check_int

__all__ = ["LinearBanditConfig", "LinearBanditEnv"]

# -- counter-based hashing (common random numbers) ----------------------------------------

_M64 = (1 << 64) - 1
_G = 0x9E3779B97F4A7C15
_STREAM_CONTEXT = 1
_STREAM_CLICK = 2
_STREAM_ARM = 3
_STREAM_EMBEDDING = 4
_TO_UNIT = 2.0 ** -53


def _mix_int(x: int) -> int:
    """splitmix64 finaliser on a Python int (bit-identical to :func:`_mix`)."""
    x &= _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, element-wise on uint64 arrays (wrap-around arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _stream_key(key: int, stream: int) -> int:
    return _mix_int((key + stream * _G) & _M64)


def _stream_keys(key, stream: int) -> np.ndarray:
    """Array twin of :func:`_stream_key` (same shape as ``key``)."""
    k = np.asarray(key, dtype=np.uint64)
    return _mix(np.atleast_1d(k + np.uint64((stream * _G) & _M64))).reshape(k.shape)


def _hash2(skey, first, second) -> np.ndarray:
    """uint64 hash of ``(skey, first, second)``; arguments broadcast (``skey`` from _stream_key)."""
    skey = np.atleast_1d(np.asarray(skey, dtype=np.uint64))
    first = np.atleast_1d(np.asarray(first, dtype=np.uint64))
    second = np.atleast_1d(np.asarray(second, dtype=np.uint64))
    h = _mix(skey ^ (first * np.uint64(_G)))
    return _mix(h + second * np.uint64(0xD1B54A32D192ED03) + np.uint64(1))


def _uniform2(skey, first, second) -> np.ndarray:
    """Uniforms in [0, 1) indexed by ``(first, second)`` under stream key ``skey``."""
    shape = np.broadcast_shapes(np.shape(skey), np.shape(first), np.shape(second))
    u = (_hash2(skey, first, second) >> np.uint64(11)).astype(np.float64) * _TO_UNIT
    return u.reshape(shape)


def _uniform2_int(skey: int, first: int, second: int) -> float:
    """Scalar twin of :func:`_uniform2` in pure Python (fast for one draw per step)."""
    return _second_half(_mix_int(skey ^ ((first * _G) & _M64)), second)


def _second_half(h: int, second: int) -> float:
    """The part of :func:`_uniform2_int` after the first counter (cacheable ``h``)."""
    h = _mix_int(h + ((second * 0xD1B54A32D192ED03) & _M64) + 1)
    return (h >> 11) * _TO_UNIT


def episode_key(rng: np.random.Generator) -> int:
    """Draw the 63-bit key of an episode from ``rng`` (the only draw an episode needs)."""
    return int(rng.integers(0, 2**63, dtype=np.int64))


# -- configuration --------------------------------------------------------------------------


def _check_range(name, value, lo, hi):
    rule = f"a (low, high) pair of numbers with {lo} <= low <= high <= {hi}"
    if (not isinstance(value, tuple) or len(value) != 2
            or not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value)):
        raise ArgumentTypeError(name, rule, repr(value))
    a, b = float(value[0]), float(value[1])
    if not (math.isfinite(a) and math.isfinite(b) and lo <= a <= b <= hi):
        raise ArgumentValueError(name, rule, repr(value))


@documented
@dataclass(frozen=True)
class LinearBanditConfig:
    """Configuration of the linear bandit test bed (validated, immutable, hashable).

    Raises
    ------
    TypeError, ValueError
        On a wrong type or an out-of-range value: a
        :class:`recloop_base.validation.ArgumentError` naming the field, its rule and the
        value received.
    """

    dim: int = spec(10, doc="Context dimension ``d`` (including the intercept coordinate).",
                    low=1, high=21)
    n_arms: int = spec(10, doc="Total number of arms ``K`` (the size of the action space).",
                       low=1)
    n_universal: int = spec(4, doc="Number of universal arms (at most ``n_arms``).", low=0)
    n_nonzero: int = spec(2, doc="Non-zero context weights of a specific arm, in [1, number "
                          "of non-intercept features].", low=0)
    universal_ctr: tuple[float, float] = spec(
        (0.3, 0.4), doc="Range of the constant CTR of universal arms, ``0 <= low <= high <= "
        "1``.")
    specific_ctr: tuple[float, float] = spec(
        (0.0, 0.05), doc="Range of the base CTR of specific arms, ``0 <= low <= high <= 1``.")
    weight: tuple[float, float] = spec(
        (0.15, 0.3), doc="Range of the non-zero context weights, within [-1, 1].")
    context_p: float = spec(0.5, doc="Probability that a (non-intercept) context bit is 1.",
                            low=0.0, high=1.0)
    intercept: bool = spec(True, doc="Whether coordinate 0 of the context is the constant 1.")
    lifetime: int | None = spec(None, doc="Ticks an arm stays alive (``None``: forever).",
                                low=1)
    n_alive: int | None = spec(None, doc="Arms alive at a time when arms are replaced "
                               "(requires ``lifetime``; at most ``n_arms``). ``None``: no "
                               "replacement.", low=1)
    half_life: float | None = spec(None, doc="Half-life of an arm's CTR in ticks since its "
                                   "birth (``None``: no decay).", low=0.0, low_open=True)
    arm_seed: int = spec(0, doc="Seed of the arms' parameters (the world).", low=0,
                         high=2**63 - 1)
    n_embedding_features: int = spec(0, doc="``F``, features of the arms' discrete embeddings "
                                     "(0: no embeddings, the arms are drawn independently as "
                                     "in the BRED test bed).", low=0, high=8)
    n_categories: int = spec(10, doc="``C``, categories of each embedding feature (used when "
                             "``F > 0``).", low=1, high=1000)
    residual: float = spec(0.0, doc="Half-width of the arm's own base-CTR residual ``u_a`` in "
                           "[-residual, residual] (used when ``F > 0``; 0: the reward depends "
                           "on the arm only through its embedding).", low=0.0, high=1.0)

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, list):  # accept lists from TOML; store tuples (hashable)
                object.__setattr__(self, f.name, tuple(v))
        if not isinstance(self.intercept, bool):
            raise ArgumentTypeError("intercept", "a bool", repr(self.intercept))
        check_fields(self)
        check_int(self.n_universal, "n_universal", low=0, high=self.n_arms)
        n_feat = self.dim - int(self.intercept)
        if self.n_universal < self.n_arms:
            if n_feat < 1:
                raise ArgumentValueError("dim", ">= 2 when `intercept` is True and there are "
                                         "specific arms", str(self.dim))
            check_int(self.n_nonzero, "n_nonzero", low=1, high=n_feat)
        _check_range("universal_ctr", self.universal_ctr, 0.0, 1.0)
        _check_range("specific_ctr", self.specific_ctr, 0.0, 1.0)
        _check_range("weight", self.weight, -1.0, 1.0)
        if self.n_alive is not None:
            check_int(self.n_alive, "n_alive", low=1, high=self.n_arms)
        if self.n_alive is not None and self.lifetime is None:
            raise ArgumentValueError("n_alive", "None unless `lifetime` is set (arms are only "
                                     "replaced when they die)", str(self.n_alive))
        if self.n_alive is not None and self.lifetime < self.n_alive:
            raise ArgumentValueError("lifetime", f">= `n_alive` ({self.n_alive}) so that "
                                     "births are at least one tick apart", str(self.lifetime))

    @property
    def horizon(self) -> int | None:
        """First tick at which the episode is truncated (``None``: never)."""
        if self.lifetime is None:
            return None
        if self.n_alive is None:
            return self.lifetime
        return (self.n_arms + 1 - self.n_alive) * self.lifetime // self.n_alive

    @property
    def is_static(self) -> bool:
        """Whether the CTR function does not depend on time."""
        return self.lifetime is None and self.half_life is None


@dataclass(frozen=True, eq=False)
class ArmTable:
    """The arms' parameters (ground truth), read-only arrays of length ``n_arms``."""

    base: np.ndarray       # (K,) base CTR b_a
    weights: np.ndarray    # (K, d) context weights w_a
    universal: np.ndarray  # (K,) bool
    birth: np.ndarray      # (K,) int64 first tick alive
    death: np.ndarray      # (K,) int64 first tick dead (int64 max when immortal)
    embeddings: np.ndarray | None = None  # (K, F) int64 discrete embeddings, or None


@functools.lru_cache(maxsize=64)
def arm_table(config: LinearBanditConfig) -> ArmTable:
    """The (cached) parameters of every arm of ``config``."""
    K, d = config.n_arms, config.dim
    a = np.arange(K)
    U = config.n_universal
    universal = -((-a * U) // K) < -((-(a + 1) * U) // K) if K else np.zeros(0, bool)
    skey = _stream_key(config.arm_seed, _STREAM_ARM)
    # column 0: base CTR; columns 1..: feature choice keys; column -1: weight draws offset
    n_feat = d - int(config.intercept)
    u = _uniform2(skey, a[:, None], np.arange(1 + 2 * max(n_feat, 1))[None, :])
    lo_u, hi_u = config.universal_ctr
    lo_s, hi_s = config.specific_ctr
    base = np.where(universal, lo_u + (hi_u - lo_u) * u[:, 0], lo_s + (hi_s - lo_s) * u[:, 0])
    weights = np.zeros((K, d))
    if n_feat >= 1 and config.n_nonzero >= 1:
        order = np.argsort(u[:, 1:1 + n_feat], axis=1, kind="stable")[:, :config.n_nonzero]
        lo_w, hi_w = config.weight
        w = lo_w + (hi_w - lo_w) * u[:, 1 + n_feat:1 + n_feat + config.n_nonzero]
        rows = np.repeat(a, config.n_nonzero)
        weights[rows, order.ravel() + int(config.intercept)] = w.ravel()
        weights[universal] = 0.0
    never = np.iinfo(np.int64).max
    if config.lifetime is None:
        birth = np.zeros(K, np.int64)
        death = np.full(K, never, np.int64)
    elif config.n_alive is None:
        birth = np.zeros(K, np.int64)
        death = np.full(K, config.lifetime, np.int64)
    else:
        birth = ((a + 1 - config.n_alive) * config.lifetime) // config.n_alive
        birth = birth.astype(np.int64)
        death = birth + config.lifetime
    embeddings = None
    if config.n_embedding_features > 0:
        base, weights, universal, embeddings = _embedded_arms(config)
    for arr in (base, weights, universal, birth, death) + (() if embeddings is None
                                                           else (embeddings,)):
        arr.setflags(write=False)
    return ArmTable(base=base, weights=weights, universal=universal, birth=birth, death=death,
                    embeddings=embeddings)


def _embedded_arms(config: LinearBanditConfig):
    """Arms defined by their embeddings (see the module docstring), vectorised over arms."""
    import dataclasses

    F, C, K = config.n_embedding_features, config.n_categories, config.n_arms
    effects = arm_table(dataclasses.replace(
        config, n_arms=F * C, n_universal=min(config.n_universal, F * C),
        n_embedding_features=0, residual=0.0, lifetime=None, n_alive=None, half_life=None))
    a = np.arange(K)
    u = _uniform2(_stream_key(config.arm_seed, _STREAM_EMBEDDING), a[:, None],
                  np.arange(F + 1)[None, :])
    emb = np.minimum((u[:, :F] * C).astype(np.int64), C - 1)           # (K, F)
    virtual = emb + C * np.arange(F)[None, :]                          # rows of `effects`
    base = effects.base[virtual].mean(axis=1) + config.residual * (2 * u[:, F] - 1)
    weights = effects.weights[virtual].mean(axis=1)                    # (K, d)
    universal = effects.universal[virtual].all(axis=1)
    return base, weights, universal, emb


# -- the model as array functions (shared by the env, the vector env, logs and truth) --------


def contexts(config: LinearBanditConfig, key, ticks) -> np.ndarray:
    """Contexts at ``ticks`` of episode(s) ``key``: 0/1 floats, shape ``broadcast + (d,)``.

    ``key`` is an int or a uint64 array broadcastable with ``ticks`` (one key per episode).
    """
    ticks = np.asarray(ticks, dtype=np.int64)
    skey = _stream_keys(key, _STREAM_CONTEXT)
    x = _uniform2(skey[..., None], ticks[..., None], np.arange(config.dim)) < config.context_p
    x = x.astype(np.float64)
    if config.intercept:
        x[..., 0] = 1.0
    return x


def click_uniforms(key, ticks, arms) -> np.ndarray:
    """The click uniform of each ``(tick, arm)`` of episode(s) ``key`` (all broadcast)."""
    return _uniform2(_stream_keys(key, _STREAM_CLICK), np.asarray(ticks, np.int64),
                     np.asarray(arms, np.int64))


def alive(config: LinearBanditConfig, ticks) -> np.ndarray:
    """Availability mask ``ticks.shape + (K,)``."""
    tab = arm_table(config)
    t = np.asarray(ticks, dtype=np.int64)[..., None]
    return (tab.birth <= t) & (t < tab.death)


def true_ctr(config: LinearBanditConfig, x, ticks, arms=None) -> np.ndarray:
    """True click probabilities ``x.shape[:-1] + (K,)`` of every arm; 0 for dead arms.

    ``arms`` (optional index array) restricts the computation to those columns (the others
    are returned as 0): the dynamic world has a few tens of live arms among hundreds.
    """
    tab = arm_table(config)
    x = np.asarray(x, dtype=np.float64)
    cols = slice(None) if arms is None else np.asarray(arms, dtype=np.int64)
    base, birth, death = tab.base[cols], tab.birth[cols], tab.death[cols]
    p = np.einsum("...d,kd->...k", x, tab.weights[cols]) + base  # no BLAS threads (see _envs)
    t = np.asarray(ticks, dtype=np.int64)[..., None]
    if config.half_life is not None:
        p = p * np.exp2(-(t - birth) / config.half_life)
    p = np.clip(p, 0.0, 1.0)
    if config.lifetime is not None:
        p = np.where((birth <= t) & (t < death), p, 0.0)
    if arms is None:
        return p
    out = np.zeros(p.shape[:-1] + (config.n_arms,))
    out[..., cols] = p
    return out


def arms_alive_between(config: LinearBanditConfig, t0: int, t1: int) -> np.ndarray | None:
    """Indices of the arms alive at some tick of ``[t0, t1)`` (``None``: all of them)."""
    if config.lifetime is None:
        return None
    tab = arm_table(config)
    return np.flatnonzero((tab.birth < t1) & (tab.death > t0))


def regime(config: LinearBanditConfig, ticks) -> np.ndarray:
    """Index of the drift regime of each tick: the number of arm births up to it (0 if static)."""
    t = np.asarray(ticks, dtype=np.int64)
    if config.lifetime is None or config.n_alive is None:
        return np.zeros(t.shape, np.int64)
    tab = arm_table(config)
    return np.searchsorted(tab.birth, t, side="right").astype(np.int64) - config.n_alive


def resolve_config(config) -> LinearBanditConfig:
    """``None`` -> default config, a preset name -> that preset, a config -> itself."""
    if config is None:
        return LinearBanditConfig()
    if isinstance(config, str):
        from simulator._presets import preset  # late import: presets import this module
        config = preset(config)
    if not isinstance(config, LinearBanditConfig):
        raise TypeError("`config` must be a LinearBanditConfig, a preset name or None; "
                        f"got {type(config).__name__}.")
    return config


def check_action(action, n_actions: int, available: np.ndarray, tick: int) -> int:
    """Validate one action; returns it as an int."""
    if type(action) in _PLAIN_INTS:  # the usual case, without the ABC check below
        a = int(action)
        if 0 <= a < n_actions and available[a]:
            return a
    if isinstance(action, np.ndarray) and action.shape == ():
        action = action.item()
    if isinstance(action, (bool, np.bool_)) or not isinstance(action, numbers.Integral):
        raise ValueError(f"`action` must be an integer arm index; got {action!r}.")
    a = int(action)
    if not 0 <= a < n_actions:
        raise ValueError(f"`action` must be in [0, {n_actions}); got {a}.")
    if not available[a]:
        raise ValueError(f"`action` {a} is not an available arm at tick {tick}.")
    return a


# -- the environment ------------------------------------------------------------------------

_PLAIN_INTS = (int, np.int64, np.int32)


class MaskedDiscrete(spaces.Discrete):
    """``Discrete(n)`` whose ``sample()`` without a mask draws among the currently available
    actions of its environment.

    Gymnasium's tools (``check_env``, ``benchmark_step``, random agents) call
    ``action_space.sample()`` and step with the result; without this, a random action in a
    world where arms come and go would usually be an unavailable arm, which ``step`` rejects
    with ``ValueError``. Membership (``contains``) is unchanged: any index in range.
    """

    def __init__(self, n: int, mask_source=None, seed=None):
        super().__init__(n, seed=seed)
        self._mask_source = mask_source

    def sample(self, mask=None, probability=None):
        if mask is None and probability is None and self._mask_source is not None:
            current = self._mask_source()
            if current is not None and current.any():
                # uniform among the available actions (Discrete.sample(mask) does the same,
                # ten times slower: it validates the mask on every call)
                idx = np.flatnonzero(current)
                return self.start + idx[int(self.np_random.integers(idx.size))]
        return super().sample(mask=mask, probability=probability)



class _MaskedMultiDiscrete(spaces.MultiDiscrete):
    """``MultiDiscrete`` whose ``sample()`` without a mask or probability draws among the
    actions currently available (``_sample_available(current)``, one rule per subclass)."""

    def __init__(self, nvec, mask_source=None, seed=None):
        super().__init__(nvec, seed=seed)
        self._mask_source = mask_source

    def sample(self, mask=None, probability=None):
        current = self._mask_source() if self._mask_source is not None else None
        if mask is not None or probability is not None or current is None:
            return super().sample(mask=mask, probability=probability)
        return self._sample_available(current)


def _check_render_mode(render_mode) -> None:
    """No environment here renders: ``render_mode`` must be None."""
    if render_mode is not None:
        raise ValueError(f"`render_mode` must be None (no rendering); got {render_mode!r}.")


_BLOCK = 512


class LinearBanditEnv(gym.Env):
    """``recloop/LinearBandit-v0``: the BRED linear contextual bandit (see the module doc).

    Observation: ``{"context": (d,) float64, "available": (K,) bool mask, "tick": () int64}``.
    Action: ``Discrete(K)``, an available arm. Reward: 1.0 on a click, else 0.0.
    ``info`` of ``step``: ``ctr`` (K,) the true click probabilities of all arms at the round
    just played (0 for unavailable arms), ``expected_reward`` (the chosen arm's),
    ``best_expected_reward`` (the best available arm's) and ``tick`` (the round played).
    The episode never terminates; it is truncated at ``config.horizon`` when that is set.

    Parameters
    ----------
    config : LinearBanditConfig, str or None
        The test bed (a preset name such as ``"bred_linear"`` or ``"dynamic_news"`` is looked
        up; ``None`` is the default ``LinearBanditConfig()``).
    render_mode : None
        No rendering.
    """

    metadata = {"render_modes": []}

    def __init__(self, config=None, *, render_mode=None):
        self.config = resolve_config(config)
        _check_render_mode(render_mode)
        self.render_mode = None
        c = self.config
        self.n_actions = c.n_arms
        # arms that come and go need a masked sample(); a static world does not (faster)
        self.action_space = MaskedDiscrete(
            c.n_arms, None if c.lifetime is None else self._current_mask)
        self.observation_space = spaces.Dict({
            "context": spaces.Box(0.0, 1.0, shape=(c.dim,), dtype=np.float64),
            # a bool Box rather than MultiBinary (int8): the same dtype as BanditLog.available,
            # so that `~available` means the same thing to an agent online and in replay.
            "available": spaces.Box(0, 1, shape=(c.n_arms,), dtype=np.bool_),
            "tick": spaces.Box(0, np.iinfo(np.int64).max, shape=(), dtype=np.int64),
        })
        self.arms = arm_table(c)
        self._key = None
        self._tick = 0

    # ground truth on env.unwrapped
    @property
    def key(self) -> int | None:
        """The counter-based key of the current episode (set by ``reset``)."""
        return self._key

    @property
    def tick(self) -> int:
        return self._tick

    def _current_mask(self):
        return None if self._key is None else self._A[self._tick - self._t0]

    def current_ctr(self) -> np.ndarray:
        """True click probabilities of all arms for the current observation."""
        return self._P[self._tick - self._t0].copy()

    def _fill_block(self, t0: int) -> None:
        c = self.config
        ticks = np.arange(t0, t0 + _BLOCK, dtype=np.int64)
        self._t0 = t0
        self._X = contexts(c, self._key, ticks)
        self._P = true_ctr(c, self._X, ticks, arms_alive_between(c, t0, t0 + _BLOCK))
        self._A = alive(c, ticks)
        self._best = np.max(np.where(self._A, self._P, -np.inf), axis=1, initial=-np.inf)
        for arr in (self._X, self._A):
            arr.setflags(write=False)

    def _obs(self) -> dict:
        # read-only views of the block: no per-step copies, and agents cannot corrupt it
        i = self._tick - self._t0
        return {"context": self._X[i], "available": self._A[i],
                "tick": np.array(self._tick, dtype=np.int64)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._key = episode_key(self.np_random)
        self._click_skey = _stream_key(self._key, _STREAM_CLICK)
        self._tick = 0
        self._fill_block(0)
        return self._obs(), {}

    def step(self, action):
        if self._key is None:
            raise RuntimeError("call `reset` before `step`.")
        t = self._tick
        i = t - self._t0
        a = check_action(action, self.n_actions, self._A[i], t)
        ctr = self._P[i]
        p = float(ctr[a])
        reward = 1.0 if _uniform2_int(self._click_skey, t, a) < p else 0.0
        info = {"ctr": ctr.copy(), "expected_reward": p,
                "best_expected_reward": float(self._best[i]), "tick": t}
        self._tick = t + 1
        if self._tick - self._t0 >= _BLOCK:
            self._fill_block(self._tick)
        horizon = self.config.horizon
        truncated = horizon is not None and self._tick >= horizon
        return self._obs(), reward, False, truncated, info


# -- presets ----------------------------------------------------------------------------------


def _bred_linear() -> LinearBanditConfig:
    """The BRED test bed (Mary, Preux & Nicol 2014): 10 arms, 4 universal, 6 specific, d = 10."""
    return LinearBanditConfig()


def _dynamic_news() -> LinearBanditConfig:
    """Dynamic news: 25 arms alive at a time, each for 500 ticks, CTR half-life 250 ticks.

    400 arms in all (160 universal), a new arm every 20 ticks; horizon 7,520 ticks.
    """
    return LinearBanditConfig(n_arms=400, n_universal=160, lifetime=500, n_alive=25,
                              half_life=250.0)


def _large_actions() -> LinearBanditConfig:
    """Large action space with embeddings: 1,000 arms, each with a 2-feature discrete
    embedding of 10 categories per feature (100 possible embeddings), no residual (MIPS's
    assumption holds; set ``residual`` to break it, ``n_arms`` up to 10,000 and more)."""
    return LinearBanditConfig(n_arms=1000, n_embedding_features=2, n_categories=10,
                              residual=0.0)


def _register_presets() -> None:
    from simulator._presets import PRESETS, register_preset

    for name, factory in (("bred_linear", _bred_linear), ("dynamic_news", _dynamic_news),
                          ("large_actions", _large_actions)):
        if name not in PRESETS:
            register_preset(name, factory)


_register_presets()
