"""Off-policy estimators of slate (ranking) policies: SIPS, IIPS, RIPS, PI, Cascade-DR.

A :class:`simulator.logs.SlateLog` holds slates ``s_i = (s_i0, ..., s_i,k-1)`` shown by a
logging policy ``mu`` with their exact propensities, and the reward ``r_ij`` of every
position. The target policy ``pi`` enters through its probabilities on the logged slates,
in Open Bandit Pipeline's vocabulary with recloop's 2-d shapes (OBP flattens them to
``(n_rounds * len_list,)``; the flat form is accepted too):

* ``target_pscore`` (n,): ``pi(s_i | x_i)``, the whole slate;
* ``target_pscore_cascade`` (n, k): ``pi(s_i0 .. s_ij | x_i)``, every prefix;
* ``target_pscore_item_position`` (n, k): ``pi(s_ij at position j | x_i)``;
* ``target_item_marginals`` (n, k, k): ``pi(s_ij at position l | x_i)`` for every ``l``
  (the pseudo-inverse needs where else the logged items could have been);
* ``target_action_dist`` (n, k, n_items): ``pi(a | x_i, s_i0 .. s_i,j-1)`` (Cascade-DR).

``agents.PlackettLuce`` computes each of them exactly from ``log.observations()`` and
``log.action``. Every estimator returns an :class:`evaluators.OPEEstimate` (the mean of
independent per-slate terms, its standard error ``std / sqrt(n)``, a normal interval);
a target with no support on the log gives ``nan`` with a :class:`NoSupportWarning`.

Which estimator is unbiased where (``E[r_ij | x, s]`` under the world's click model):

============================  ===========================================  =================
estimator                      assumption                                   recloop models
============================  ===========================================  =================
``slate_ips``                  none (the slate is one action)               all
``independent_ips``            ``E[r_ij|x,s]`` depends on ``s_ij`` only     independent, pbm
``reward_interaction_ips``     ... on ``s_i0 .. s_ij`` only (cascade)       all four
``pseudoinverse``              slate reward additive over (position, item)  independent, pbm
``cascade_dr``                 as RIPS (or an exact Q model)                all four
============================  ===========================================  =================

Variance usually falls in the order SIPS > RIPS > IIPS, since the weights are products
over the whole slate, over a prefix, over one position.
"""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np

from evaluators._estimate import _z
from evaluators._ope import NoSupportWarning, OPEEstimate, _caller_stacklevel, _ess
from evaluators._validation import check_slate_log
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_generator,
    check_int,
    check_level,
)

__all__ = ["slate_ips", "independent_ips", "reward_interaction_ips", "pseudoinverse",
           "cascade_dr", "SLATE_ESTIMATORS", "SlateRewardModel"]

#: The slate estimators, by name.
SLATE_ESTIMATORS = ("slate_ips", "independent_ips", "reward_interaction_ips", "pseudoinverse",
                    "cascade_dr")
_NO_WEIGHT = "every importance weight is 0 (the target never shows a logged slate or prefix)"
_UNIFORM_RTOL = 1e-9
_ONE = 1.0 + 1e-12  # probabilities up to this are round-off of 1


# -- input checks ---------------------------------------------------------------------------

def _check_clicks(log, name: str) -> None:
    if log.reward_type != "clicks":
        raise ArgumentValueError(
            "log.reward_type", f"'clicks' for {name} (it estimates the expected sum of the "
            "positions' rewards, not whether any is positive)", repr(log.reward_type))


def _probs(arr, name: str, shape: tuple) -> np.ndarray:
    """A target probability array of ``shape`` (OBP's flat form accepted), in [0, 1]."""
    a = np.asarray(arr)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise ArgumentTypeError(name, "an array of probabilities", f"dtype {a.dtype}")
    a = a.astype(np.float64)
    if a.shape != shape:
        if a.ndim == 1 and a.size == math.prod(shape):
            a = a.reshape(shape)
        else:
            raise ArgumentValueError(name, f"of shape {shape} (or OBP's flat "
                                     f"({math.prod(shape)},))", f"shape {np.shape(arr)}")
    if a.size and not (a.min() >= 0.0 and a.max() <= 1.0):  # nan fails both (no temporaries)
        bad = np.flatnonzero(~(np.isfinite(a) & (a >= 0) & (a <= _ONE)).ravel())
        if bad.size:
            raise ArgumentValueError(name, "probabilities in [0, 1]",
                                     f"{a.ravel()[bad[0]]} at flat index {bad[0]}")
        a = np.minimum(a, 1.0)  # 1 + a few ulps of round-off is 1
    return a


def _estimate(terms, level, ess, name, n_nonzero) -> OPEEstimate:
    n = terms.shape[0]
    if n_nonzero == 0:
        warnings.warn(f"{name}: {_NO_WEIGHT}; returning nan.", NoSupportWarning,
                      stacklevel=_caller_stacklevel())
        return OPEEstimate(math.nan, math.nan, math.nan, math.nan, n, level, ess=0.0,
                           estimator=name)
    value = float(terms.mean())
    se = float(terms.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    half = _z(level) * se
    return OPEEstimate(value, se, value - half, value + half, n, level, ess=ess,
                       estimator=name)


def _position_ess(W: np.ndarray) -> float:
    """The smallest effective sample size over positions of position-wise weights (n, k)."""
    return float(min(_ess(W[:, j]) for j in range(W.shape[1])))


# -- estimators ---------------------------------------------------------------------------

def slate_ips(log, target_pscore, *, ci: float = 0.95) -> OPEEstimate:
    """Standard slate IPS (SIPS): ``mean_i pi(s_i|x_i) / mu(s_i|x_i) * R_i``.

    Parameters
    ----------
    log : simulator.logs.SlateLog
    target_pscore : array (n_rounds,)
        ``pi(s_i | x_i)``, the target's probability of each logged slate.
    ci : float in (0, 1)
        Level of the normal interval.

    Returns
    -------
    OPEEstimate
        ``estimator="slate_ips"``; ``ess`` of the slate weights; ``nan`` with a
        :class:`NoSupportWarning` when every weight is 0.

    Raises
    ------
    TypeError, ValueError
        Not a ``SlateLog``, an empty log, ``target_pscore`` of the wrong shape or outside
        [0, 1], ``ci`` outside (0, 1).

    Notes
    -----
    The slate is one action: ``R_i = log.slate_reward`` (the number of clicks, or whether
    any happened). Unbiased under no assumption on the reward, as long as ``mu`` covers
    ``pi``; its weights are products over all ``k`` positions, hence its variance.
    McInerney et al. (2020), eq. (1); OBP's ``SlateStandardIPS``.

    Examples
    --------
    >>> import numpy as np
    >>> from simulator.logs import SlateLog
    >>> log = SlateLog(context=np.zeros(2), action=[[0, 1], [1, 0]],
    ...                reward=[[1.0, 0.0], [0.0, 0.0]], pscore=[0.5, 0.5],
    ...                pscore_cascade=[[0.5, 0.5], [0.5, 0.5]],
    ...                pscore_item_position=[[0.5, 0.5], [0.5, 0.5]], n_items=2)
    >>> slate_ips(log, [1.0, 0.0]).value     # pi shows (0, 1) always: 2 * 1.0 / 2
    1.0
    """
    log = check_slate_log(log)
    level = check_level(ci)
    w = _probs(target_pscore, "target_pscore", (log.n_rounds,)) / log.pscore
    return _estimate(w * log.slate_reward, level, _ess(w), "slate_ips",
                     int(np.count_nonzero(w)))


def independent_ips(log, target_pscore_item_position, *, ci: float = 0.95) -> OPEEstimate:
    """Independent IPS (IIPS): ``mean_i sum_j pi(s_ij at j|x_i) / mu(s_ij at j|x_i) r_ij``.

    Parameters
    ----------
    log : simulator.logs.SlateLog
        With ``reward_type="clicks"``.
    target_pscore_item_position : array (n_rounds, len_list)
        ``pi(s_ij at position j | x_i)``, the target's position marginals of the logged
        items.
    ci : float in (0, 1)

    Returns
    -------
    OPEEstimate
        ``ess``: the smallest over positions.

    Notes
    -----
    Li, Abbasi-Yadkori, Kveton, Muthukrishnan, Vinay & Wen (2018), "Offline evaluation of
    ranking policies with click models"; OBP's ``SlateIndependentIPS``. Unbiased when the
    expected reward at a position depends only on the item there (and the position):
    ``E[r_ij | x, s] = f_j(x, s_ij)`` -- the independent and position-based click models;
    biased under the cascade and the DCM, where the items above matter.
    """
    log = check_slate_log(log)
    _check_clicks(log, "independent_ips")
    level = check_level(ci)
    W = _probs(target_pscore_item_position, "target_pscore_item_position",
               log.action.shape) / log.pscore_item_position
    return _estimate((W * log.reward).sum(axis=1), level, _position_ess(W), "independent_ips",
                     int(np.count_nonzero(W)))


def reward_interaction_ips(log, target_pscore_cascade, *, ci: float = 0.95) -> OPEEstimate:
    """Reward-interaction IPS (RIPS): ``mean_i sum_j pi(s_i0..s_ij|x_i) / mu(s_i0..s_ij|x_i)
    r_ij``.

    Parameters
    ----------
    log : simulator.logs.SlateLog
        With ``reward_type="clicks"``.
    target_pscore_cascade : array (n_rounds, len_list)
        ``pi(s_i0 .. s_ij | x_i)``, the target's probability of every logged prefix.
    ci : float in (0, 1)

    Notes
    -----
    McInerney, Brost, Chandar, Mehrotra & Carterette (2020), "Counterfactual evaluation of
    slate recommendations with sequential reward interactions", eq. (3)-(4) with the weight
    of the prefix (OBP's ``SlateRewardInteractionIPS``). Unbiased under the cascade
    assumption: ``E[r_ij | x, s]`` depends only on the items at positions ``0 .. j`` -- true
    of all four click models of recloop (independent, PBM, cascade, DCM).
    """
    log = check_slate_log(log)
    _check_clicks(log, "reward_interaction_ips")
    level = check_level(ci)
    W = _probs(target_pscore_cascade, "target_pscore_cascade",
               log.action.shape) / log.pscore_cascade
    return _estimate((W * log.reward).sum(axis=1), level, _position_ess(W),
                     "reward_interaction_ips", int(np.count_nonzero(W)))


def _n_available(log) -> np.ndarray:
    if log.available is None:
        return np.full(log.n_rounds, log.n_items, dtype=np.int64)
    return log.available.sum(axis=1).astype(np.int64)


def pseudoinverse(log, target_item_marginals, *, ci: float = 0.95) -> OPEEstimate:
    """Pseudo-inverse estimator (PI) for logs of the uniform ranking policy.

    Parameters
    ----------
    log : simulator.logs.SlateLog
        Logged by the uniform policy over the ordered ``k``-slates of distinct available
        items: ``pscore_item_position = 1 / m_i`` and ``pscore = (m_i - k)! / m_i!`` with
        ``m_i`` the items available at record ``i``.
    target_item_marginals : array (n_rounds, len_list, len_list)
        ``pi(s_ij at position l | x_i)`` for every logged item ``j`` and position ``l``
        (the diagonal ``l = j`` is ``target_pscore_item_position``).
    ci : float in (0, 1)

    Returns
    -------
    OPEEstimate
        ``ess`` of the PI weights (which may be negative).

    Raises
    ------
    ValueError
        A log whose propensities are not those of the uniform ranking policy.

    Notes
    -----
    Swaminathan, Krishnamurthy, Agarwal, Dudik, Langford, Jose & Zitouni (2017),
    "Off-policy evaluation for slate recommendation": ``V = mean_i w_i R_i`` with
    ``w_i = 1_{s_i}^T Gamma^+ q_pi(x_i)``, ``1_s`` the (position, item) indicator of a
    slate, ``Gamma = E_mu[1_s 1_s^T]``, ``q_pi = E_pi[1_s]``. Unbiased when the slate
    reward is additive, ``E[R | x, s] = sum_j phi_j(x, s_j)`` (independent and
    position-based clicks, reward ``"clicks"``), biased otherwise. For the uniform ranking
    policy (no repeats) over ``m`` items, ``Gamma`` has the closed form ``1/m`` on its
    diagonal, 0 between two items at one position and ``1 / (m (m - 1))`` between distinct
    items at two positions, which gives (derived for recloop and checked against
    ``numpy.linalg.pinv`` in the tests)::

        w = (m - 1) sum_j pi_j(s_j) + (m - 1) / (m - k) sum_j Pi(s_j) - m (k - 1) / (m - k)

    with ``pi_j(a)`` the target's marginal of item ``a`` at position ``j`` and
    ``Pi(a) = sum_l pi_l(a)``; for ``m = k`` (full rankings)
    ``w = (m - 1) sum_j pi_j(s_j) - (k - 2)``. (The often quoted
    ``m sum_j pi_j(s_j) - k + 1`` is the weight of slots drawn independently, repeats
    allowed; on rankings it is biased.) Logs of a non-uniform policy would need the
    logging policy's pairwise marginals, which recloop does not compute.
    """
    log = check_slate_log(log)
    level = check_level(ci)
    n, k = log.action.shape
    Mt = _probs(target_item_marginals, "target_item_marginals", (n, k, k))
    m = _n_available(log).astype(np.float64)
    perm = np.ones(n)
    for j in range(k):
        perm /= m - j
    bad = np.flatnonzero(
        ~np.isclose(log.pscore_item_position, 1.0 / m[:, None], rtol=_UNIFORM_RTOL,
                    atol=0.0).all(axis=1) | ~np.isclose(log.pscore, perm, rtol=1e-7, atol=0.0))
    if bad.size:
        j = int(bad[0])
        raise ArgumentValueError(
            "log", "a log of the uniform ranking policy for `pseudoinverse` (pscore_item_"
            "position = 1/m, pscore = (m-k)!/m! with m the available items)",
            f"pscore_item_position {log.pscore_item_position[j].tolist()} and pscore "
            f"{log.pscore[j]} at record {j} (m = {int(m[j])})")
    own = np.trace(Mt, axis1=1, axis2=2)          # sum_j pi(s_j at j)
    anywhere = Mt.sum(axis=(1, 2))                # sum_j Pi(s_j)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(m > k, (m - 1) * own + (m - 1) / (m - k) * anywhere
                     - m * (k - 1) / (m - k), (m - 1) * own - (k - 2))
    return _estimate(w * log.slate_reward, level, _ess(w), "pseudoinverse",
                     int(np.count_nonzero(own + anywhere)))


# -- Cascade doubly robust ----------------------------------------------------------------

_MODELS = ("mean",)
_CHUNK_CELLS = 1 << 22  # rows x len_list x n_items per chunk of the action distribution
_WHOLE_CELLS = 1 << 25  # a policy's action distribution up to this size is computed once


class _Dist:
    """The target's action distribution ``pi(a | x_i, s_i0 .. s_i,j-1)``, row chunk by row
    chunk: from an array (n, k, n_items) or from a slate policy's
    ``conditional_probabilities(observations, slates)``; every chunk is checked (rows sum
    to 1, consistent with ``target_pscore_cascade``)."""

    def __init__(self, log, source, cascade):
        self.log, self.cascade = log, cascade
        n, k = log.action.shape
        self.shape = (n, k, log.n_items)
        self.policy = source if callable(getattr(source, "conditional_probabilities", None)) \
            else None
        self.step = max(1, _CHUNK_CELLS // (k * log.n_items))
        self.full = None
        if self.policy is None:
            self.full = _probs(source, "target_action_dist", self.shape)
        # a policy's small action distribution is computed once, when first asked for
        self.keep = self.policy is not None and math.prod(self.shape) <= _WHOLE_CELLS
        self.checked = self.policy is not None
        self._factors = None

    def factors(self):
        """The target's conditionals as :class:`_Factors` when the policy offers
        ``conditional_factors`` (``agents.PlackettLuce`` does), else ``None``."""
        if self.policy is None or not callable(getattr(self.policy, "conditional_factors",
                                                       None)):
            return None
        if self._factors is None:
            self._factors = _Factors(self.log, self.policy, self.cascade)
        return self._factors

    def _policy_chunks(self, rows):
        for lo in range(0, rows.size, self.step):
            r = rows[lo:lo + self.step]
            D = _probs(self.policy.conditional_probabilities(self.log.observations(r),
                                                             self.log.action[r]),
                       "target_action_dist", (r.size,) + self.shape[1:])
            self._check(r, D)
            yield r, D

    def chunks(self, rows=None):
        """``(rows, D[rows])`` for consecutive chunks of ``rows`` (all by default): views of
        the array when there is one and all rows are asked for; the policy's answers,
        checked as they come, otherwise."""
        if self.full is None and self.keep:
            parts = [D for _, D in self._policy_chunks(np.arange(self.shape[0]))]  # checked
            self.full = np.concatenate(parts) if parts else np.zeros(self.shape)
        if self.full is None:
            rows = np.arange(self.shape[0]) if rows is None else rows
            yield from self._policy_chunks(np.asarray(rows, dtype=np.int64))
            return
        every = rows is None
        rows = np.arange(self.shape[0]) if every else np.asarray(rows, dtype=np.int64)
        for lo in range(0, rows.size, self.step):
            r = rows[lo:lo + self.step]
            D = self.full[lo:lo + r.size] if every else self.full[r]
            if not self.checked:
                self._check(r, D)
            yield r, D
        if every:
            self.checked = True

    def _check(self, r, D):
        s = D.sum(axis=2)
        bad = np.flatnonzero(np.abs(s - 1.0).max(axis=1) > 1e-6)
        if bad.size:
            raise ArgumentValueError("target_action_dist", "distributions over the items "
                                     "(rows summing to 1)",
                                     f"sums {s[bad[0]].tolist()} at record {r[bad[0]]}")
        _check_implied(np.take_along_axis(D, self.log.action[r][:, :, None], axis=2)[:, :, 0],
                       self.cascade[r], r)


def _check_implied(shown, cascade, records) -> None:
    """The target's probabilities of the logged items (``shown``, (rows, k)) multiply up to
    ``target_pscore_cascade`` (``cascade``) on ``records``."""
    implied = np.cumprod(shown, axis=1)
    ok = np.isclose(implied, cascade, rtol=1e-6, atol=1e-12).all(axis=1)
    bad = np.flatnonzero(~ok)
    if bad.size:
        raise ArgumentValueError(
            "target_action_dist", "consistent with `target_pscore_cascade` (the product "
            "of its probabilities of the logged items is the prefix probability)",
            f"{implied[bad[0]].tolist()} against {cascade[bad[0]].tolist()} at "
            f"record {records[bad[0]]}")


_ILL_CONDITIONED = 1e-4  # remaining weight below this share of the total: summed item by item
_DENSE_SUMS = 16  # (fold, item) x context sums dense up to this many cells per record


class _Factors:
    """``pi(a | x_i, s_i0 .. s_i,j-1) = W[row_i, a] / R[i, j]`` for ``a`` not shown above
    ``j``: the policy's ``conditional_factors(observations, slates)``, asked chunk by chunk
    and merged (distinct weight rows kept once), then checked like :class:`_Dist` checks
    an array (rows summing to 1, consistent with ``target_pscore_cascade``).

    Sums over the items not shown are taken as ``W . t`` minus the shown items' share,
    which loses ``log10(total / R)`` digits: the records where the remaining weight ``R``
    falls below ``_ILL_CONDITIONED`` of their row's total (``ill``) are expanded into
    their dense rows (:meth:`chunks`) and summed item by item instead.
    """

    def __init__(self, log, policy, cascade):
        n, k = log.action.shape
        m = log.n_items
        step = max(1, _CHUNK_CELLS // m)
        parts, row, R = [], np.empty(n, np.int64), np.empty((n, k))
        offset = 0
        for lo in range(0, n, step):
            r = np.arange(lo, min(n, lo + step))
            got = policy.conditional_factors(log.observations(r), log.action[r])
            w, ix, rem = self._checked_chunk(got, r.size, k, m)
            parts.append(w)
            row[r] = ix + offset
            R[r] = rem
            offset += w.shape[0]
        W = np.concatenate(parts) if parts else np.zeros((0, m))
        if len(parts) > 1:  # the same context in several chunks: one row
            W = np.ascontiguousarray(W)
            view = W.view(np.dtype((np.void, W.dtype.itemsize * m))).ravel()
            _, first, inverse = np.unique(view, return_index=True, return_inverse=True)
            W, row = W[first], inverse.ravel()[row]
        self.log, self.W, self.row, self.R = log, W, row, R
        self.Ws = W[row[:, None], log.action]                  # weights of the shown items
        self.before = np.cumsum(self.Ws, axis=1) - self.Ws      # ... shown above j
        total = W.sum(axis=1)[row]
        rest = total[:, None] - self.before
        off = ~np.all(np.abs(rest - R) <= 1e-6 * R + 1e-12 * total[:, None], axis=1)
        if off.any():
            i = int(np.flatnonzero(off)[0])
            raise ArgumentValueError("target_action_dist", "conditional_factors whose "
                                     "`remaining` is the weight of the items not shown (rows "
                                     "summing to 1)", f"{R[i].tolist()} against "
                                     f"{rest[i].tolist()} at record {i}")
        _check_implied(self.Ws / R, cascade, np.arange(n))
        self.ill = np.flatnonzero((R < _ILL_CONDITIONED * total[:, None]).any(axis=1))
        self.well = np.setdiff1d(np.arange(n), self.ill)

    @staticmethod
    def _checked_chunk(got, n, k, m):
        what = ("conditional_factors returning (weights (u, n_items) >= 0, row (n,) in [0, "
                "u), remaining (n, k) > 0), finite")
        try:
            w, ix, rem = got
            w = np.asarray(w, dtype=np.float64)
            ix = np.asarray(ix)
            rem = np.asarray(rem, dtype=np.float64)
        except (TypeError, ValueError):
            raise ArgumentValueError("target_action_dist", what, repr(got)[:80]) from None
        if (w.ndim != 2 or w.shape[1] != m or ix.shape != (n,) or rem.shape != (n, k)
                or not np.issubdtype(ix.dtype, np.integer)):
            raise ArgumentValueError("target_action_dist", what + f" with n = {n}, k = {k}, "
                                     f"n_items = {m}", f"shapes {w.shape}, {ix.shape}, "
                                     f"{rem.shape}")
        if (not np.all(np.isfinite(w)) or np.any(w < 0) or not np.all(np.isfinite(rem))
                or np.any(rem <= 0) or np.any((ix < 0) | (ix >= w.shape[0]))):
            raise ArgumentValueError("target_action_dist", what,
                                     "negative, zero, out-of-range or non-finite values")
        return w, ix.astype(np.int64), rem

    def chunks(self, rows):
        """``(rows, D[rows])`` of the dense conditionals, chunk by chunk."""
        k, m = self.R.shape[1], self.W.shape[1]
        step = max(1, _CHUNK_CELLS // (k * m))
        for lo in range(0, rows.size, step):
            r = rows[lo:lo + step]
            D = self.W[self.row[r]][:, None, :] / self.R[r][:, :, None]
            shown = self.log.action[r]
            for j in range(1, k):
                D[np.arange(r.size)[:, None], j:, shown[:, j - 1:j]] = 0.0
            yield r, D

    def next_sums(self, csum, fold, n_folds):
        """Add to ``csum[j]`` ((n_folds * m, m)) the sums of ``D[i, j+1]`` over the
        well-conditioned records of each (fold, item at ``j``):
        ``G_j W`` (``G_j`` the (fold, item) x context weights ``1 / R[i, j+1]``) minus the
        items shown at ``0 .. j``."""
        i = self.well
        k, m, u = self.R.shape[1], self.W.shape[1], self.W.shape[0]
        shown, row = self.log.action[i], self.row[i]
        G_cells = n_folds * m * u
        for j in range(k - 1):
            g = fold[i] * m + shown[:, j]
            c = 1.0 / self.R[i, j + 1]
            if G_cells <= _DENSE_SUMS * max(i.size, 1):  # few contexts: dense, through BLAS
                G = np.bincount(g * u + row, weights=c, minlength=G_cells).reshape(n_folds * m, u)
                csum[j] += G @ self.W
            else:
                import scipy.sparse as sp
                csum[j] += sp.csr_matrix((c, (g, row)), shape=(n_folds * m, u)) @ self.W
            idx = (g[:, None] * m + shown[:, :j + 1]).ravel()
            csum[j].reshape(-1)[:] -= np.bincount(idx, weights=(c[:, None] * self.Ws[i, :j + 1]
                                                                ).ravel(), minlength=csum[j].size)

    def expectations(self, rows, table):
        """``sum_a pi(a | x_i, s_i0 .. s_i,j-1) table[j, a]`` for well-conditioned ``rows``."""
        k = self.R.shape[1]
        shown = self.log.action[rows]
        out = (self.W @ table.T)[self.row[rows]]                       # (rows, k)
        for j in range(1, k):
            out[:, j] -= (self.Ws[rows, :j] * table[j][shown[:, :j]]).sum(axis=1)
        return out / self.R[rows]


def _folds(n: int, n_folds: int, rng) -> np.ndarray:
    fold = np.empty(n, dtype=np.int64)
    fold[rng.permutation(n)] = np.arange(n) % n_folds
    return fold


class SlateRewardModel:
    """Cascade-DR's reward model fitted on one slate log, for every target policy.

    Made by :func:`evaluators.fit_reward_model` from a :class:`~simulator.logs.SlateLog`;
    pass it to :func:`cascade_dr` as ``reward_model=``. Cascade-DR's Q function depends on
    the target (its recursion averages the next position over the target's distribution),
    so what a log can share is what does not: the fold split and, for the "mean" model, the
    count and reward sum of every (fold, position, item). :func:`cascade_dr` completes the
    target's part. Like :class:`evaluators.RewardModel` it records its log: passed with
    another log (or one whose context, slates or rewards differ) it is refused with a
    ``ValueError`` naming ``reward_model``.

    Attributes
    ----------
    model : "mean" or the regressor
    n_folds : int
    folds : array (n_rounds,) of int
        The fold of each record (all 0 when ``n_folds`` is 1: fit and predict on the log).
    """

    __slots__ = ("_log", "model", "n_folds", "folds", "_counts")

    def __init__(self, log, model, n_folds: int, folds: np.ndarray):
        self._log, self.model, self.n_folds = log, model, n_folds
        folds.setflags(write=False)
        self.folds = folds
        self._counts = _slate_counts(log, folds, n_folds) if model == "mean" else None

    def __repr__(self) -> str:
        what = self.model if isinstance(self.model, str) else type(self.model).__name__
        n, k = self._log.action.shape
        return (f"SlateRewardModel(model={what!r}, n_folds={self.n_folds}, n_rounds={n}, "
                f"len_list={k}, n_items={self._log.n_items})")

    def check(self, log, name: str = "reward_model") -> None:
        """Raise ``ValueError`` naming ``name`` unless ``log`` holds the records the model was
        fitted on (the same context, slates and rewards)."""
        mine = self._log
        if log is mine:
            return
        if (log.action.shape, log.n_items) != (mine.action.shape, mine.n_items):
            raise ArgumentValueError(
                name, f"a reward model fitted on this log ({log.n_rounds} slates of "
                f"{log.action.shape[1]} of {log.n_items} items)", f"one fitted on a log of "
                f"{mine.n_rounds} slates of {mine.action.shape[1]} of {mine.n_items} items")
        for field in ("action", "reward", "context"):
            x, y = getattr(log, field), getattr(mine, field)
            if x is not y and not np.array_equal(x, y):
                raise ArgumentValueError(
                    name, "a reward model fitted on this log", f"one fitted on a log whose "
                    f"{field} differs (the log changed since the model was fitted: fit it "
                    "again with fit_reward_model)")


def _check_slate_model(model):
    if isinstance(model, str):
        if model not in _MODELS:
            raise ArgumentValueError("model", "'mean' or a regressor with fit/predict for a "
                                     "SlateLog (Cascade-DR's Q model)", repr(model))
        return model
    if callable(getattr(model, "fit", None)) and callable(getattr(model, "predict", None)):
        return model
    raise ArgumentTypeError("model", "'mean' or a regressor with fit/predict for a SlateLog "
                            "(Cascade-DR's Q model)", type(model).__name__)


def _fit_slate_model(log, model, n_folds, rng) -> SlateRewardModel:
    """:func:`evaluators.fit_reward_model` for a slate log."""
    log = check_slate_log(log)
    model = _check_slate_model(model)
    n_folds = check_int(n_folds, "n_folds", low=1, high=max(1, log.n_rounds))
    return SlateRewardModel(log, model, n_folds, _folds(log.n_rounds, n_folds,
                                                        as_generator(rng)))


def _slate_counts(log, fold, n_folds):
    """Count and reward sum of every (fold, position, item), (n_folds, k, n_items) each."""
    k, m = log.action.shape[1], log.n_items
    cnt = np.zeros((n_folds, k, m))
    rsum = np.zeros((n_folds, k, m))
    for j in range(k):
        key = fold * m + log.action[:, j]
        cnt[:, j] = np.bincount(key, minlength=n_folds * m).reshape(n_folds, m)
        rsum[:, j] = np.bincount(key, weights=log.reward[:, j],
                                 minlength=n_folds * m).reshape(n_folds, m)
    return cnt, rsum


def _q_mean(log, dist, fold, n_folds, counts):
    """Cross-fitted per-(position, item) means of the recursive target.

    ``T_j(a) = mean_{i: s_ij = a} [r_ij + pi(.|x_i, s_i0..s_ij) . T_{j+1}]
    = Rbar_j(a) + C_j(a, .) . T_{j+1}`` with ``C_j(a, .)`` the mean of the next position's
    distribution over the training records showing ``a`` at ``j``: two passes over the
    action distribution (each fold's sums, then ``sum_a pi(a|...) T_j(a)``), memory
    ``O(n_folds k n_items^2)``. Items never shown at ``j`` in training get the position's
    mean target. With the policy's factors (:class:`_Factors`) both passes skip the dense
    distribution for the well-conditioned records; the dense loop below is the reference.
    """
    import scipy.sparse as sp

    n, k = log.action.shape
    m = log.n_items
    K = n_folds
    cnt, rsum = counts  # the target-free part (per log: SlateRewardModel)
    csum = np.zeros((k, K * m, m))
    factors = dist.factors()
    if factors is not None:  # the well-conditioned records in factored form, the rest dense
        factors.next_sums(csum, fold, K)
    dense = dist.chunks() if factors is None else factors.chunks(factors.ill)
    for rows, D in dense:
        for j in range(k - 1):  # sums of D[i, j+1] over the records of each (fold, item at j)
            onehot = sp.csr_matrix((np.ones(rows.size), (fold[rows] * m + log.action[rows, j],
                                                         np.arange(rows.size))),
                                   shape=(K * m, rows.size))
            csum[j] += onehot @ D[:, j + 1]
    csum = csum.reshape(k, K, m, m)
    tables = np.zeros((K, k, m))
    for f in range(K):
        if K > 1 and (fold != f).any():
            c, r = cnt.sum(0) - cnt[f], rsum.sum(0) - rsum[f]
            cs = csum.sum(axis=1) - csum[:, f]
        else:
            c, r, cs = cnt.sum(0), rsum.sum(0), csum.sum(axis=1)
        T = tables[f]
        for j in range(k - 1, -1, -1):
            tot = r[j] + (cs[j] @ T[j + 1] if j < k - 1 else 0.0)
            T[j] = np.where(c[j] > 0, tot / np.maximum(c[j], 1), tot.sum() / c[j].sum())
    q_logged = tables[fold[:, None], np.arange(k)[None, :], log.action]
    q_expect = np.empty((n, k))
    if factors is not None:
        for f in range(K):
            sel = factors.well[fold[factors.well] == f]
            q_expect[sel] = factors.expectations(sel, tables[f])
    for rows, D in (dist.chunks() if factors is None else factors.chunks(factors.ill)):
        fr = fold[rows]
        for f in range(K):
            sel = np.flatnonzero(fr == f)
            if sel.size:
                q_expect[rows[sel]] = np.einsum("ijm,jm->ij", D[sel], tables[f])
    return q_logged, q_expect


def _features(context, items, m: int) -> np.ndarray:
    X = np.zeros((items.size, context.shape[1] + m))
    X[:, :context.shape[1]] = context
    X[np.arange(items.size), context.shape[1] + items] = 1.0
    return X


def _q_regressor(log, dist, fold, n_folds, regressor):
    """Cross-fitted Q models, one deep copy of ``regressor`` per (fold, position)."""
    n, k = log.action.shape
    m = log.n_items
    q_logged = np.empty((n, k))
    q_expect = np.empty((n, k))
    items = np.arange(m)

    def predict_all(model, rows):
        X = _features(np.repeat(log.context[rows], m, axis=0), np.tile(items, rows.size), m)
        out = np.asarray(model.predict(X), dtype=np.float64)
        if out.shape != (rows.size * m,):
            raise ArgumentValueError("reward_model", "a regressor whose predict(X) returns "
                                     "one value per row of X", f"shape {out.shape}")
        return out.reshape(rows.size, m)

    for f in range(n_folds):
        train = np.flatnonzero(fold != f) if n_folds > 1 else np.arange(n)
        test = np.flatnonzero(fold == f) if n_folds > 1 else np.arange(n)
        if train.size == 0:
            train = np.arange(n)
        nxt = None
        for j in range(k - 1, -1, -1):
            y = np.empty(train.size)
            pos = 0
            for rows, D in dist.chunks(train):
                y[pos:pos + rows.size] = log.reward[rows, j]
                if nxt is not None:
                    y[pos:pos + rows.size] += (D[:, j + 1] * predict_all(nxt, rows)).sum(axis=1)
                pos += rows.size
            model = copy.deepcopy(regressor)
            model.fit(_features(log.context[train], log.action[train, j], m), y)
            for rows, D in dist.chunks(test):
                Q = predict_all(model, rows)
                q_logged[rows, j] = Q[np.arange(rows.size), log.action[rows, j]]
                q_expect[rows, j] = (D[:, j] * Q).sum(axis=1)
            nxt = model
    return q_logged, q_expect


def cascade_dr(log, target_pscore_cascade, target_action_dist, *, reward_model="mean",
               n_folds: int | None = None, rng=None, ci: float = 0.95) -> OPEEstimate:
    """Cascade doubly robust (Cascade-DR): RIPS with a Q-function as control variate.

    Parameters
    ----------
    log : simulator.logs.SlateLog
        With ``reward_type="clicks"``.
    target_pscore_cascade : array (n_rounds, len_list)
        ``pi(s_i0 .. s_ij | x_i)``.
    target_action_dist : array (n_rounds, len_list, n_items) or slate policy
        ``pi(a | x_i, s_i0 .. s_i,j-1)``: the target's distribution at position ``j`` given
        the logged items above (rows sum to 1; consistent with ``target_pscore_cascade``).
        Or the target policy itself, with ``conditional_probabilities(observations,
        slates)`` (``agents.PlackettLuce``), called on chunks of ``log.observations()`` so
        that the (n_rounds, len_list, n_items) array never exists whole. A policy that also
        has ``conditional_factors(observations, slates)`` -> ``(weights (u, n_items), row
        (n,), remaining (n, len_list))``, meaning ``pi(a | ...) = weights[row_i, a] /
        remaining[i, j]`` for the items not shown above ``j`` (``agents.PlackettLuce``
        does), is used in that form by the ``"mean"`` model: ``O(n k^2 + u n_items k)``
        instead of ``O(n k n_items)``, the same estimate to rounding (records whose unshown
        weight is below 1e-4 of their total are summed item by item).
    reward_model : "mean", array (n_rounds, len_list, n_items), regressor or SlateRewardModel
        ``Q_j(x_i, s_i0 .. s_i,j-1, a)``, the expected reward from position ``j`` to the end
        when ``a`` is at ``j`` after the logged items and ``pi`` fills the rest:

        * an array of these values (OBP's ``q_hat``), used as given;
        * ``"mean"``: per (position, item) means of the recursive target
          ``y_ij = r_ij + sum_a pi(a | x_i, s_i0..s_ij) Q_{j+1}(a)``, fitted from the last
          position up (Kiyohara et al.'s recursion) on the other folds;
        * an object with ``fit(X, y)`` and ``predict(X)`` (e.g. a scikit-learn regressor):
          one deep copy per (fold, position), features ``[context, one-hot item]``, same
          recursion; its predictions for every item cost ``n_rounds * n_items`` rows per
          position;
        * a :class:`SlateRewardModel` from ``evaluators.fit_reward_model(log, "mean" or
          regressor, n_folds=..., rng=...)``: one of the two above with its folds (and the
          "mean" model's per-item sums) computed once per log for every target policy.
    n_folds : int in [1, n_rounds], default 2 (or the fitted model's)
        Cross-fitting folds for a fitted model (1: fit and predict on the whole log); each
        record's Q comes from models that did not see it.
    rng : None, int, SeedSequence or Generator
        Assignment of records to folds (not used with a SlateRewardModel).
    ci : float in (0, 1)

    Returns
    -------
    OPEEstimate

    Raises
    ------
    TypeError, ValueError
        Bad log, shapes or probabilities; an action distribution inconsistent with the
        prefix probabilities; a reward model of an unknown kind.

    Notes
    -----
    Kiyohara, Saito, Matsuhiro, Narita, Shimizu & Yamamoto (2022), "Doubly robust
    off-policy evaluation for ranking policies under the cascade behavior model"::

        V = mean_i sum_j [ w_i,0..j (r_ij - Q_j(s_ij)) + w_i,0..j-1 sum_a pi(a|...) Q_j(a) ]

    with ``w_i,0..j = pi(s_i0..s_ij|x_i) / mu(s_i0..s_ij|x_i)`` and ``w_i,0..-1 = 1``
    (OBP's ``SlateCascadeDoublyRobust``). Unbiased under the cascade assumption whatever
    ``Q`` (for ``Q = 0`` it is RIPS), and of lower variance the closer ``Q`` is to the true
    reward-to-go. With a fitted model the term of record ``i`` depends on the other folds'
    records: the standard error treats the terms as independent, which the cross-fitting
    makes nearly true.
    """
    log = check_slate_log(log)
    _check_clicks(log, "cascade_dr")
    level = check_level(ci)
    n, k = log.action.shape
    Wc = _probs(target_pscore_cascade, "target_pscore_cascade", (n, k))
    dist = _Dist(log, target_action_dist, Wc)
    if n_folds is not None:
        n_folds = check_int(n_folds, "n_folds", low=1, high=max(1, log.n_rounds))
    fitted = reward_model
    if isinstance(reward_model, str):
        if reward_model not in _MODELS:
            raise ArgumentValueError("reward_model", "'mean', an array (n_rounds, len_list, "
                                     "n_items) or a regressor with fit/predict",
                                     repr(reward_model))
    if isinstance(reward_model, str) or (callable(getattr(reward_model, "fit", None)) and
                                         callable(getattr(reward_model, "predict", None))):
        fitted = _fit_slate_model(log, reward_model, 2 if n_folds is None else n_folds, rng)
    if isinstance(fitted, SlateRewardModel):
        fitted.check(log)
        if n_folds is not None and n_folds != fitted.n_folds:
            raise ArgumentValueError("n_folds", f"{fitted.n_folds} (the value `reward_model` "
                                     "was fitted with) or left out", repr(n_folds))
        if fitted.model == "mean":
            q_logged, q_expect = _q_mean(log, dist, fitted.folds, fitted.n_folds,
                                         fitted._counts)
        else:
            q_logged, q_expect = _q_regressor(log, dist, fitted.folds, fitted.n_folds,
                                              fitted.model)
    else:
        q = np.asarray(reward_model)
        if not (np.issubdtype(q.dtype, np.floating) or np.issubdtype(q.dtype, np.integer)):
            raise ArgumentTypeError("reward_model", "'mean', an array (n_rounds, len_list, "
                                    "n_items) or a regressor with fit/predict",
                                    type(reward_model).__name__)
        q = q.astype(np.float64)
        if q.shape != (n, k, log.n_items):
            if q.ndim == 1 and q.size == n * k * log.n_items:
                q = q.reshape(n, k, log.n_items)
            else:
                raise ArgumentValueError("reward_model", f"an array of shape ({n}, {k}, "
                                         f"{log.n_items})", f"shape {q.shape}")
        if not np.all(np.isfinite(q)):
            raise ArgumentValueError("reward_model", "finite", "nan or inf")
        q_logged = np.take_along_axis(q, log.action[:, :, None], axis=2)[:, :, 0]
        q_expect = np.empty((n, k))
        for rows, D in dist.chunks():
            q_expect[rows] = np.einsum("ijm,ijm->ij", D, q[rows])
    W = Wc / log.pscore_cascade
    Wprev = np.ones((n, k))
    Wprev[:, 1:] = W[:, :-1]
    terms = (W * (log.reward - q_logged) + Wprev * q_expect).sum(axis=1)
    return _estimate(terms, level, _position_ess(W), "cascade_dr", int(np.count_nonzero(W)))
