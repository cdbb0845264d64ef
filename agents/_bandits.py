"""Bandit policies: UniformRandom, UCB1, EpsilonGreedy, LinUCB, ThompsonSampling.

All follow the protocol of :mod:`agents._base`: ``reset(rng=None)``, ``act(observation)``,
``update(observation, action, reward)`` and, where the policy defines it,
``action_probabilities(observation)``. The number of arms ``K`` and the context dimension
``d`` are learnt from the first observation; later observations must agree.

Randomness
----------
Each agent owns a ``numpy.random.Generator`` (set by ``reset``). Every ``act`` of
UniformRandom, UCB1 and LinUCB consumes exactly one uniform, every ``act`` of EpsilonGreedy
exactly two, whether or not they are needed (a tie-break only uses it when there is a tie).
The uniforms come from a per-agent buffer refilled by ``Generator.random(256)``; because
``random(a)`` followed by ``random(b)`` yields the same numbers as ``random(a + b)``, the
stream an agent sees does not depend on how it is blocked. This fixed consumption is what
lets the batched twins (:mod:`agents._batched`) and the array replay (:meth:`replay_arrays`)
reproduce a single agent bit for bit. ThompsonSampling draws ``K`` Beta variates and one
uniform per ``act`` straight from its generator.
"""

from __future__ import annotations

import math

import numpy as np

from agents import _kernels as kn
from agents._base import as_generator
from recloop_base.fast_paths import register_fast_path, why_no_fast_path

__all__ = ["UniformRandom", "UCB1", "EpsilonGreedy", "LinUCB", "ThompsonSampling"]

_BLOCK = 256  # uniforms drawn per refill of an agent's buffer
_EMPTY3 = np.empty((0, 0, 0))
_NO_SCALE = np.empty(0)
_EMPTY_SOURCE = np.empty((0, 0), dtype=np.int64)
_EMPTY_REVEALED = np.empty((0, 0), dtype=np.bool_)  # reveal every match


def _draw(gen, buf, ptr, n):
    """Take ``n`` uniforms from ``buf[ptr:]`` then fresh blocks; returns (u, buf, ptr).

    The returned buffer always has length ``_BLOCK``.
    """
    rem = buf.shape[0] - ptr
    if n <= rem:
        return buf[ptr:ptr + n], buf, ptr + n
    need = n - rem
    m = -(-need // _BLOCK)
    fresh = gen.random(m * _BLOCK)
    out = np.concatenate([buf[ptr:], fresh[:need]])
    return out, fresh[(m - 1) * _BLOCK:], need - (m - 1) * _BLOCK


def _check_real(value, name, *, low=None, low_open=False):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"`{name}` must be finite; got {value}.")
    if low is not None and (value < low or (low_open and value == low)):
        rule = f"> {low}" if low_open else f">= {low}"
        raise ValueError(f"`{name}` must be {rule}; got {value}.")
    return value


def _finite_rewards(reward) -> np.ndarray:
    """``reward`` as float64, or a ValueError naming the first non-finite one."""
    reward = np.array(reward, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(reward))
    if bad.size:
        raise ValueError(f"`reward` must be finite; got {reward[bad[0]]} at index {bad[0]}.")
    return reward


#: The batched twin of each bandit class (``agents._batched``, which imports this module,
#: declares them here; ``agents`` imports it with this one): :meth:`_Bandit.batch` looks the
#: twin up here.
_TWINS: dict[type, type] = {}


def make_batch(cls, agents):
    """Build the batched twin of class ``cls`` from the single ``agents``.

    ``cls`` may be a subclass of a bundled bandit that leaves ``act`` / ``update`` alone (it
    gets its parent's twin); one that overrides them has no exact twin: TypeError.
    """
    why = why_no_fast_path(cls, "batch")
    if why is not None:
        raise TypeError(f"{cls.__name__} has no batched twin: {why} Run its copies one by "
                        f"one (the evaluators do so), or register the class with "
                        f"agents.register_fast_path.")
    twin = next((_TWINS[c] for c in cls.__mro__ if c in _TWINS), None)
    if twin is None:
        raise TypeError(f"{cls.__name__} has no batched twin in agents._batched.")
    agents = list(agents)
    if not agents:
        raise ValueError("`agents` must hold at least one agent; got an empty sequence.")
    for i, a in enumerate(agents):
        if type(a) is not cls:
            raise TypeError(f"`agents` must all be {cls.__name__}; got "
                            f"{type(a).__name__} at index {i}.")
    params = agents[0]._params()
    for i, a in enumerate(agents):
        if a._params() != params:
            raise ValueError(f"`agents` must share hyper-parameters; agent {i} has "
                             f"{a._params()}, agent 0 has {params}.")
        a._ensure_reset()
    shapes = {(a._K, a._d) for a in agents if a._K is not None}
    if len(shapes) > 1:
        raise ValueError(f"`agents` must have seen the same numbers of arms and context "
                         f"dimensions; got (K, d) in {sorted(map(str, shapes))}.")
    if shapes:  # a fresh agent would start from this state on its first observation
        K, d = shapes.pop()
        for a in agents:
            if a._K is None:
                a._init_state(K, d)
    return twin(agents)


class _Bandit:
    """Shared plumbing: generator + uniform buffer, observation checks, lazy state."""

    _n_uniforms = 1  # uniforms consumed per act
    _uses_context = False

    def __init__(self):
        self._gen = None
        self._K = None
        self._d = None

    # -- hyper-parameters ---------------------------------------------------------------
    def _params(self) -> dict:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"

    # -- randomness -----------------------------------------------------------------------
    def reset(self, rng=None) -> None:
        """Forget everything learnt and take ``rng`` as the agent's generator.

        Parameters
        ----------
        rng : None, int, SeedSequence or Generator
            Converted once (``recloop_base.validation.as_generator``: ``None`` is the fixed
            ``DEFAULT_SEED``, not fresh entropy); a Generator is used as is (not copied).
        """
        self._gen = as_generator(rng)
        self._buf = np.zeros(_BLOCK)
        self._ptr = _BLOCK  # empty: the first act draws a block
        self._K = None
        self._d = None

    def _ensure_reset(self):
        if self._gen is None:
            self.reset()

    def _take(self, n):
        u, self._buf, self._ptr = _draw(self._gen, self._buf, self._ptr, n)
        return u

    # -- state ----------------------------------------------------------------------------
    def _init_state(self, K, d):
        self._K, self._d = K, d

    def _observe(self, observation):
        """Validated ``(context (d,), available (K,))`` of an observation dict."""
        self._ensure_reset()
        if not isinstance(observation, dict):
            raise TypeError(f"`observation` must be a dict with 'context' and 'available'; "
                            f"got {type(observation).__name__}.")
        try:
            context = observation["context"]
            available = observation["available"]
        except KeyError as exc:
            raise ValueError(f"`observation` lacks the key {exc.args[0]!r}.") from None
        x = np.array(context, dtype=np.float64).reshape(-1)
        avail = np.array(available, dtype=np.bool_)
        if avail.ndim != 1 or avail.shape[0] < 1:
            raise ValueError(f"`observation['available']` must be a non-empty 1-d mask; "
                             f"got shape {avail.shape}.")
        if self._K is None:
            self._init_state(avail.shape[0], x.shape[0])
        elif avail.shape[0] != self._K or x.shape[0] != self._d:
            raise ValueError(
                f"observation has {avail.shape[0]} arms and context dimension {x.shape[0]}; "
                f"the agent was started on {self._K} arms and dimension {self._d}."
            )
        if not avail.any():
            raise ValueError("`observation['available']` has no available arm.")
        return x, avail

    def _check_update(self, action, reward):
        if isinstance(action, bool) or not isinstance(action, (int, np.integer)):
            raise TypeError(f"`action` must be an int; got {type(action).__name__}.")
        if not 0 <= action < self._K:
            raise ValueError(f"`action` must be in [0, {self._K}); got {action}.")
        reward = float(reward)
        if not math.isfinite(reward):
            raise ValueError(f"`reward` must be finite; got {reward}.")
        return int(action), reward

    def _argmax_probabilities(self, score, avail):
        """The act distribution of a greedy rule: uniform over the tied maxima."""
        best = score[avail].max()
        ties = avail & (score == best)
        return ties / ties.sum()

    # -- batched twin -------------------------------------------------------------------
    @classmethod
    def batch(cls, agents):
        """B copies stepping in lockstep on arrays, built from B single agents.

        Parameters
        ----------
        agents : sequence of B agents of this class with equal hyper-parameters
            Each copy takes over the state and the generator (the very object, not a copy)
            of its agent; do not use the single agents afterwards.

        Returns
        -------
        Batched twin (see :mod:`agents._batched`), bit-for-bit identical to stepping the B
        agents separately.
        """
        return make_batch(cls, agents)

    # -- fast replay ----------------------------------------------------------------------
    def replay_arrays(self, context, available, logged_action, reward, *, index=None,
                      eligible=None, jitter=None, jitter_scale=None, revealed=None):
        """Replay over arrays of records, equivalent to the loop below but compiled.

        The signature of :class:`agents.SupportsReplayArrays`, shared with the batched twins
        (where ``index``, ``eligible`` and ``jitter`` gain a leading copy axis)::

            for j in range(n):                      # n = len(index)
                r = index[j]
                x = context[r] + jitter[j] * jitter_scale      # (no jitter: context[r])
                obs = {"context": x, "available": available[r]}
                a[j] = self.act(obs)
                if a[j] == logged_action[r] and eligible[j]:
                    if revealed is not None:        # reveal once (BRED)
                        if revealed[r]:
                            continue
                        revealed[r] = True
                    self.update(obs, a[j], reward[r])

        Parameters
        ----------
        context : array (T, d) float
        available : array (T, K) bool
        logged_action : array (T,) int
        reward : array (T,) float
            The T source records.
        index : array (n,) int, optional
            The records walked, in order (repeats allowed); default ``arange(T)``.
        eligible : array (n,) bool, optional
            Steps whose match may be used (``False``: rejected by rejection sampling);
            default all.
        jitter : array (n, d) float32 or float64, optional
            Noise added to the context of each step, widened to float64 and multiplied by
            ``jitter_scale`` (BRED's smoothed bootstrap).
        jitter_scale : array (d,) float, optional
            Per-feature scale of ``jitter`` (default 1).
        revealed : array (T,) bool, optional
            Reveal once: a match is used only if its source record ``index[j]`` is not yet
            revealed, and then marks it (``revealed`` is updated in place). ``None``: every
            eligible match.

        Returns
        -------
        actions : array (n,) int64
            The agent's choice at each step. The agent's state and generator end exactly
            as after the loop. Inputs are trusted (validated by the evaluator), except that
            shapes and non-finite rewards raise ValueError before anything changes.

        Raises
        ------
        TypeError
            The agent's class overrides ``act`` or ``update`` below the class whose compiled
            loop this is (the loop would not implement them; see
            :func:`agents.fast_path`).
        """
        _refuse_foreign(self)
        self._ensure_reset()
        X = np.array(context, dtype=np.float64)
        avail = np.array(available, dtype=np.bool_)
        reward = _finite_rewards(reward)  # before any state or draw changes
        T, d = X.shape
        idx, elig, jit, scale = _replay_inputs(T, d, index, eligible, jitter, jitter_scale,
                                               None)
        src, rev = _reveal_inputs(idx, revealed, T, None)
        n = idx.shape[1]
        if self._K is None:
            self._init_state(avail.shape[1], d)
        out = np.empty((1, n), dtype=np.int64)
        if n == 0:
            return out[0]
        u = self._take(n * self._n_uniforms).reshape(1, n, self._n_uniforms)
        self._run_replay(X, avail, np.array(logged_action, dtype=np.int64), reward, elig, src,
                         rev, idx, jit, scale, u, out)
        return out[0]


def _refuse_foreign(agent):
    """TypeError when ``agent``'s class overrides act/update below the compiled loop's class."""
    why = why_no_fast_path(agent, "replay_arrays")
    if why is not None:
        raise TypeError(f"replay_arrays cannot stand in for {type(agent).__name__}'s act and "
                        f"update: {why} Replay it with evaluators.replay (the act/update "
                        f"loop), or register the class with agents.register_fast_path.")


def _replay_inputs(T, d, index, eligible, jitter, jitter_scale, B):
    """``(index, eligible, jitter, scale)`` as the replay kernels take them, with a leading
    copy axis of size ``B`` (``None``: a single agent, one copy, no axis in the arguments)."""
    lead = () if B is None else (B,)
    if index is None:
        idx = np.broadcast_to(np.arange(T, dtype=np.int64), (1 if B is None else B, T))
    else:
        idx = np.asarray(index, dtype=np.int64)
        if idx.ndim != len(lead) + 1 or idx.shape[:len(lead)] != lead:
            want = "(n,)" if B is None else f"({B}, n)"
            raise ValueError(f"`index` must have shape {want}; got {idx.shape}.")
        if idx.size and (idx.min() < 0 or idx.max() >= T):
            raise ValueError(f"`index` must hold record indices in [0, {T}); got "
                             f"{idx.min()}..{idx.max()}.")
        idx = idx.reshape((1 if B is None else B, idx.shape[-1]))
    n = idx.shape[1]
    if eligible is None:
        elig = np.ones(idx.shape, dtype=np.bool_)
    else:
        elig = np.asarray(eligible, dtype=np.bool_)
        if elig.shape != lead + (n,):
            raise ValueError(f"`eligible` must have shape {lead + (n,)}; got {elig.shape}.")
        elig = elig.reshape(idx.shape)
    if jitter is None:
        return np.ascontiguousarray(idx), np.ascontiguousarray(elig), _EMPTY3, _NO_SCALE
    jit = np.asarray(jitter)
    jit = np.ascontiguousarray(jit, dtype=np.float32 if jit.dtype == np.float32 else np.float64)
    if jit.shape != lead + (n, d):
        raise ValueError(f"`jitter` must have shape {'(n, d)' if B is None else '(B, n, d)'} = "
                         f"{lead + (n, d)}; got {jit.shape}.")
    scale = np.ones(d) if jitter_scale is None else _scale(jitter_scale, d)
    return (np.ascontiguousarray(idx), np.ascontiguousarray(elig),
            jit.reshape((idx.shape[0], n, d)), scale)


def _reveal_inputs(idx, revealed, T, B):
    """``(source, revealed)`` for the kernels: the walked records are their own sources."""
    if revealed is None:
        return _EMPTY_SOURCE, _EMPTY_REVEALED
    want = (T,) if B is None else (B, T)
    if not (isinstance(revealed, np.ndarray) and revealed.dtype == np.bool_
            and revealed.shape == want):
        raise ValueError(f"`revealed` must be a bool array of shape {want} (updated in "
                         f"place); got {getattr(revealed, 'shape', type(revealed).__name__)}.")
    # a view either way: the kernel marks the caller's array
    return idx, (revealed[None, :] if B is None else revealed)


def _scale(jitter_scale, d) -> np.ndarray:
    try:
        scale = np.array(jitter_scale, dtype=np.float64)
    except (TypeError, ValueError):
        scale = None
    if scale is None or scale.shape != (d,) or not np.all(np.isfinite(scale)):
        raise ValueError(f"`jitter_scale` must be {d} finite floats (one per context "
                         f"feature); got {jitter_scale!r}.")
    return scale


class UniformRandom(_Bandit):
    """Uniformly random choice among the available arms (the usual logging policy).

    ``action_probabilities`` is exact: ``1 / n_available`` on every available arm.
    Each ``act`` consumes one uniform ``u`` and returns the ``floor(u * n)``-th available arm.
    """

    def _params(self):
        return {}

    def act(self, observation) -> int:
        x, avail = self._observe(observation)
        return int(kn.uniform_act_one(avail, self._take(1)[0]))

    def update(self, observation, action, reward) -> None:
        """Nothing to learn; checks its arguments."""
        self._observe(observation)
        self._check_update(action, reward)

    def action_probabilities(self, observation) -> np.ndarray:
        """(K,) float: ``1 / n_available`` on available arms, 0 elsewhere."""
        x, avail = self._observe(observation)
        return avail / avail.sum()

    def _run_replay(self, X, avail, logged, reward, eligible, source, revealed, index, jitter,
                    scale, u, out):
        kn.uniform_replay(avail, logged, eligible, source, revealed, index, u[:, :, 0], out)


class _CountBandit(_Bandit):
    """Per-arm play counts and reward sums (UCB1, EpsilonGreedy)."""

    def _init_state(self, K, d):
        super()._init_state(K, d)
        self._counts = np.zeros(K)
        self._sums = np.zeros(K)

    def update(self, observation, action, reward) -> None:
        """Add ``reward`` to the statistics of arm ``action``."""
        self._observe(observation)
        action, reward = self._check_update(action, reward)
        kn.count_update_one(self._counts, self._sums, action, reward)

    @property
    def counts(self) -> np.ndarray:
        """(K,) plays per arm (copy)."""
        return None if self._K is None else self._counts.copy()


class UCB1(_CountBandit):
    """UCB1 (Auer, Cesa-Bianchi, Fischer 2002) with an exploration scale ``alpha``.

    Index of arm k after ``t`` plays in total: ``mean_k + alpha * sqrt(2 ln t / n_k)``;
    an arm never played has index ``+inf``, so every available arm is played once before
    any is repeated. ``alpha = 1`` is the textbook UCB1. Ties broken at random.

    Parameters
    ----------
    alpha : float, >= 0
    """

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = _check_real(alpha, "alpha", low=0.0)

    def _params(self):
        return {"alpha": self.alpha}

    def _scores(self, x, avail):
        score = np.empty(self._K)
        kn.ucb1_act_one(self._counts, self._sums, self.alpha, x, avail, 0.0, score)
        return score

    def act(self, observation) -> int:
        x, avail = self._observe(observation)
        score = np.empty(self._K)
        return int(kn.ucb1_act_one(self._counts, self._sums, self.alpha, x, avail,
                                   self._take(1)[0], score))

    def action_probabilities(self, observation) -> np.ndarray:
        """(K,) float: uniform over the available arms of maximal index (one-hot if unique)."""
        x, avail = self._observe(observation)
        return self._argmax_probabilities(self._scores(x, avail), avail)

    def _run_replay(self, X, avail, logged, reward, eligible, source, revealed, index, jitter,
                    scale, u, out):
        kn.ucb1_replay(self._counts[None], self._sums[None], self.alpha, X, avail, logged,
                       reward, eligible, source, revealed, index, jitter, scale, u[:, :, 0], out)


class EpsilonGreedy(_CountBandit):
    """Epsilon-greedy: a uniformly random available arm with probability ``epsilon``,
    otherwise the arm of best mean reward (ties at random).

    Arms never played have mean ``+inf`` in the greedy step (each is tried once).
    Each ``act`` consumes two uniforms ``(u1, u2)``: explore iff ``u1 < epsilon``; ``u2``
    chooses the random arm or breaks the tie.

    Parameters
    ----------
    epsilon : float in [0, 1]
    """

    _n_uniforms = 2

    def __init__(self, epsilon: float = 0.1):
        super().__init__()
        self.epsilon = _check_real(epsilon, "epsilon", low=0.0)
        if self.epsilon > 1:
            raise ValueError(f"`epsilon` must be in [0, 1]; got {self.epsilon}.")

    def _params(self):
        return {"epsilon": self.epsilon}

    def act(self, observation) -> int:
        x, avail = self._observe(observation)
        u = self._take(2)
        score = np.empty(self._K)
        return int(kn.egreedy_act_one(self._counts, self._sums, self.epsilon, x, avail,
                                      u[0], u[1], score))

    def action_probabilities(self, observation) -> np.ndarray:
        """(K,) float: ``epsilon / n_available + (1 - epsilon) * greedy distribution``."""
        x, avail = self._observe(observation)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(self._counts == 0, np.inf, self._sums / self._counts)
        greedy = self._argmax_probabilities(score, avail)
        return self.epsilon * avail / avail.sum() + (1 - self.epsilon) * greedy

    def _run_replay(self, X, avail, logged, reward, eligible, source, revealed, index, jitter,
                    scale, u, out):
        kn.egreedy_replay(self._counts[None], self._sums[None], self.epsilon, X, avail, logged,
                          reward, eligible, source, revealed, index, jitter, scale,
                          np.ascontiguousarray(u[:, :, 0]),
                          np.ascontiguousarray(u[:, :, 1]), out)


class LinUCB(_Bandit):
    """LinUCB with disjoint linear models (Li, Chu, Langford, Schapire 2010, Algorithm 1).

    Arm k keeps ``A_k = ridge * I + sum x x^T`` (stored as its inverse, updated by
    Sherman-Morrison) and ``b_k = sum r x``; ``theta_k = A_k^{-1} b_k``. It plays the
    available arm maximising ``theta_k . x + alpha * sqrt(x^T A_k^{-1} x)``, ties at random.

    Parameters
    ----------
    alpha : float, >= 0
        Width of the confidence bonus (0: greedy ridge regression).
    ridge : float, > 0
        Ridge penalty (``A_k`` starts at ``ridge * I``).
    """

    _uses_context = True

    def __init__(self, alpha: float = 1.0, *, ridge: float = 1.0):
        super().__init__()
        self.alpha = _check_real(alpha, "alpha", low=0.0)
        self.ridge = _check_real(ridge, "ridge", low=0.0, low_open=True)

    def _params(self):
        return {"alpha": self.alpha, "ridge": self.ridge}

    def _init_state(self, K, d):
        super()._init_state(K, d)
        self._Ainv = np.repeat((np.eye(d) / self.ridge)[None], K, axis=0)
        self._b = np.zeros((K, d))
        self._theta = np.zeros((K, d))

    @property
    def theta(self) -> np.ndarray:
        """(K, d) ridge estimates (copy)."""
        return None if self._K is None else self._theta.copy()

    def _scores(self, x, avail):
        score = np.empty(self._K)
        kn.linucb_act_one(self._Ainv, self._theta, self.alpha, x, avail, 0.0, score,
                          np.empty(self._d))
        return score

    def act(self, observation) -> int:
        x, avail = self._observe(observation)
        return int(kn.linucb_act_one(self._Ainv, self._theta, self.alpha, x, avail,
                                     self._take(1)[0], np.empty(self._K), np.empty(self._d)))

    def update(self, observation, action, reward) -> None:
        """Rank-one update of arm ``action``'s ridge regression with ``(context, reward)``."""
        x, _ = self._observe(observation)
        action, reward = self._check_update(action, reward)
        kn.linucb_update_one(self._Ainv, self._b, self._theta, x, action, reward,
                             np.empty(self._d))

    def action_probabilities(self, observation) -> np.ndarray:
        """(K,) float: uniform over the available arms of maximal UCB (one-hot if unique)."""
        x, avail = self._observe(observation)
        return self._argmax_probabilities(self._scores(x, avail), avail)

    def _run_replay(self, X, avail, logged, reward, eligible, source, revealed, index, jitter,
                    scale, u, out):
        kn.linucb_replay(self._Ainv[None], self._b[None], self._theta[None], self.alpha, X,
                         avail, logged, reward, eligible, source, revealed, index, jitter,
                         scale, u[:, :, 0], out)


class ThompsonSampling(_Bandit):
    """Beta-Bernoulli Thompson sampling (rewards in [0, 1]).

    Arm k has posterior ``Beta(a0 + S_k, b0 + F_k)`` with ``S_k = sum r`` and
    ``F_k = sum (1 - r)`` (fractional rewards count fractionally). Each ``act`` draws one
    Beta variate for every arm (available or not, so the number of draws is fixed), then one
    uniform for the tie-break, and plays the available arm with the largest draw.
    ``action_probabilities`` is not defined (it has no closed form).

    Parameters
    ----------
    a0, b0 : float, > 0
        Prior pseudo-counts of successes and failures.
    """

    def __init__(self, a0: float = 1.0, b0: float = 1.0):
        super().__init__()
        self.a0 = _check_real(a0, "a0", low=0.0, low_open=True)
        self.b0 = _check_real(b0, "b0", low=0.0, low_open=True)

    def _params(self):
        return {"a0": self.a0, "b0": self.b0}

    def _init_state(self, K, d):
        super()._init_state(K, d)
        self._a = np.full(K, self.a0)
        self._b = np.full(K, self.b0)

    def act(self, observation) -> int:
        x, avail = self._observe(observation)
        theta = self._gen.beta(self._a, self._b)
        return int(kn.pick(theta, avail, self._gen.random()))

    def update(self, observation, action, reward) -> None:
        """Add ``reward`` to the successes and ``1 - reward`` to the failures of ``action``."""
        self._observe(observation)
        action, reward = self._check_update(action, reward)
        if not 0.0 <= reward <= 1.0:
            raise ValueError(f"`reward` must be in [0, 1] for ThompsonSampling; got {reward}.")
        self._a[action] += reward
        self._b[action] += 1.0 - reward

    # no buffer: replay_arrays would have to replicate Generator.beta; use the plain loop
    replay_arrays = None


# Their compiled loops and batched twins live on shared base classes (``_Bandit``,
# ``agents._batched``) while act/update are defined on each class: vouch for them here, so
# that ``agents.fast_path`` takes the shortcut for these classes and the subclasses that leave
# act/update alone, and refuses it for subclasses that override them (issue 18).
for _cls in (UniformRandom, UCB1, EpsilonGreedy, LinUCB):
    register_fast_path(_cls, "replay_arrays", "batch")
register_fast_path(ThompsonSampling, "batch")
del _cls
