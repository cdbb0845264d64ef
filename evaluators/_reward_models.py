"""Reward models q(x, a) for the direct method and the doubly robust family.

A reward model is given to an estimator as ``model=``:

* ``"ridge"`` -- one ridge regression per action of the reward on ``[1, context]`` (penalty
  1, intercept unpenalised);
* ``"mean"`` -- the mean reward of each action;
* an array of predicted rewards, ``(n_rounds, n_actions)`` or Open Bandit Pipeline's
  ``estimated_rewards_by_reg_model`` shape ``(n_rounds, n_actions, 1)``: used as it is;
* any regressor with scikit-learn's ``fit(X, y)`` / ``predict(X)`` (duck-typed; scikit-learn
  is not a dependency). It is copied (``copy.deepcopy``) before every fit, so the object
  passed in is never fitted or changed. Feature encoding: ``X = [context, one_hot(action)]``,
  ``n_rounds x (dim_context + n_actions)``, one model for all actions (OBP's
  ``RegressionModel`` encoding with its default one-hot ``action_context``); with
  ``per_action=True`` one copy per action is fitted on that action's records with
  ``X = context``. Actions with no training record are predicted by the mean training
  reward (0 when there is no training record at all);
* a :class:`RewardModel` from :func:`fit_reward_model`: one of the above fitted once on the
  log, shared by every estimator and every target policy evaluated on that log.

Fitted models are *cross-fitted* for the doubly robust family: the records are split into
``n_folds`` folds (drawn from ``rng``), and the predictions for a fold come from a model fitted
on the other folds, so that a record's own reward never enters its correction term. The split
depends on the records, not on their order: records are ranked by a hash of their content
before the random split, so permuting a log permutes its predictions and nothing else.

The model's own estimation error enters the intervals of the direct method, Switch-DR and
DRos (``model_variance=``): for the linear models ("ridge", "mean") analytically, by the
influence function of the ridge normal equations (the sandwich variance, ``O(n p^2)`` per
log); by refitting the model on bootstrap resamples of the records otherwise, and on request
as the reference (``model_variance="bootstrap"``).
"""

from __future__ import annotations

import copy
import math
import numbers

import numpy as np

from evaluators._validation import check_log as _check_log
from recloop_base.threads import blas_threads
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_generator,
    check_choice,
    check_int,
)

__all__ = ["MODELS", "MODEL_VARIANCES", "RewardModel", "fit_reward_model", "prepare",
           "resolve_model", "cross_fit", "fit_in_sample", "fit_predict", "fold_ids",
           "bootstrap_dm_values", "bootstrap_model_part", "check_n_folds",
           "check_model_variance"]

MODELS = ("ridge", "mean")
#: How the reward model's own variance enters an interval: "auto" is "analytic" for the
#: linear models and "bootstrap" for a regressor.
MODEL_VARIANCES = ("auto", "analytic", "bootstrap")
_RIDGE = 1.0
_PREDICT_CELLS = 1 << 22  # feature cells per predict() call of a joint regressor


class _Model:
    """A validated ``model=`` argument: ``kind`` in {"ridge", "mean", "array", "regressor"}."""

    __slots__ = ("kind", "array", "regressor", "per_action")

    def __init__(self, kind, array=None, regressor=None, per_action=False):
        self.kind, self.array, self.regressor, self.per_action = kind, array, regressor, per_action

    @property
    def fitted(self) -> bool:
        return self.kind != "array"


def _check_per_action(per_action) -> bool:
    if not isinstance(per_action, (bool, np.bool_)):
        raise ArgumentTypeError("per_action", "a bool", f"{type(per_action).__name__}")
    return bool(per_action)


def resolve_model(log, model, *, per_action=False, name="model") -> _Model:
    """Validate a model specification ``model`` against ``log`` (see the module docstring)."""
    per_action = _check_per_action(per_action)
    if isinstance(model, str):
        return _Model(check_choice(model, name, MODELS))
    if callable(getattr(model, "fit", None)) and callable(getattr(model, "predict", None)):
        return _Model("regressor", regressor=model, per_action=per_action)
    if isinstance(model, np.ndarray) or isinstance(model, (list, tuple)):
        q = np.asarray(model)
        if q.dtype.kind not in "fiu":
            raise ArgumentTypeError(name, "an array of predicted rewards (float)",
                                    f"dtype {q.dtype}")
        if q.dtype.kind != "f":
            q = q.astype(np.float64)
        n, k = log.n_rounds, log.n_actions
        if q.ndim == 3 and q.shape[2] == 1:
            q = q.reshape(q.shape[0], q.shape[1])
        if q.shape != (n, k):
            raise ArgumentValueError(
                name, f"an array of shape (n_rounds, n_actions) = ({n}, {k}) or ({n}, {k}, 1)",
                f"shape {np.shape(model)}")
        # finiteness is checked on the per-record terms (one pass fewer over q)
        return _Model("array", array=q)
    raise ArgumentTypeError(
        name, f"one of {MODELS}, an array (n_rounds, n_actions) of predicted rewards, a "
        "regressor with fit(X, y) and predict(X), or a RewardModel from fit_reward_model",
        type(model).__name__)


# -- fold split ---------------------------------------------------------------------------
def _record_hash(log) -> np.ndarray:
    """A uint64 hash of each record's content (context, action, reward, pscore)."""
    def mix(x):
        x = x ^ (x >> np.uint64(30))
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))

    h = mix(log.action.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15))
    cols = [log.reward, log.pscore] + [log.context[:, i] for i in range(log.dim_context)]
    for col in cols:
        h = mix(h ^ np.ascontiguousarray(col, dtype=np.float64).view(np.uint64))
    return h


def fold_ids(log, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold of each record, (n_rounds,): a random split of the records ranked by content."""
    n = log.n_rounds
    order = np.argsort(_record_hash(log), kind="stable")
    folds = np.empty(n, dtype=np.int64)
    folds[order] = rng.permutation(n) % n_folds
    return folds


# -- fitting ------------------------------------------------------------------------------
def _design(context) -> np.ndarray:
    return np.hstack([np.ones((context.shape[0], 1)), context])


def _fit_ridge(Z, action, reward, K):
    """Per-action ridge coefficients (K, 1 + d); actions never seen: the overall mean."""
    p = Z.shape[1]
    B = np.zeros((K, p))
    B[:, 0] = float(reward.mean()) if reward.size else 0.0
    pen = np.full(p, _RIDGE)
    pen[0] = 0.0  # intercept unpenalised
    order = np.argsort(action, kind="stable")
    counts = np.bincount(action, minlength=K)
    starts = np.concatenate([[0], np.cumsum(counts)])
    for k in np.flatnonzero(counts):
        rows = order[starts[k]:starts[k + 1]]
        Zk = Z[rows]
        B[k] = np.linalg.solve(np.einsum("jp,jq->pq", Zk, Zk) + np.diag(pen),
                               np.einsum("jp,j->p", Zk, reward[rows]))
    return B


def _grams(Z, groups, n_groups, reward):
    """Per group of records: ``Z_g' Z_g`` (n_groups, p, p), ``Z_g' r_g`` (n_groups, p) and
    the count, one BLAS product per group on one thread (machine-free bits); with the
    records' order sorted by group, each group's first row and the sorted ``Z``."""
    p = Z.shape[1]
    order = _stable_order(groups, n_groups)
    counts = np.bincount(groups, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(counts)])
    Zs, rs = Z[order], reward[order]
    G, b = np.zeros((n_groups, p, p)), np.zeros((n_groups, p))
    with blas_threads(1):
        for g in np.flatnonzero(counts):
            Zg = Zs[starts[g]:starts[g + 1]]
            G[g] = Zg.T @ Zg
            b[g] = Zg.T @ rs[starts[g]:starts[g + 1]]
    return G, b, counts, order, starts, Zs


def _stable_order(keys, n_keys: int) -> np.ndarray:
    """``argsort(keys, kind="stable")`` for small non-negative int keys (numpy's radix sort
    for 16-bit keys: the same order, 5x faster than on int64)."""
    if n_keys <= np.iinfo(np.uint16).max:
        keys = keys.astype(np.uint16)
    return np.argsort(keys, kind="stable")


def _solve_ridge(G, b, counts, overall) -> np.ndarray:
    """Coefficients (K, p) from per-action Grams: ``(G_k + Lambda)^-1 b_k`` for the actions
    with records, ``[overall, 0, ...]`` for the others."""
    K, p = b.shape
    coef = np.zeros((K, p))
    coef[:, 0] = overall
    seen = np.flatnonzero(counts)
    if seen.size:
        pen = np.full(p, _RIDGE)
        pen[0] = 0.0  # intercept unpenalised
        coef[seen] = np.linalg.solve(G[seen] + np.diag(pen), b[seen][:, :, None])[:, :, 0]
    return coef


def _cross_fit_ridge(L: dict, folds, reward, n_folds: int) -> np.ndarray:
    """Cross-fitted ridge predictions (n, K) from the per-(action, fold) Grams of
    :meth:`RewardModel._linear`: fold f's coefficients solve the sum of the other folds'
    Grams (the fit :func:`fit_predict` makes on the other folds' records, to rounding;
    :func:`cross_fit` is the reference)."""
    Z = L["Z"]
    n, p = Z.shape
    K = L["G"].shape[0] // n_folds
    G, b = L["G"].reshape(K, n_folds, p, p), L["b"].reshape(K, n_folds, p)
    counts = L["group_counts"].reshape(K, n_folds)
    rsum = np.bincount(folds, weights=reward, minlength=n_folds)
    q = np.empty((n, K))
    for f in range(n_folds):
        rows = np.flatnonzero(folds == f)
        if not rows.size:
            continue
        others = np.arange(n_folds) != f
        c = counts[:, others].sum(axis=1)
        n_train = int(c.sum())
        overall = float(rsum[others].sum()) / n_train if n_train else 0.0
        coef = _solve_ridge(G[:, others].sum(axis=1), b[:, others].sum(axis=1), c, overall)
        with blas_threads(1):
            q[rows] = Z[rows] @ coef.T
    return q


def _fit_mean(action, reward, K) -> np.ndarray:
    counts = np.bincount(action, minlength=K)
    sums = np.bincount(action, weights=reward, minlength=K)
    overall = float(reward.mean()) if reward.size else 0.0
    return np.where(counts > 0, sums / np.maximum(counts, 1), overall)


def _check_prediction(y, n, who) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape != (n,):
        raise ValueError(f"the regressor's predict() must return {n} values; got shape "
                         f"{np.shape(y)} from {who}.")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"the regressor's predict() returned nan or inf ({who}).")
    return y


def _predict_ridge(log, B, predict_rows, out) -> None:
    """``out[rows] = [1, context] @ B.T`` for ``predict_rows``, chunk by chunk."""
    K = B.shape[0]
    for rows in _rows_chunks(predict_rows, K):
        Zr = _design(log.context[rows])
        # BLAS for large products; einsum for small ones, where BLAS threads thrash
        out[rows] = Zr @ B.T if Zr.size * K >= (1 << 22) else np.einsum("np,kp->nk", Zr, B)


def _fit_regressor(proto, X, y):
    m = copy.deepcopy(proto)
    m.fit(X, y)
    return m


def _rows_chunks(rows, width):
    """Chunks of ``rows`` whose (chunk, width) blocks stay small: predictions are written
    into ``q`` chunk by chunk, never as a second (n, K) array."""
    step = max(1, _PREDICT_CELLS // max(1, width))
    for s in range(0, rows.shape[0], step):
        yield rows[s:s + step]


def fit_predict(log, model: _Model, train, predict_rows, out) -> None:
    """Fit ``model`` on records ``train`` and write q for records ``predict_rows`` (an index
    array) into ``out[predict_rows]`` (all actions)."""
    K = log.n_actions
    a, r = log.action[train], log.reward[train]
    if model.kind == "mean":
        out[predict_rows] = _fit_mean(a, r, K)
    elif model.kind == "ridge":
        _predict_ridge(log, _fit_ridge(_design(log.context[train]), a, r, K), predict_rows,
                       out)
    elif model.per_action:
        overall = float(r.mean()) if r.size else 0.0
        ctx, ctx_train = log.context[predict_rows], log.context[train]
        for k in range(K):
            mine = a == k
            if not mine.any():
                out[predict_rows, k] = overall
                continue
            m = _fit_regressor(model.regressor, ctx_train[mine], r[mine])
            out[predict_rows, k] = _check_prediction(m.predict(ctx), ctx.shape[0],
                                                     f"action {k}")
    elif r.size == 0:
        out[predict_rows] = 0.0
    else:
        eye = np.eye(K)
        X = np.hstack([log.context[train], eye[a]])
        m = _fit_regressor(model.regressor, X, r)
        for rows in _rows_chunks(predict_rows, K * (log.dim_context + K)):
            c = log.context[rows]
            Xp = np.hstack([np.repeat(c, K, axis=0), np.tile(eye, (c.shape[0], 1))])
            out[rows] = _check_prediction(m.predict(Xp), c.shape[0] * K,
                                          "the joint model").reshape(c.shape[0], K)


def cross_fit(log, model: _Model, folds: np.ndarray, n_folds: int) -> np.ndarray:
    """q (n_rounds, n_actions): the array itself, or cross-fitted predictions of a fitted model
    (each fold of ``folds`` predicted by the model fitted on the other folds)."""
    if model.kind == "array":
        return model.array
    q = np.empty((log.n_rounds, log.n_actions))
    for f in range(n_folds):
        rows = np.flatnonzero(folds == f)
        if rows.size:
            fit_predict(log, model, np.flatnonzero(folds != f), rows, q)
    return q


def fit_in_sample(log, model: _Model) -> np.ndarray:
    """q (n_rounds, n_actions) of a model fitted on the whole log (or the array itself)."""
    if model.kind == "array":
        return model.array
    q = np.empty((log.n_rounds, log.n_actions))
    everything = np.arange(log.n_rounds)
    fit_predict(log, model, everything, everything, q)
    return q


def check_n_folds(n_folds, n_rounds: int) -> int:
    """An int in [2, max(2, n_rounds)]: more folds than records only adds empty folds."""
    return check_int(n_folds, "n_folds", low=2, high=max(2, n_rounds))


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _children(gen: np.random.Generator, n: int) -> list:
    """``n`` independent child SeedSequences of a Generator's stream."""
    seq = getattr(gen.bit_generator, "seed_seq", None)
    if not isinstance(seq, np.random.SeedSequence):  # a generator without one: seed by a draw
        seq = np.random.SeedSequence(int(gen.integers(0, 2**63)))
    return seq.spawn(n)


# -- the fitted reward model ------------------------------------------------------------------
class RewardModel:
    """A reward model fitted on one log, shared by every model-based estimator and target.

    Made by :func:`fit_reward_model`; pass it as ``model=`` to :func:`direct_method`,
    :func:`doubly_robust`, :func:`sndr`, :func:`switch_dr`, :func:`dr_os` and
    :func:`select_estimator`, for any target policy evaluated on the same log. Everything
    in it depends on the log and the model, never on the target or the estimator: the fold
    split, the cross-fitted predictions (the doubly robust family), the in-sample fit (the
    direct method), and what the model's variance term needs (the influence of each record
    on the coefficients of a linear model; the bootstrap resamples and refits, drawn from
    the model's own stream). Each piece is computed once, when first needed.

    The model records the log it was fitted on: passed with another log, or with a log whose
    context, action or reward differ from those it saw, it is refused with a ``ValueError``
    naming ``model``.

    Attributes
    ----------
    model : "ridge", "mean", "array" or the regressor
        The specification it was fitted from (``"array"``: predictions given as they are).
    per_action, n_folds : bool, int
        As given to :func:`fit_reward_model`.
    n_rounds, n_actions : int
        The shape of the log it was fitted on.
    folds : array (n_rounds,) of int, or None
        The cross-fitting fold of each record (``None`` for an array).
    cross_fitted : array (n_rounds, n_actions)
        ``q(x_j, a)`` for every record from the model fitted on the other folds.
    in_sample : array (n_rounds, n_actions)
        ``q(x_j, a)`` from the model fitted on the whole log.
    coef : array (n_actions, p), linear models only
        The whole-log coefficients per action on ``[1, context]`` ("ridge") or ``[1]``
        ("mean").
    """

    __slots__ = ("_log", "_spec", "n_folds", "_seeds", "_cache")

    def __init__(self, log, spec: _Model, n_folds: int, gen):
        self._log, self._spec, self.n_folds = log, spec, n_folds
        self._seeds = _children(gen, 2) if spec.fitted else None  # folds, resamples
        self._cache: dict = {}

    def __repr__(self) -> str:
        what = self.model if isinstance(self.model, str) else type(self.model).__name__
        return (f"RewardModel(model={what!r}, per_action={self.per_action}, n_folds="
                f"{self.n_folds}, n_rounds={self.n_rounds}, n_actions={self.n_actions})")

    # -- what it is ---------------------------------------------------------------------
    @property
    def model(self):
        s = self._spec
        return s.regressor if s.kind == "regressor" else s.kind

    @property
    def kind(self) -> str:
        return self._spec.kind

    @property
    def per_action(self) -> bool:
        return self._spec.per_action

    @property
    def n_rounds(self) -> int:
        return self._log.n_rounds

    @property
    def n_actions(self) -> int:
        return self._log.n_actions

    @property
    def fitted(self) -> bool:
        """Whether it was fitted (and so has a variance of its own); False for an array."""
        return self._spec.fitted

    @property
    def linear(self) -> bool:
        """Whether its model variance has the analytic form ("ridge", "mean")."""
        return self._spec.kind in MODELS

    def _get(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # -- predictions ----------------------------------------------------------------------
    @property
    def folds(self):
        if not self.fitted:
            return None
        return self._get("folds", lambda: _frozen(fold_ids(
            self._log, self.n_folds, np.random.default_rng(self._seeds[0]))))

    @property
    def cross_fitted(self) -> np.ndarray:
        if not self.fitted:
            return self._spec.array
        if self.kind == "ridge":  # from per-(fold, action) Grams: cross_fit is the reference
            return self._get("cross_fitted", lambda: _frozen(_cross_fit_ridge(
                self._linear(), self.folds, self._log.reward, self.n_folds)))
        return self._get("cross_fitted", lambda: _frozen(cross_fit(
            self._log, self._spec, self.folds, self.n_folds)))

    @property
    def in_sample(self) -> np.ndarray:
        if not self.fitted:
            return self._spec.array
        if self.linear:
            return self._get("in_sample", lambda: _frozen(self._linear()["q"]))
        return self._get("in_sample", lambda: _frozen(fit_in_sample(self._log, self._spec)))

    @property
    def coef(self) -> np.ndarray:
        if not self.linear:
            raise AttributeError(f"a {self.kind!r} reward model has no coefficients (only "
                                 "'ridge' and 'mean' do)")
        return self._linear()["coef"]

    def refit(self, log, *, rng=None) -> "RewardModel":
        """The same specification fitted on another log (e.g. a log simulated from this
        one), with its own folds and resamples from ``rng``."""
        if not self.fitted:
            raise ValueError("an array of predictions cannot be refitted on another log.")
        return fit_reward_model(log, self.model, per_action=self.per_action,
                                n_folds=self.n_folds, rng=rng)

    def check(self, log, name: str = "model") -> None:
        """Raise ``ValueError`` naming ``name`` unless ``log`` holds the records the model was
        fitted on (the same context, action and reward)."""
        mine = self._log
        if log is mine:
            return
        if (log.n_rounds, log.n_actions) != (mine.n_rounds, mine.n_actions):
            raise ArgumentValueError(
                name, f"a reward model fitted on this log ({log.n_rounds} records, "
                f"{log.n_actions} actions)", f"one fitted on a log of {mine.n_rounds} records "
                f"and {mine.n_actions} actions")
        for field in ("action", "reward", "context"):
            x, y = getattr(log, field), getattr(mine, field)
            if x is not y and not np.array_equal(x, y):
                raise ArgumentValueError(
                    name, "a reward model fitted on this log", f"one fitted on a log whose "
                    f"{field} differs (the log changed since the model was fitted: fit it "
                    "again with fit_reward_model)")

    # -- the model's variance -------------------------------------------------------------
    def _linear(self) -> dict:
        """The whole-log fit of a linear model and the per-action statistics of its
        variance.

        Per action ``k`` with records: ``H_k = sum_{a_j = k} z_j z_j' + Lambda`` (Lambda the
        ridge penalty, 0 on the intercept and for "mean"), ``coef_k = H_k^-1 sum z_j r_j``.
        Record j's influence on its action's coefficients (the derivative of
        ``coef_{a_j}`` by the weight of j) is ``H_{a_j}^-1 z_j e_j``, ``e_j`` the residual;
        the variance uses ``U_j = H_{a_j}^-1 z_j e_j / sqrt(1 - h_j)`` with ``h_j = z_j'
        H_{a_j}^-1 z_j`` the record's leverage (HC2, MacKinnon & White 1985: the plain
        sandwich is 8-11% below the bootstrap on ``ope_static``'s logs of 500 records, where
        11 coefficients per action rest on ~50 records; HC2 agrees with it to 1%). Actions
        without records get the overall mean reward, whose influence is
        ``rc_j = (r_j - rbar) / n``. A statistic ``sum_k g_k' coef_k`` has the derivatives
        ``x_j = g_{a_j}' U_j + c rc_j`` (``c`` the sum of ``g_k[0]`` over the actions without
        records), and what its variance needs of them is kept per action, so that no
        estimator reads n rows for it (:meth:`_moments`): ``Hinv`` (H_k^-1), ``S`` (the
        sandwich ``H_k^-1 [sum e_j^2 / (1 - h_j) z_j z_j'] H_k^-1`` = sum U_j U_j'), ``u``
        (sum U_j), ``e`` (the adjusted residuals ``e_j / sqrt(1 - h_j)``) and, with actions
        without records, ``R`` (sum rc_j U_j) and ``rr`` (sum rc_j^2).

        The records are sorted by action (``order``; action k's rows ``starts[k]`` to
        ``starts[k + 1]`` of ``Zs``, the sorted design); for "ridge" by (action, fold)
        within, whose Grams also give the cross-fit (one pass over the records for both
        fits).
        """
        def make():
            log, kind = self._log, self._spec.kind
            n, K = log.n_rounds, log.n_actions
            a, r = log.action, log.reward
            Z = _features(log, kind)
            p = Z.shape[1]
            rbar = float(r.mean())
            out = {"Z": Z}
            if kind == "mean":
                counts = np.bincount(a, minlength=K)
                order = _stable_order(a, K)
                coef = _fit_mean(a, r, K)[:, None]
                Zs = Z[order]
                q = np.empty((n, K))
                q[:] = coef[:, 0]
                Hsum = counts[:, None, None].astype(np.float64)
            else:
                F = self.n_folds
                G, b, group_counts, order, _, Zs = _grams(Z, a * F + self.folds, K * F, r)
                counts = group_counts.reshape(K, F).sum(axis=1)
                Hsum = G.reshape(K, F, p, p).sum(axis=1)
                coef = _solve_ridge(Hsum, b.reshape(K, F, p).sum(axis=1), counts, rbar)
                with blas_threads(1):
                    q = Z @ coef.T
                Hsum = Hsum + np.diag(np.r_[0.0, np.full(p - 1, _RIDGE)])
                out.update(G=G, b=b, group_counts=group_counts)
            starts = np.concatenate([[0], np.cumsum(counts)])
            seen = np.flatnonzero(counts)
            es = (r - q[np.arange(n), a])[order]
            unseen = counts == 0
            rc = (r - rbar) / n if unseen.any() else None
            Hinv, S = np.zeros((K, p, p)), np.zeros((K, p, p))
            u, R = np.zeros((K, p)), np.zeros((K, p))
            Hinv[seen] = np.linalg.inv(Hsum[seen])
            et = np.empty(n)  # the residuals over sqrt(1 - leverage), sorted
            with blas_threads(1):
                for k in seen:
                    blk = slice(starts[k], starts[k + 1])
                    h = np.einsum("jp,jp->j", Zs[blk] @ Hinv[k], Zs[blk])
                    # h = 1 only where the fit is exact (e = 0): no influence there
                    et[blk] = np.where(h < 1 - 1e-12, es[blk] / np.sqrt(np.maximum(1 - h,
                                                                                  1e-12)), 0.0)
                    ez = et[blk, None] * Zs[blk]
                    S[k] = Hinv[k] @ (ez.T @ ez) @ Hinv[k]
                    u[k] = Hinv[k] @ ez.sum(axis=0)
                    if rc is not None:
                        R[k] = Hinv[k] @ (rc[order][blk] @ ez)
            e = np.empty(n)
            e[order] = et
            out.update(Zs=Zs, coef=_frozen(coef), q=q, e=e, order=order, starts=starts,
                       seen=seen, unseen=unseen, Hinv=Hinv, S=S, u=u, R=R, rc=rc,
                       rr=float(rc @ rc) if rc is not None else 0.0,
                       rc_sum=float(rc.sum()) if rc is not None else 0.0)
            return out
        return self._get("linear", make)

    def _block_sums(self, w) -> np.ndarray:
        """``sum_{a_j = k} w_j z_j`` per action, (n_actions, p), from the action-sorted
        design (one BLAS product per action, one thread)."""
        L = self._linear()
        ws, Zs, starts = w[L["order"]], L["Zs"], L["starts"]
        out = np.zeros((self.n_actions, Zs.shape[1]))
        with blas_threads(1):
            for k in L["seen"]:
                out[k] = ws[starts[k]:starts[k + 1]] @ Zs[starts[k]:starts[k + 1]]
        return out

    def _moments(self, g, y=None):
        """``(sum_j x_j, sum_j x_j^2)`` of ``x_j = y_j + d/dw_j sum_k g_k' coef_k(w)`` (the
        first-order effect of record j on the statistic ``sum_j y_j + sum_k g_k' coef_k``;
        ``y`` None: 0), from the per-action statistics of :meth:`_linear` in ``O(K p^2)``,
        plus one weighted pass over the records when ``y`` is given."""
        L = self._linear()
        c = float(g[L["unseen"], 0].sum())
        sx = float(np.einsum("kp,kp->", g, L["u"])) + c * L["rc_sum"]
        sxx = (float(np.einsum("kp,kpq,kq->", g, L["S"], g))
               + 2 * c * float(np.einsum("kp,kp->", g, L["R"])) + c * c * L["rr"])
        if y is not None:
            P = np.einsum("kpq,kq->kp", L["Hinv"], self._block_sums(y * L["e"]))
            sxy = float(np.einsum("kp,kp->", g, P))
            if L["rc"] is not None:
                sxy += c * float(y @ L["rc"])
            sx += float(y.sum())
            sxx += float(y @ y) + 2 * sxy
        return sx, sxx

    def _pi_design(self, pi) -> np.ndarray:
        """``sum_j pi[j, a] z_j`` per action, (n_actions, p), in float64, on one BLAS thread
        so that the bits do not depend on the machine; a float32 ``pi`` is converted in
        fixed row blocks, never whole."""
        Z = self._linear()["Z"]
        n, K = pi.shape
        with blas_threads(1):
            if pi.dtype == np.float64:
                return pi.T @ Z
            step = max(1, (1 << 20) // max(1, K))
            out = np.zeros((K, Z.shape[1]))
            for s in range(0, n, step):
                out += np.asarray(pi[s:s + step], dtype=np.float64).T @ Z[s:s + step]
            return out

    def _resamples(self, n_bootstrap: int) -> np.ndarray:
        """Resample counts (n_bootstrap, n_rounds) from the model's own stream: the same
        resamples for every estimator and target asking for ``n_bootstrap``."""
        return self._get(("W", n_bootstrap), lambda: _resample_weights(
            self.n_rounds, n_bootstrap, np.random.default_rng(self._seeds[1])))

    def _refits(self, n_bootstrap: int) -> np.ndarray:
        """Coefficients (n_bootstrap, n_actions, p) of the linear model on each resample."""
        return self._get(("coef", n_bootstrap), lambda: _refit(
            self._log, self.kind, self._resamples(n_bootstrap), self._linear()["Z"]))

    def dm_stderr(self, pi, terms, method: str, n_bootstrap: int) -> float:
        """Standard error of the direct method ``mean_j sum_a pi q`` (``terms`` its
        per-record terms with the in-sample fit), the model's estimation error included."""
        n = self.n_rounds
        if method == "bootstrap":
            return float(bootstrap_dm_values(self, pi, n_bootstrap).std(ddof=1))
        # x_j = (terms_j - V) / n + d/dw_j V: the influence function of V, over n
        y = (terms - float(terms.mean())) / n
        sx, sxx = self._moments(self._pi_design(pi) / n, y)
        return math.sqrt(max(0.0, sxx - sx * sx / n) * n / (n - 1))

    def part_variance(self, pi, ws, method: str, n_bootstrap: int) -> float:
        """Variance of ``F(q) = (1/n) sum_j [sum_a pi q - ws_j q(x_j, a_j)]`` over the
        model's estimation error (the records fixed, the model refitted)."""
        n = self.n_rounds
        if method == "bootstrap":
            return float(bootstrap_model_part(self, pi, ws, n_bootstrap).var(ddof=1))
        sx, sxx = self._moments((self._pi_design(pi) - self._block_sums(ws)) / n)
        return max(0.0, sxx - sx * sx / n) * n / (n - 1)


def fit_reward_model(log, model="ridge", *, per_action=False, n_folds=2,
                     rng=None) -> RewardModel:
    """Fit a reward model on a log once, for every model-based estimator and target policy.

    Parameters
    ----------
    log : simulator.logs.BanditLog or simulator.logs.SlateLog
        The logged records. A :class:`~simulator.logs.SlateLog` gives Cascade-DR's model
        (:class:`evaluators._slate_ope.SlateRewardModel`; ``model`` "mean" or a regressor,
        ``n_folds >= 1``).
    model : "ridge", "mean", regressor or array, default "ridge"
        The specification (see :func:`direct_method`): per-action ridge regression on
        ``[1, context]``, per-action mean reward, any object with ``fit(X, y)`` and
        ``predict(X)``, or an array (n_rounds, n_actions[, 1]) of predictions (kept as it is:
        no fit, no variance of its own).
    per_action : bool, default False
        For a regressor: one copy per action (``X = context``) instead of one joint model.
    n_folds : int in [2, max(2, n_rounds)], default 2
        Folds of the cross-fitting (the split depends on the records' content, not order).
    rng : None, int, SeedSequence or Generator
        Source of the folds and of the bootstrap resamples (two independent child streams).

    Returns
    -------
    RewardModel
        Fitted now (cross-fitted and in-sample predictions); the variance terms are
        computed when an estimator first asks for them and kept.

    Raises
    ------
    TypeError, ValueError
        A log that is not a non-empty BanditLog or SlateLog, an unknown model, an array of
        the wrong shape or with nan or inf, ``n_folds`` outside [2, max(2, n_rounds)].

    Notes
    -----
    The estimators fit the same model themselves when ``model`` is a specification: with the
    same ``rng`` the estimate is the same to the last bit (the estimator draws its folds and
    resamples from ``rng`` exactly as this function does). Fitting once is faster when
    several estimators or target policies are evaluated on one log: the harness does it for
    every log of an ``ope`` or ``estimator_selection`` evaluation.

    Examples
    --------
    >>> import numpy as np
    >>> from simulator.logs import BanditLog
    >>> import evaluators
    >>> g = np.random.default_rng(0)
    >>> log = BanditLog(context=g.normal(size=(400, 2)), action=g.integers(0, 3, 400),
    ...                 reward=g.random(400), pscore=np.full(400, 1 / 3), n_actions=3)
    >>> q = evaluators.fit_reward_model(log, "ridge", rng=0)
    >>> pi = np.tile([0.6, 0.2, 0.2], (400, 1))
    >>> a = evaluators.doubly_robust(log, pi, model=q)
    >>> a == evaluators.doubly_robust(log, pi, model="ridge", rng=0)
    True
    """
    from simulator.logs import BanditLog, SlateLog

    if isinstance(log, SlateLog):
        from evaluators._slate_ope import _fit_slate_model

        return _fit_slate_model(log, model, n_folds, rng)
    if not isinstance(log, BanditLog):
        raise ArgumentTypeError("log", "a simulator.logs.BanditLog or SlateLog",
                                type(log).__name__)
    log = _check_log(log)
    spec = resolve_model(log, model, per_action=per_action)
    if spec.kind == "array" and not np.all(np.isfinite(spec.array)):
        # the estimators check their per-record terms; a model returned as it is is checked
        # here, whole
        bad = np.argwhere(~np.isfinite(spec.array))[0]
        raise ArgumentValueError("model", "an array of finite predicted rewards",
                                 f"{spec.array[tuple(bad)]} at index {tuple(int(i) for i in bad)}")
    m = RewardModel(log, spec, check_n_folds(n_folds, log.n_rounds), as_generator(rng))
    m.cross_fitted, m.in_sample  # noqa: B018 (fitted now; errors of a regressor raise here)
    return m


def prepare(log, model, *, per_action=None, n_folds=None, rng=None,
            name="model") -> RewardModel:
    """An estimator's ``model=`` as a :class:`RewardModel`: a fitted one checked against
    ``log`` (``per_action`` and ``n_folds``, when given, must agree with it; ``rng`` is not
    used, only its type checked), or a new one from a specification (fitted lazily, folds
    and resamples from ``rng``)."""
    if isinstance(model, RewardModel):
        _check_rng(rng)
        model.check(log, name)
        if per_action is not None and _check_per_action(per_action) != model.per_action:
            raise ArgumentValueError("per_action", f"{model.per_action} (the value `{name}` "
                                     "was fitted with) or left out", repr(per_action))
        if n_folds is not None and check_n_folds(n_folds, log.n_rounds) != model.n_folds:
            raise ArgumentValueError("n_folds", f"{model.n_folds} (the value `{name}` was "
                                     "fitted with) or left out", repr(n_folds))
        return model
    spec = resolve_model(log, model, per_action=False if per_action is None else per_action,
                         name=name)
    return RewardModel(log, spec, 2 if n_folds is None else check_n_folds(n_folds, log.n_rounds),
                       as_generator(rng) if spec.fitted else _check_rng(rng))


def _check_rng(rng) -> None:
    """Raise as :func:`as_generator` would for an ``rng`` of the wrong kind (without making
    a Generator: where nothing is drawn)."""
    if not (rng is None or isinstance(rng, (np.random.Generator, np.random.SeedSequence))
            or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool) and rng >= 0)):
        as_generator(rng)


def check_model_variance(model_variance, m: RewardModel) -> str:
    """``"analytic"`` or ``"bootstrap"``: what ``model_variance`` means for model ``m``."""
    v = check_choice(model_variance, "model_variance", MODEL_VARIANCES)
    if v == "auto":
        return "analytic" if m.linear else "bootstrap"
    if v == "analytic" and m.fitted and not m.linear:
        raise ArgumentValueError("model_variance", "'bootstrap' or 'auto' for a regressor "
                                 f"(the analytic variance is for the linear models {MODELS})",
                                 "'analytic'")
    return v


# -- bootstrap of the direct method (the reference of the analytic variance) ---------------
def _resample_weights(n: int, n_bootstrap: int, rng) -> np.ndarray:
    """How often each record appears in each resample, (n_bootstrap, n): resample ``b`` is
    row ``b`` of ``rng.integers(0, n, (n_bootstrap, n))``, counted."""
    idx = rng.integers(0, n, size=(n_bootstrap, n))
    idx += np.arange(n_bootstrap)[:, None] * n
    return np.bincount(idx.ravel(), minlength=n_bootstrap * n).reshape(
        n_bootstrap, n).astype(np.float64)


def bootstrap_dm_values(m: RewardModel, pi, n_bootstrap: int) -> np.ndarray:
    """Direct-method values on ``n_bootstrap`` resamples of the records (the model's own
    resamples), the model refitted on each, shape (n_bootstrap,)."""
    log = m._log
    n = log.n_rounds
    W = m._resamples(n_bootstrap)  # (B, n)
    pi = np.asarray(pi, dtype=np.float64)
    if m.linear:
        Z = m._linear()["Z"]
        coef = m._refits(n_bootstrap)             # (B, K, p)
        K, p = log.n_actions, Z.shape[1]
        values = np.zeros(n_bootstrap)
        # sum_j W[b, j] pi[j, k] z_j: each resample's pi-weighted design, all actions in one
        # product per chunk of actions (bounded (n, chunk x p) temporary); one BLAS thread,
        # so that the bits do not depend on the machine's thread count
        chunk = max(1, min(K, (1 << 22) // max(1, n * p)))
        with blas_threads(1):
            for k0 in range(0, K, chunk):
                k1 = min(K, k0 + chunk)
                M = (pi[:, k0:k1, None] * Z[:, None, :]).reshape(n, (k1 - k0) * p)
                values += np.einsum("bkp,bkp->b", (W @ M).reshape(-1, k1 - k0, p),
                                    coef[:, k0:k1])
        return values / n
    values = np.empty(n_bootstrap)
    for b in range(n_bootstrap):
        idx = np.repeat(np.arange(n), W[b].astype(np.int64))
        q = fit_in_sample(log.take(idx), m._spec)
        values[b] = float(np.mean(np.einsum("ij,ij->i", pi[idx], q)))
    return values


def bootstrap_model_part(m: RewardModel, pi, ws, n_bootstrap: int) -> np.ndarray:
    """The part of a DR-type estimate that depends on the reward model,
    ``F(q) = (1/n) sum_j [sum_a pi(a|x_j) q(x_j, a) - ws_j q(x_j, a_j)]``, on the log's
    records with the model refitted on each of ``n_bootstrap`` resamples, shape
    (n_bootstrap,): its spread is the model's contribution to the estimator's variance."""
    log = m._log
    n, K = log.n_rounds, log.n_actions
    if m.linear:
        Z = m._linear()["Z"]
        coef = m._refits(n_bootstrap)             # (B, K, p)
        # M[a] = sum_j (pi[j, a] - ws_j [a_j == a]) z_j, computed without an (n, K) temporary
        M = np.einsum("jk,jp->kp", pi, Z, dtype=np.float64)
        logged = np.zeros((K, Z.shape[1]))
        np.add.at(logged, log.action, ws[:, None] * Z)
        return np.einsum("kp,bkp->b", M - logged, coef) / n
    W = m._resamples(n_bootstrap)
    values = np.empty(n_bootstrap)
    q = np.empty((n, K))
    everything = np.arange(n)
    for b in range(n_bootstrap):
        fit_predict(log, m._spec, np.repeat(everything, W[b].astype(np.int64)), everything, q)
        values[b] = float(np.mean(np.einsum("ij,ij->i", pi, q)
                                  - ws * q[everything, log.action]))
    return values


def _features(log, kind) -> np.ndarray:
    return _design(log.context) if kind == "ridge" else np.ones((log.n_rounds, 1))


def _refit(log, kind, W, Z) -> np.ndarray:
    """Per-action coefficients (B, K, p) of the mean (``Z`` = 1) or ridge model refitted on
    every resample at once (record weights ``W`` (B, n)); actions a resample never shows get
    its mean reward. The products run on one BLAS thread: several BLAS threads thrash on a
    busy machine (10x slower measured on 2 shared cores) and would make the last bits depend
    on the thread count."""
    n, K = log.n_rounds, log.n_actions
    B, p = W.shape[0], Z.shape[1]
    r = log.reward
    overall = (W @ r) / W.sum(axis=1)              # (B,)
    coef = np.zeros((B, K, p))
    coef[:, :, 0] = overall[:, None]
    pen = np.full(p, _RIDGE if kind == "ridge" else 0.0)
    pen[0] = 0.0  # intercept (or the mean) unpenalised
    outer = (Z[:, :, None] * Z[:, None, :]).reshape(n, p * p)
    with blas_threads(1):  # products of (B, n_k) by (n_k, p^2): one thread, machine-free bits
        for k in np.unique(log.action):
            rows = np.flatnonzero(log.action == k)
            Wk = W[:, rows]
            seen = Wk.sum(axis=1) > 0
            if not seen.any():
                continue
            if not seen.all():
                Wk = Wk[seen]
            A = (Wk @ outer[rows]).reshape(-1, p, p) + np.diag(pen)
            rhs = Wk @ (Z[rows] * r[rows, None])  # (B_seen, p)
            coef[seen, k] = np.linalg.solve(A, rhs[:, :, None])[:, :, 0]
    return coef
