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
  reward (0 when there is no training record at all).

Fitted models are *cross-fitted* for the doubly robust family: the records are split into
``n_folds`` folds (drawn from ``rng``), and the predictions for a fold come from a model fitted
on the other folds, so that a record's own reward never enters its correction term. The split
depends on the records, not on their order: records are ranked by a hash of their content
before the random split, so permuting a log permutes its predictions and nothing else.
"""

from __future__ import annotations

import copy

import numpy as np

from recloop_base.threads import blas_threads
from recloop_base.validation import ArgumentTypeError, ArgumentValueError, check_choice, check_int

__all__ = ["MODELS", "resolve_model", "cross_fit", "fit_in_sample", "fit_predict", "fold_ids",
           "bootstrap_dm_values", "bootstrap_model_part", "check_n_folds"]

MODELS = ("ridge", "mean")
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


def resolve_model(log, model, *, per_action=False, name="model") -> _Model:
    """Validate ``model`` against ``log`` (see the module docstring)."""
    if not isinstance(per_action, (bool, np.bool_)):
        raise ArgumentTypeError("per_action", "a bool", f"{type(per_action).__name__}")
    if isinstance(model, str):
        return _Model(check_choice(model, name, MODELS))
    if callable(getattr(model, "fit", None)) and callable(getattr(model, "predict", None)):
        return _Model("regressor", regressor=model, per_action=bool(per_action))
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
        name, f"one of {MODELS}, an array (n_rounds, n_actions) of predicted rewards, or a "
        "regressor with fit(X, y) and predict(X)", type(model).__name__)


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


def _fit_ridge(Z, action, reward, K) -> np.ndarray:
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
        B = _fit_ridge(_design(log.context[train]), a, r, K)
        for rows in _rows_chunks(predict_rows, K):
            Zr = _design(log.context[rows])
            # BLAS for large products; einsum for small ones, where BLAS threads thrash
            out[rows] = Zr @ B.T if Zr.size * K >= (1 << 22) else np.einsum("np,kp->nk", Zr, B)
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


def cross_fit(log, model: _Model, *, n_folds: int, rng) -> np.ndarray:
    """q (n_rounds, n_actions): the array itself, or cross-fitted predictions of a fitted model
    (each fold predicted by the model fitted on the other folds)."""
    if model.kind == "array":
        return model.array
    n = log.n_rounds
    q = np.empty((n, log.n_actions))
    folds = fold_ids(log, n_folds, rng)
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


# -- bootstrap of the direct method ---------------------------------------------------------
def _resample_weights(n: int, n_bootstrap: int, rng) -> np.ndarray:
    """How often each record appears in each resample, (n_bootstrap, n): resample ``b`` is
    row ``b`` of ``rng.integers(0, n, (n_bootstrap, n))``, counted."""
    idx = rng.integers(0, n, size=(n_bootstrap, n))
    idx += np.arange(n_bootstrap)[:, None] * n
    return np.bincount(idx.ravel(), minlength=n_bootstrap * n).reshape(
        n_bootstrap, n).astype(np.float64)


def bootstrap_dm_values(log, pi, model: _Model, n_bootstrap: int, rng) -> np.ndarray:
    """Direct-method values on ``n_bootstrap`` resamples of the records, the model refitted on
    each resample, shape (n_bootstrap,)."""
    n = log.n_rounds
    W = _resample_weights(n, n_bootstrap, rng)  # (B, n)
    pi = np.asarray(pi, dtype=np.float64)
    if model.kind in ("ridge", "mean"):
        Z = _features(log, model.kind)
        coef = _refit(log, model.kind, W, Z)      # (B, K, p)
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
        q = fit_in_sample(log.take(idx), model)
        values[b] = float(np.mean(np.einsum("ij,ij->i", pi[idx], q)))
    return values


def bootstrap_model_part(log, pi, ws, model: _Model, n_bootstrap: int, rng) -> np.ndarray:
    """The part of a DR-type estimate that depends on the reward model,
    ``F(q) = (1/n) sum_j [sum_a pi(a|x_j) q(x_j, a) - ws_j q(x_j, a_j)]``, on the log's
    records with the model refitted on each of ``n_bootstrap`` resamples, shape
    (n_bootstrap,): its spread is the model's contribution to the estimator's variance."""
    n, K = log.n_rounds, log.n_actions
    W = _resample_weights(n, n_bootstrap, rng)
    if model.kind in ("ridge", "mean"):
        Z = _features(log, model.kind)
        coef = _refit(log, model.kind, W, Z)      # (B, K, p)
        # M[a] = sum_j (pi[j, a] - ws_j [a_j == a]) z_j, computed without an (n, K) temporary
        M = np.einsum("jk,jp->kp", pi, Z, dtype=np.float64)
        logged = np.zeros((K, Z.shape[1]))
        np.add.at(logged, log.action, ws[:, None] * Z)
        return np.einsum("kp,bkp->b", M - logged, coef) / n
    values = np.empty(n_bootstrap)
    q = np.empty((n, K))
    everything = np.arange(n)
    for b in range(n_bootstrap):
        fit_predict(log, model, np.repeat(everything, W[b].astype(np.int64)), everything, q)
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
