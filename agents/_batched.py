"""Batched twins of the bandit agents: B independent copies stepping in lockstep on arrays.

Built with ``Agent.batch(agents)`` from B single agents of one class and equal
hyper-parameters. Copy i takes over agent i's state and generator; it consumes its
generator exactly as the single agent would (a fixed number of uniforms per act, from a
buffer refilled in blocks of 256), and the per-copy numerical work is done by the same numba
functions in the same order, so copy i is bit-for-bit identical to agent i stepped alone.

Interface (all copies act at every step; only the ``active`` ones learn)::

    act(context (B, d), available (B, K)) -> (B,) int64
    update(active (B,) bool, context (B, d), action (B,), reward (B,))
    replay_arrays(context, available, logged_action, reward, *, index=None, eligible=None,
                  jitter=None, jitter_scale=None, revealed=None)
    unbatch() -> list of B single agents carrying the copies' states

``replay_arrays`` has the single agents' signature (:class:`agents.SupportsReplayArrays`),
with a leading copy axis on ``index`` (B, n), ``eligible`` (B, n), ``jitter`` (B, n, d) and
``revealed`` (B, T).

LinUCB's twin holds ``B x K x d x d`` inverse matrices updated by Sherman-Morrison.
"""

from __future__ import annotations

import copy

import numpy as np

from agents import _kernels as kn
from agents._bandits import (
    _BLOCK,
    _TWINS,
    UCB1,
    EpsilonGreedy,
    LinUCB,
    ThompsonSampling,
    UniformRandom,
    _draw,
    _finite_rewards,
    _replay_inputs,
    _reveal_inputs,
)
from recloop_base.fast_paths import register_fast_path

__all__ = ["BatchedUniformRandom", "BatchedUCB1", "BatchedEpsilonGreedy", "BatchedLinUCB",
           "BatchedThompsonSampling"]


class _Batched:
    _single = None
    _state_names: tuple = ()

    def __init__(self, agents):
        proto = agents[0]
        self._proto = copy.copy(proto)  # hyper-parameters only are read from it
        for name, value in proto._params().items():
            setattr(self, name, value)
        self._n_uniforms = proto._n_uniforms
        self.n_copies = len(agents)
        self._gens = [a._gen for a in agents]
        self._buf = np.stack([a._buf for a in agents]).astype(np.float64)
        self._ptr = np.array([a._ptr for a in agents], dtype=np.int64)
        self._K, self._d = proto._K, proto._d
        if self._K is not None:
            for name in self._state_names:
                setattr(self, name, np.stack([getattr(a, name) for a in agents]))

    def __repr__(self):
        return f"Batched({self._proto!r} x {self.n_copies})"

    def _init_state(self, K, d):
        single = copy.copy(self._proto)
        single._init_state(K, d)
        self._K, self._d = K, d
        for name in self._state_names:
            setattr(self, name, np.repeat(getattr(single, name)[None], self.n_copies, axis=0))

    def _take(self, n):
        """(B, n) uniforms: for each copy the next ``n`` of its stream."""
        B = self.n_copies
        p = self._ptr[0]
        if p + n <= _BLOCK and (B == 1 or (self._ptr == p).all()):
            # common case: copies in step (lockstep), one slice for all
            self._ptr += n
            return self._buf[:, p:p + n]
        if n <= _BLOCK and np.all(self._ptr + n <= _BLOCK):
            idx = self._ptr[:, None] + np.arange(n)
            self._ptr += n
            return np.take_along_axis(self._buf, idx, axis=1)
        out = np.empty((B, n))
        for i in range(B):
            out[i], self._buf[i], self._ptr[i] = _draw(self._gens[i], self._buf[i],
                                                       int(self._ptr[i]), n)
        return out

    def _arrays(self, context, available, *, check_arms=True):
        B = self.n_copies
        # read only, never kept: no copy when the caller already passes these dtypes
        X = np.asarray(context, dtype=np.float64)
        avail = np.asarray(available, dtype=np.bool_)
        if X.ndim != 2 or X.shape[0] != B:
            raise ValueError(f"`context` must have shape (B, d) with B = {B}; got {X.shape}.")
        if avail.ndim != 2 or avail.shape[0] != B:
            raise ValueError(f"`available` must have shape (B, K) with B = {B}; "
                             f"got {avail.shape}.")
        if self._K is None:
            self._init_state(avail.shape[1], X.shape[1])
        elif avail.shape[1] != self._K or X.shape[1] != self._d:
            raise ValueError(f"got {avail.shape[1]} arms and dimension {X.shape[1]}; the "
                             f"copies run on {self._K} arms and dimension {self._d}.")
        if check_arms:
            self._check_arms(avail)
        return X, avail

    @staticmethod
    def _check_arms(avail):
        if not avail.any(axis=1).all():
            none = np.flatnonzero(~avail.any(axis=1))
            raise ValueError(f"`available` has no available arm for copy {none[0]}.")

    def _update_arrays(self, active, context, action, reward):
        B = self.n_copies
        active = np.array(active, dtype=np.bool_)
        X = np.array(context, dtype=np.float64)
        action = np.array(action, dtype=np.int64)
        reward = np.array(reward, dtype=np.float64)
        if active.shape != (B,) or action.shape != (B,) or reward.shape != (B,):
            raise ValueError(f"`active`, `action` and `reward` must have shape ({B},); got "
                             f"{active.shape}, {action.shape}, {reward.shape}.")
        if self._K is None:
            raise RuntimeError("`update` called before any `act`.")
        if X.shape != (B, self._d):
            raise ValueError(f"`context` must have shape ({B}, {self._d}); got {X.shape}.")
        # one cheap test on the happy path, the detailed search only on failure
        lo, hi = action.min(initial=0), action.max(initial=0)
        if lo < 0 or hi >= self._K:
            bad = np.flatnonzero(active & ((action < 0) | (action >= self._K)))
            if bad.size:
                raise ValueError(f"`action` must be in [0, {self._K}); got {action[bad[0]]} "
                                 f"for copy {bad[0]}.")
            action = np.where(active, action, 0)  # inactive copies may carry any action
        if not np.isfinite(reward.sum()):
            bad = np.flatnonzero(active & ~np.isfinite(reward))
            if bad.size:
                raise ValueError(f"`reward` must be finite; got {reward[bad[0]]} for copy "
                                 f"{bad[0]}.")
        return active, X, action, reward

    def update(self, active, context, action, reward) -> None:
        """Update the copies where ``active`` is True with their ``(context, action, reward)``."""
        self._update(*self._update_arrays(active, context, action, reward))

    def replay_arrays(self, context, available, logged_action, reward, *, index=None,
                      eligible=None, jitter=None, jitter_scale=None, revealed=None):
        """Replay copy i over records ``index[i]`` of the given arrays (compiled loop).

        Copy i acts on ``context[index[i, j]] + jitter[i, j] * jitter_scale`` and availability
        ``available[index[i, j]]``; when its action equals ``logged_action[index[i, j]]`` and
        ``eligible[i, j]`` it is updated with ``reward[index[i, j]]``. Equivalent to stepping
        ``act`` / ``update`` record by record, and to copy i's single agent's
        ``replay_arrays`` with ``index[i]``, ``eligible[i]``, ``jitter[i]``, ``revealed[i]``
        (the same signature, with a leading copy axis). With ``revealed`` (reveal once, for
        BRED), a match of copy i is used only if ``revealed[i, index[i, j]]`` is False, which
        it then sets: each source record updates a copy at most once.

        Parameters
        ----------
        context : (T, d) float; available : (T, K) bool; logged_action : (T,) int;
        reward : (T,) float
            The T source records.
        index : (B, n) int, optional
            Records walked by each copy (default: every copy walks ``arange(T)``).
        eligible : (B, n) bool, optional
            Default all.
        jitter : (B, n, d) float or None; jitter_scale : (d,) float or None (no scaling)
            A float32 ``jitter`` is used as is (no float64 copy): each element is widened,
            times its scale, in float64 -- the numbers of
            ``context[index] + jitter.astype(float64) * jitter_scale``.
        revealed : (B, T) bool or None
            Updated in place.

        Returns
        -------
        actions : (B, n) int64
        """
        X = np.array(context, dtype=np.float64)
        avail = np.array(available, dtype=np.bool_)
        T, d = X.shape
        B = self.n_copies
        index, eligible, jitter, scale = _replay_inputs(T, d, index, eligible, jitter,
                                                        jitter_scale, B)
        src, rev = _reveal_inputs(index, revealed, T, B)
        reward = _finite_rewards(reward)
        n = index.shape[1]
        if self._K is None:
            self._init_state(avail.shape[1], d)
        out = np.empty((B, n), dtype=np.int64)
        if n == 0:
            return out
        u = self._take(n * self._n_uniforms).reshape(B, n, self._n_uniforms)
        self._run_replay(X, avail, np.array(logged_action, dtype=np.int64), reward, eligible,
                         src, rev, index, jitter, scale, u, out)
        return out

    def unbatch(self) -> list:
        """B single agents carrying the copies' current states and generators."""
        agents = []
        for i in range(self.n_copies):
            a = copy.copy(self._proto)
            a._gen = self._gens[i]
            a._buf = self._buf[i].copy()
            a._ptr = int(self._ptr[i])
            a._K, a._d = self._K, self._d
            if self._K is not None:
                for name in self._state_names:
                    setattr(a, name, getattr(self, name)[i].copy())
            agents.append(a)
        return agents


class BatchedUniformRandom(_Batched):
    """B copies of :class:`UniformRandom`."""

    def act(self, context, available) -> np.ndarray:
        X, avail = self._arrays(context, available)
        out = np.empty(self.n_copies, dtype=np.int64)
        kn.uniform_act_batch(avail, np.ascontiguousarray(self._take(1)[:, 0]), out)
        return out

    def _update(self, active, X, action, reward):
        pass

    def _run_replay(self, X, avail, logged, reward, eligible, source, revealed, index, jitter,
                    scale, u, out):
        kn.uniform_replay(avail, logged, eligible, source, revealed, index,
                          np.ascontiguousarray(u[:, :, 0]), out)


class _BatchedCount(_Batched):
    _state_names = ("_counts", "_sums")

    def _update(self, active, X, action, reward):
        kn.count_update_batch(self._counts, self._sums, active, action, reward)


class BatchedUCB1(_BatchedCount):
    """B copies of :class:`UCB1`."""

    def act(self, context, available) -> np.ndarray:
        X, avail = self._arrays(context, available)
        out = np.empty(self.n_copies, dtype=np.int64)
        kn.ucb1_act_batch(self._counts, self._sums, self.alpha, X, avail,
                          np.ascontiguousarray(self._take(1)[:, 0]), out)
        return out

    def _run_replay(self, X, avail, logged, reward, eligible, source, revealed, index, jitter,
                    scale, u, out):
        kn.ucb1_replay(self._counts, self._sums, self.alpha, X, avail, logged, reward,
                       eligible, source, revealed, index, jitter, scale,
                       np.ascontiguousarray(u[:, :, 0]), out)


class BatchedEpsilonGreedy(_BatchedCount):
    """B copies of :class:`EpsilonGreedy`."""

    def act(self, context, available) -> np.ndarray:
        X, avail = self._arrays(context, available)
        u = self._take(2)
        out = np.empty(self.n_copies, dtype=np.int64)
        kn.egreedy_act_batch(self._counts, self._sums, self.epsilon, X, avail,
                             np.ascontiguousarray(u[:, 0]), np.ascontiguousarray(u[:, 1]), out)
        return out

    def _run_replay(self, X, avail, logged, reward, eligible, source, revealed, index, jitter,
                    scale, u, out):
        kn.egreedy_replay(self._counts, self._sums, self.epsilon, X, avail, logged, reward,
                          eligible, source, revealed, index, jitter, scale,
                          np.ascontiguousarray(u[:, :, 0]),
                          np.ascontiguousarray(u[:, :, 1]), out)


class BatchedLinUCB(_Batched):
    """B copies of :class:`LinUCB`: B x K x d x d inverse matrices (Sherman-Morrison).

    Stored copy-last -- ``Ainv`` as (K, d, d, B), ``b`` and ``theta`` as (K, d, B) -- so the
    compiled loops run across copies and vectorise; :attr:`Ainv` and :attr:`theta` give the
    (B, K, d, d) and (B, K, d) views. ``act`` and ``update`` are one compiled call each;
    ``update`` maintains the upper triangles of ``_Ainv`` only (the matrices are exactly
    symmetric) and the lower ones are mirrored when :attr:`Ainv`, ``replay_arrays`` or
    ``unbatch`` need them.
    """

    _state_names = ("_Ainv", "_b", "_theta")

    def __init__(self, agents):
        self._stale_lower = False  # update maintains the upper triangles only
        super().__init__(agents)
        if self._K is not None:
            self._to_lanes()

    def _full(self):
        """Restore the lower triangles of ``_Ainv`` (see ``update``)."""
        if self._stale_lower:
            kn.linucb_mirror_lanes(self._Ainv)
            self._stale_lower = False

    def _init_state(self, K, d):
        super()._init_state(K, d)
        self._to_lanes()

    def _to_lanes(self):
        for name in self._state_names:  # (B, ...) -> (..., B), contiguous
            setattr(self, name, np.ascontiguousarray(np.moveaxis(getattr(self, name), 0, -1)))

    @property
    def Ainv(self) -> np.ndarray:
        """(B, K, d, d) inverse design matrices (read-only view)."""
        self._full()
        v = np.moveaxis(self._Ainv, -1, 0).view()
        v.flags.writeable = False
        return v

    @property
    def theta(self) -> np.ndarray:
        """(B, K, d) ridge estimates (read-only view)."""
        v = np.moveaxis(self._theta, -1, 0).view()
        v.flags.writeable = False
        return v

    def act(self, context, available) -> np.ndarray:
        # One compiled call checks the arms, takes each copy's next uniform straight from
        # its buffer, scores and picks; Python only refills a buffer every 256 steps.
        X, avail = self._arrays(context, available, check_arms=False)
        out = np.empty(self.n_copies, dtype=np.int64)
        step = kn.linucb_act_lanes_kernel(self._d)
        args = (self._Ainv, self._theta, self.alpha, X, avail, self._buf, self._ptr, out)
        status = step(*args)
        if status == 2:  # some buffer is used up: refill it, as _draw would, and go again
            for i in np.flatnonzero(self._ptr >= _BLOCK):
                self._buf[i] = self._gens[i].random(_BLOCK)
                self._ptr[i] = 0
            status = step(*args)
        if status == 1:
            self._check_arms(avail)
        return out

    def update(self, active, context, action, reward) -> None:
        """Update the copies where ``active`` is True with their ``(context, action, reward)``."""
        B = self.n_copies
        if self._K is None:
            raise RuntimeError("`update` called before any `act`.")
        a = np.asarray(active, dtype=np.bool_)
        X = np.asarray(context, dtype=np.float64)
        act = np.asarray(action, dtype=np.int64)
        r = np.asarray(reward, dtype=np.float64)
        if a.shape != (B,) or act.shape != (B,) or r.shape != (B,) or X.shape != (B, self._d):
            self._update_arrays(active, context, action, reward)  # raises, naming the shape
        # the kernel validates actions and rewards before changing anything
        if kn.linucb_update_lanes_kernel(self._d)(self._Ainv, self._b, self._theta, a, X, act,
                                                  r):
            self._update_arrays(active, context, action, reward)  # raises the message
            raise AssertionError("update kernel rejected input that passes the checks")
        self._stale_lower = True

    def _run_replay(self, X, avail, logged, reward, eligible, source, revealed, index, jitter,
                    scale, u, out):
        self._full()
        B = self.n_copies
        n_groups = -(-B // kn.LANE_GROUP)
        kn.linucb_kernels(self._d).replay_lanes(
            self._Ainv, self._b, self._theta, self.alpha, X, avail, logged, reward, eligible,
            source, revealed, index, jitter, scale, np.ascontiguousarray(u[:, :, 0]), out,
            -(-B // n_groups))
        self._stale_lower = True

    def unbatch(self) -> list:
        if self._K is None:  # no state yet (fresh copies)
            return super().unbatch()
        self._full()
        lanes = {name: getattr(self, name) for name in self._state_names}
        try:
            for name in self._state_names:
                setattr(self, name, np.moveaxis(lanes[name], -1, 0))
            return super().unbatch()
        finally:
            for name, value in lanes.items():
                setattr(self, name, value)


class BatchedThompsonSampling(_Batched):
    """B copies of :class:`ThompsonSampling` (Beta draws per copy from its own generator)."""

    _state_names = ("_a", "_b")

    def act(self, context, available) -> np.ndarray:
        X, avail = self._arrays(context, available)
        B = self.n_copies
        theta = np.empty((B, self._K))
        u = np.empty(B)
        # per-copy draws: the Beta sampler consumes a variable number of raw draws, so the
        # copies' streams cannot be pre-drawn in blocks.
        for i, g in enumerate(self._gens):
            theta[i] = g.beta(self._a[i], self._b[i])
            u[i] = g.random()
        out = np.empty(B, dtype=np.int64)
        kn.pick_batch(theta, avail, u, out)
        return out

    def _update(self, active, X, action, reward):
        bad = np.flatnonzero(active & ((reward < 0) | (reward > 1)))
        if bad.size:
            raise ValueError(f"`reward` must be in [0, 1] for ThompsonSampling; got "
                             f"{reward[bad[0]]} for copy {bad[0]}.")
        rows = np.flatnonzero(active)
        self._a[rows, action[rows]] += reward[rows]
        self._b[rows, action[rows]] += 1.0 - reward[rows]

    replay_arrays = None


# each bandit's twin, declared into the table its ``batch`` reads (agents._bandits imports
# nothing of this module: the twins are found through the table, filled when ``agents`` is
# imported)
_TWINS.update({UniformRandom: BatchedUniformRandom, UCB1: BatchedUCB1,
               EpsilonGreedy: BatchedEpsilonGreedy, LinUCB: BatchedLinUCB,
               ThompsonSampling: BatchedThompsonSampling})

# the twins' compiled loop lives on _Batched, their act/update on each twin class
for _twin in (BatchedUniformRandom, BatchedUCB1, BatchedEpsilonGreedy, BatchedLinUCB):
    register_fast_path(_twin, "replay_arrays")
del _twin
