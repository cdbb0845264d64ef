"""Item weights that undo the drift of item marginals caused by recommendation campaigns.

Source: de Myttenaere, Le Grand, Golden, Rossi (2014/2015). With ``P(u)`` the user
distribution and ``B`` the binary current profiles,

    P(i|u,w) = w_i B_ui / W_u,   W_u = sum_j w_j B_uj,
    P_cur(i|w) = sum_u P(u) P(i|u,w),

the weights minimise ``D(w) = sum_{i: P_ref(i) > 0} P_ref(i) log(P_ref(i) / P_cur(i|w))``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from evaluators._offline import _as_profiles, _check_positive_vector, _user_probabilities

__all__ = ["ItemWeights", "UnmatchedItemsWarning", "fit_item_weights", "kl_objective",
           "reference_gradient"]

METHODS = ("lbfgs", "gradient_descent")
# Bounds on log-weights: an item the reference never holds is pushed towards weight 0,
# which is never reached; the bound stops the optimiser chasing it (w >= e^-30 ~ 1e-13).
_LOG_W_BOUND = 30.0


class UnmatchedItemsWarning(UserWarning):
    """Some items of the reference are held by nobody in the current profiles."""


@dataclass(frozen=True, eq=False)
class ItemWeights:
    """Result of :func:`fit_item_weights`.

    Attributes
    ----------
    weights : ndarray (n_items,)
        Positive item weights ``w`` (1 for items not selected).
    selected : ndarray of int64 (p,)
        The optimised items, by decreasing ``|P_ref(i) - P_cur(i)|`` (ties: lower id first).
    kl_before, kl_after : float
        ``D(1)`` and ``D(w)`` over the matched items with ``P_ref(i) > 0``.
    n_iter : int
        Iterations of the optimiser.
    converged : bool
        Whether the optimiser met its tolerance within ``max_iter``.
    unmatched : ndarray of int64
        Items with ``P_ref(i) > 0`` that nobody holds in ``current`` (left out of ``D``).
    method : str
        ``"lbfgs"`` or ``"gradient_descent"``.
    """

    weights: np.ndarray
    selected: np.ndarray
    kl_before: float
    kl_after: float
    n_iter: int
    converged: bool
    unmatched: np.ndarray
    method: str


# ---------------------------------------------------------------------------------------------
# objective and gradients
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class _Problem:
    B: sp.csr_array  # binary current profiles (n_users, n_items)
    BT: sp.csr_array  # its transpose, stored row-major for fast products
    pu: np.ndarray  # P(u)
    p_ref: np.ndarray  # reference marginal, 0 on unmatched items
    support: np.ndarray  # bool: P_ref(i) > 0 and matched


def _marginal(pb: _Problem, w: np.ndarray):
    W = pb.B @ w
    held = W > 0
    c = np.divide(pb.pu, W, out=np.zeros_like(W), where=held)
    return W, c, w * (pb.BT @ c)


def _objective(pb: _Problem, w: np.ndarray) -> float:
    _, _, q = _marginal(pb, w)
    s = pb.support
    return float(np.sum(pb.p_ref[s] * (np.log(pb.p_ref[s]) - np.log(q[s]))))


def _value_and_log_gradient(pb: _Problem, w: np.ndarray):
    """D(w) and dD/dlog(w) for all items, in O(edges): two sparse products after P_cur."""
    W, c, q = _marginal(pb, w)
    s = pb.support
    value = float(np.sum(pb.p_ref[s] * (np.log(pb.p_ref[s]) - np.log(q[s]))))
    rho = np.zeros_like(q)
    rho[s] = pb.p_ref[s] / q[s]
    # a_u = sum_{i in I_u} rho_i P(i|u,w);  dD/dw_k = (1/w_k)[sum_u P(u) P(k|u,w) a_u - rho_k q_k]
    a = (pb.B @ (rho * w)) * np.divide(1.0, W, out=np.zeros_like(W), where=W > 0)
    g_log = w * (pb.BT @ (c * a)) - rho * q
    return value, g_log


def _reference_gradient(pb: _Problem, w: np.ndarray) -> np.ndarray:
    """dD/dw_k one coordinate at a time, from the paper's formula (slow, obviously correct).

    dD/dw_k = -sum_i P_ref(i) / P_cur(i|w) * dP_cur(i|w)/dw_k with
    dP_cur(i|w)/dw_k = sum_{u holds k} P(u) [1{i=k} / W_u - w_i B_ui / W_u^2].
    """
    B = pb.B
    n_items = B.shape[1]
    W, _, q = _marginal(pb, w)
    rho = np.zeros(n_items)
    rho[pb.support] = pb.p_ref[pb.support] / q[pb.support]
    Bc = sp.csc_array(B)
    grad = np.zeros(n_items)
    for k in range(n_items):
        dq = np.zeros(n_items)
        for u in Bc.indices[Bc.indptr[k]:Bc.indptr[k + 1]]:
            items_u = B.indices[B.indptr[u]:B.indptr[u + 1]]
            dq[k] += pb.pu[u] / W[u]
            dq[items_u] -= pb.pu[u] * w[items_u] / W[u] ** 2
        grad[k] = -float(np.sum(rho * dq))
    return grad


# ---------------------------------------------------------------------------------------------
# public helpers: the objective and the reference gradient on raw inputs
# ---------------------------------------------------------------------------------------------

def _problem(reference, current, user_weights):
    B = _as_profiles(current, "current")
    n_users, n_items = B.shape
    if isinstance(reference, np.ndarray) and reference.ndim == 1:
        if reference.shape != (n_items,):
            raise ValueError(f"`reference` and `current` must have the same number of items; "
                             f"got {reference.shape[0]} and {n_items}.")
        p_ref = _check_positive_vector(reference, n_items, "reference", allow_zero=True)
        total = p_ref.sum()
        if total <= 0:
            raise ValueError("`reference` marginal must have a positive sum; got 0.")
        p_ref = p_ref / total
    else:
        R = _as_profiles(reference, "reference")
        if R.shape[1] != n_items:
            raise ValueError(f"`reference` and `current` must have the same number of items; "
                             f"got {R.shape[1]} and {n_items}.")
        if user_weights is not None and R.shape[0] != n_users:
            raise ValueError(f"`user_weights` apply to both graphs, so `reference` and "
                             f"`current` must have the same number of users; got "
                             f"{R.shape[0]} and {n_users}.")
        pr = _user_probabilities(R, user_weights, "reference")
        if pr is None:
            raise ValueError("`reference` must hold at least one edge (its marginal is "
                             "undefined otherwise); got an empty matrix.")
        lengths = np.diff(R.indptr)
        c = np.divide(pr, lengths, out=np.zeros(R.shape[0]), where=lengths > 0)
        p_ref = R.T @ c
    pu = _user_probabilities(B, user_weights, "current")
    if pu is None:  # nobody holds anything: every reference item is unmatched (warned)
        pu = np.zeros(n_users)
    held = np.bincount(B.indices, minlength=n_items) > 0
    unmatched = np.flatnonzero((p_ref > 0) & ~held)
    p_ref = p_ref.copy()
    p_ref[unmatched] = 0.0
    pb = _Problem(B, sp.csr_array(B.T), pu, p_ref, p_ref > 0)
    return pb, unmatched, held


def _warn_unmatched(unmatched) -> None:
    if unmatched.size:
        warnings.warn(f"{unmatched.size} item(s) of the reference are held by nobody in "
                      f"`current` and cannot be matched: {unmatched[:10].tolist()}"
                      f"{' ...' if unmatched.size > 10 else ''}", UnmatchedItemsWarning,
                      stacklevel=3)


def kl_objective(reference, current, weights, *, user_weights=None) -> float:
    """``D(w) = sum_{i: P_ref(i) > 0, matched} P_ref(i) log(P_ref(i) / P_cur(i|w))``.

    Arguments as in :func:`fit_item_weights`; ``weights`` positive, shape (n_items,).
    Unmatched reference items are left out with an :class:`UnmatchedItemsWarning`; when no
    reference item is matched ``D`` is an empty sum, meaningless rather than 0: ``nan``.
    """
    pb, unmatched, _ = _problem(reference, current, user_weights)
    w = _check_positive_vector(weights, pb.B.shape[1], "weights", allow_zero=False)
    _warn_unmatched(unmatched)
    return _objective(pb, w) if pb.support.any() else math.nan


def reference_gradient(reference, current, weights, *, user_weights=None,
                       method: str = "per_coordinate") -> np.ndarray:
    """Gradient ``dD/dw`` (with respect to the weights, not their logs).

    ``method="per_coordinate"``: the paper's form, one coordinate at a time (slow reference);
    ``method="vectorised"``: the O(edges) form :func:`fit_item_weights` uses. Unmatched
    items as in :func:`kl_objective` (``nan`` everywhere when no reference item is matched).
    """
    pb, unmatched, _ = _problem(reference, current, user_weights)
    w = _check_positive_vector(weights, pb.B.shape[1], "weights", allow_zero=False)
    _warn_unmatched(unmatched)
    if not pb.support.any():
        return np.full(w.shape, math.nan)
    if method == "per_coordinate":
        return _reference_gradient(pb, w)
    if method == "vectorised":
        return _value_and_log_gradient(pb, w)[1] / w
    raise ValueError(f"`method` must be 'per_coordinate' or 'vectorised'; got {method!r}.")


# ---------------------------------------------------------------------------------------------
# optimisers
# ---------------------------------------------------------------------------------------------

def _lbfgs(pb, base, sel, tol, max_iter):
    """L-BFGS-B on log-weights, diagonally preconditioned.

    Near the optimum the Hessian of D in log-weights is roughly diag(P_ref), whose entries
    span orders of magnitude (niche against universal items); in the variables
    phi_i = sqrt(P_ref(i)) log(w_i) it is close to the identity, which cuts the iterations
    ~10x on the simulator's graphs. Every optimised item has P_ref(i) > 0.
    """
    scale = np.sqrt(pb.p_ref[sel])

    def fun(phi):
        w = base.copy()
        w[sel] = np.exp(phi / scale)
        value, g = _value_and_log_gradient(pb, w)
        return value, g[sel] / scale

    from scipy import optimize  # ~0.3 s to import: only when fitting

    res = optimize.minimize(fun, np.zeros(sel.size), jac=True, method="L-BFGS-B",
                            bounds=optimize.Bounds(-_LOG_W_BOUND * scale,
                                                   _LOG_W_BOUND * scale),
                            options={"ftol": tol, "gtol": tol, "maxiter": max_iter})
    return res.x / scale, int(res.nit), bool(res.success)


def _gradient_descent(pb, base, sel, tol, max_iter):
    """Plain gradient descent on the log-weights with the per-coordinate reference gradient.

    Backtracking (Armijo) step; stops like L-BFGS-B: relative decrease <= tol or
    max |gradient| <= tol.
    """
    def weights(theta):
        w = base.copy()
        w[sel] = np.exp(theta)
        return w

    theta = np.zeros(sel.size)
    w = weights(theta)
    f = _objective(pb, w)
    step = 1.0
    for it in range(1, max_iter + 1):
        g = (w * _reference_gradient(pb, w))[sel]
        if np.max(np.abs(g), initial=0.0) <= tol:
            return theta, it - 1, True
        while True:
            cand = np.clip(theta - step * g, -_LOG_W_BOUND, _LOG_W_BOUND)
            w_new = weights(cand)
            f_new = _objective(pb, w_new)
            if f_new <= f - 1e-4 * float(np.sum(g * (theta - cand))) or step < 1e-20:
                break
            step *= 0.5
        done = (f - f_new) <= tol * max(abs(f), abs(f_new), 1.0)
        theta, w, f = cand, w_new, f_new
        step *= 2.0  # let the step grow back after a short one
        if done:
            return theta, it, True
    return theta, max_iter, False


def fit_item_weights(reference, current, *, p=None, method: str = "lbfgs", tol: float = 1e-10,
                     max_iter: int = 1000, user_weights=None) -> ItemWeights:
    """Fit item weights so that the current weighted marginal matches the reference marginal.

    Parameters
    ----------
    reference : sparse matrix or ndarray (n_users_ref, n_items), or ndarray (n_items,)
        Profiles at the reference time, or directly the reference marginal ``P_ref(i)``
        (non-negative, normalised here).
    current : sparse matrix or ndarray, shape (n_users, n_items)
        Profiles at the current time; every stored non-zero is an edge.
    p : int or None
        Number of items optimised: those with the largest ``|P_ref(i) - P_cur(i)|``
        (unweighted current marginal); the others keep weight 1. ``None``: all matched items.
        Unmatched items are never selected (their weight cannot change anything).
    method : {"lbfgs", "gradient_descent"}
        ``lbfgs``: SciPy's L-BFGS-B on log-weights with the O(edges) gradient.
        ``gradient_descent``: the paper's plain gradient descent with its per-coordinate
        gradient (slow reference).
    tol : float
        Tolerance on the relative decrease of ``D`` and on the largest gradient component
        (in the preconditioned log-weights ``sqrt(P_ref(i)) log(w_i)`` for ``lbfgs``).
    max_iter : int
        Maximum number of iterations.
    user_weights : array (n_users,) or None
        ``P(u)`` weights for both graphs (then of equal user counts); default uniform over
        users with at least one item.

    Returns
    -------
    ItemWeights

    Raises
    ------
    TypeError
        Inputs not matrices/arrays, ``p`` or ``max_iter`` not integers.
    ValueError
        Different item counts, an empty ``reference``, ``p`` outside ``[0, n_items]``, unknown
        ``method``, ``tol <= 0``, ``max_iter < 1``.

    Warns
    -----
    UnmatchedItemsWarning
        Items with ``P_ref(i) > 0`` held by nobody in ``current``; listed in ``unmatched``.

    Notes
    -----
    de Myttenaere et al. (2014): minimise ``KL(P_ref || P_cur(.|w))`` with
    ``P(i|u,w) = w_i / sum_{j in I_u} w_j``. With ``rho_i = P_ref(i)/P_cur(i|w)`` and
    ``a_u = sum_{i in I_u} rho_i P(i|u,w)``,
    ``dD/dw_k = (1/w_k)[sum_u P(u) P(k|u,w) a_u - rho_k P_cur(k|w)]`` for all ``k`` at once
    (two sparse products). ``D`` is invariant to a common scale of ``w``; the weights are
    returned as fitted (non-selected items at 1). A selected item with ``P_ref(i) = 0`` only
    takes mass away, so its weight goes straight to the lower bound ``e^-30``; log-weights
    are bounded to ``[-30, 30]``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> ref = sp.csr_array(np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]]))
    >>> cur = sp.csr_array(np.array([[1, 1, 1], [1, 1, 1], [1, 0, 1]]))  # item 0 pushed
    >>> fit = fit_item_weights(ref, cur)
    >>> bool(fit.weights[0] < 1 and fit.kl_after < 1e-8 < fit.kl_before)
    True
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}; got {method!r}.")
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol > 0:
        raise ValueError(f"`tol` must be a number > 0; got {tol!r}.")
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral):
        raise TypeError(f"`max_iter` must be an integer; got {type(max_iter).__name__}.")
    if max_iter < 1:
        raise ValueError(f"`max_iter` must be >= 1; got {max_iter}.")
    pb, unmatched, held = _problem(reference, current, user_weights)
    n_items = pb.B.shape[1]
    if p is not None:
        if isinstance(p, bool) or not isinstance(p, numbers.Integral):
            raise TypeError(f"`p` must be an integer or None; got {type(p).__name__}.")
        if not 0 <= p <= n_items:
            raise ValueError(f"`p` must be in [0, n_items={n_items}] or None; got {p}.")
    _warn_unmatched(unmatched)

    _, _, q0 = _marginal(pb, np.ones(n_items))
    diff = np.abs(pb.p_ref - q0)
    candidates = np.flatnonzero(held)  # weights of items nobody holds change nothing
    order = candidates[np.argsort(-diff[candidates], kind="stable")]
    sel = order if p is None else order[:p]
    sel = np.asarray(sel, dtype=np.int64)

    if not pb.support.any():
        # No reference mass left to match: D is an empty sum, meaningless rather than 0.
        w = np.ones(n_items)
        return _result(w, sel, math.nan, math.nan, 0, True, unmatched, method)

    kl_before = _objective(pb, np.ones(n_items))
    if sel.size == 0:
        return _result(np.ones(n_items), sel, kl_before, kl_before, 0, True, unmatched, method)
    # A selected item the reference does not hold (P_ref = 0) only takes mass away: D keeps
    # decreasing as its weight goes to 0, so the optimiser would crawl towards the bound with a
    # vanishing log-gradient. Put it at the bound directly; optimise the others.
    base = np.ones(n_items)
    base[sel[pb.p_ref[sel] == 0]] = math.exp(-_LOG_W_BOUND)
    free = sel[pb.p_ref[sel] > 0]
    if free.size:
        opt = _lbfgs if method == "lbfgs" else _gradient_descent
        theta, n_iter, converged = opt(pb, base, free, float(tol), int(max_iter))
    else:
        theta, n_iter, converged = np.zeros(0), 0, True
    w = base.copy()
    w[free] = np.exp(theta)
    kl_after = _objective(pb, w)
    if kl_after > kl_before:  # never hand back weights worse than none
        w, kl_after = np.ones(n_items), kl_before
    return _result(w, sel, kl_before, kl_after, n_iter, converged, unmatched, method)


def _result(w, sel, kl_before, kl_after, n_iter, converged, unmatched, method) -> ItemWeights:
    for a in (w, sel, unmatched):
        a.setflags(write=False)
    return ItemWeights(w, sel, float(kl_before), float(kl_after), int(n_iter), bool(converged),
                       unmatched, method)
