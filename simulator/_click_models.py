"""Click models of a slate: how the world's ``p(u, i, t)`` becomes clicks at positions.

A slate ``s = (s_0, ..., s_{k-1})`` is shown top-down; ``p_j = p(u, s_j, t)`` is the world's
click (attraction) probability of the item at position ``j`` (0-based here; the issue's
``theta_j = 1 / (j + 1)^eta`` uses the same 0-based ``j``).

* ``"independent"`` -- each shown item is clicked with probability ``p_j`` whatever its
  position (recloop's historical behaviour, the default).
* ``"pbm"`` -- position-based model (Richardson et al. 2007; Craswell et al. 2008):
  position ``j`` is examined with probability ``theta_j`` and an examined item is clicked
  with probability ``p_j``; ``P(click at j) = theta_j p_j``.
* ``"cascade"`` -- cascade model (Craswell et al. 2008): the user scans top-down, clicks an
  item with probability ``p_j`` and stops at the first click;
  ``P(click at j) = p_j prod_{l<j} (1 - p_l)``.
* ``"dcm"`` -- dependent click model (Guo, Liu & Wang 2009): like the cascade, but after a
  click at ``j`` the user goes on with probability ``lambda_j`` (after no click, always);
  ``P(click at j) = p_j prod_{l<j} (1 - (1 - lambda_l) p_l)``.

The reward of a slate is the number of clicks (``"clicks"``) or whether any click happened
(``"any_click"``). Its expectation has a closed form under each model
(:func:`expected_reward`), which is the truth slate estimators are scored against.

Realisation with common random numbers: the click coin ``u_j`` of ``(user, item, tick)`` is
the one the independent model uses (``click iff u_j < p_j``); the PBM clicks iff
``u_j < theta_j p_j`` (the examination and attraction coins merged into one, which has the
PBM's law: independent Bernoulli(``theta_j p_j``) clicks); the cascade and the DCM click at an
examined position iff ``u_j < p_j``; the DCM's continuation after a click is a second coin
``v_j < lambda_j`` from another stream.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SLATE_CLICK_MODELS", "SLATE_REWARDS", "default_examination",
           "position_click_probabilities", "expected_reward", "best_reward", "simulate_clicks"]

#: The click models of ``recloop/Recommendation-v0`` (``RecommendationConfig.click_model``).
SLATE_CLICK_MODELS = ("independent", "pbm", "cascade", "dcm")
#: Rewards of a slate: the number of clicks or whether any click happened.
SLATE_REWARDS = ("clicks", "any_click")


def default_examination(k: int, eta: float) -> np.ndarray:
    """``theta_j = 1 / (j + 1)^eta`` for positions ``j = 0 .. k-1``."""
    return 1.0 / np.arange(1, k + 1, dtype=np.float64) ** eta


def _exclusive_cumprod(x: np.ndarray) -> np.ndarray:
    """``out[..., j] = prod_{l<j} x[..., l]`` (1 at ``j = 0``)."""
    out = np.ones_like(x)
    if x.shape[-1] > 1:
        np.cumprod(x[..., :-1], axis=-1, out=out[..., 1:])
    return out


def position_click_probabilities(p, click_model: str, *, theta=None, lam=None) -> np.ndarray:
    """``P(click at position j | slate)`` for slates with attraction probabilities ``p``.

    Parameters
    ----------
    p : array (..., k)
        ``p(u, s_j, t)`` of the shown items, in [0, 1].
    click_model : {"independent", "pbm", "cascade", "dcm"}
    theta : array (k,)
        Examination probabilities (``"pbm"``).
    lam : array (k,)
        Continuation probabilities after a click (``"dcm"``).

    Returns
    -------
    array (..., k)
    """
    p = np.asarray(p, dtype=np.float64)
    if click_model == "independent":
        return p.copy()
    if click_model == "pbm":
        return p * theta
    if click_model == "cascade":
        return p * _exclusive_cumprod(1.0 - p)
    return p * _exclusive_cumprod(1.0 - (1.0 - lam) * p)


def expected_reward(p, click_model: str, reward: str, *, theta=None, lam=None) -> np.ndarray:
    """Expected reward of slates, in closed form.

    ``"clicks"``: ``sum_j P(click at j)`` (:func:`position_click_probabilities`).
    ``"any_click"``: ``1 - prod_j (1 - theta_j p_j)`` for the PBM, ``1 - prod_j (1 - p_j)``
    for the other models (under the cascade and the DCM a user who never clicks examines
    every position; under the cascade the number of clicks and "any click" coincide).

    Returns
    -------
    array (...)
    """
    p = np.asarray(p, dtype=np.float64)
    if reward == "clicks":
        return position_click_probabilities(p, click_model, theta=theta, lam=lam).sum(axis=-1)
    q = p * theta if click_model == "pbm" else p
    return 1.0 - np.prod(1.0 - q, axis=-1)


def _constant_continuation(lam) -> bool:
    lam = np.asarray(lam)
    return lam.size <= 2 or bool(np.all(lam[:-1] == lam[0]))


def best_reward(top, click_model: str, reward: str, *, theta=None, lam=None) -> np.ndarray:
    """Expected reward of the best slate, from the ``k`` largest ``p`` sorted decreasingly.

    Parameters
    ----------
    top : array (..., k)
        The ``k`` largest click probabilities among the available items, largest first.

    Returns
    -------
    array (...)
        Exact for every model and reward except the DCM with continuation probabilities
        that vary over positions ``0 .. k-2`` and reward ``"clicks"``: there the best slate is
        a combinatorial search recloop does not do, and the result is ``nan``.

    Notes
    -----
    Independent, cascade, DCM with a constant ``lambda`` and ``"any_click"`` (except the
    PBM's) are increasing symmetric functions of the shown ``p``: the top ``k`` items in any
    order are best (for the DCM with constant ``lambda``,
    ``E[clicks] = (1 - prod_j (1 - (1 - lambda) p_j)) / (1 - lambda)``). For the PBM,
    ``sum_j theta_j p_j`` (and ``-log(1 - theta p)``, supermodular in ``(theta, p)``) is
    maximised by pairing the largest ``p`` with the largest ``theta`` (rearrangement).
    """
    top = np.asarray(top, dtype=np.float64)
    if click_model == "pbm":
        th = np.sort(np.asarray(theta, dtype=np.float64))[::-1]
        if reward == "clicks":
            return (top * th).sum(axis=-1)
        return 1.0 - np.prod(1.0 - top * th, axis=-1)
    if reward == "any_click" or click_model == "cascade":
        return 1.0 - np.prod(1.0 - top, axis=-1)
    if click_model == "independent":
        return top.sum(axis=-1)
    if not _constant_continuation(lam):
        return np.full(top.shape[:-1], np.nan)
    c = np.full(top.shape[-1], 1.0 - float(np.asarray(lam).ravel()[0]))
    return position_click_probabilities(top, "dcm", lam=1.0 - c).sum(axis=-1)


def simulate_clicks(p, u, click_model: str, *, theta=None, lam=None, v=None) -> np.ndarray:
    """Clicks of slates from their coins (see the module doc).

    Parameters
    ----------
    p : array (..., k)
        Attraction probabilities of the shown items.
    u : array (..., k)
        Click coins in [0, 1) (the world's common random numbers of ``(user, item, tick)``).
    v : array (..., k)
        Continuation coins (``"dcm"`` only).

    Returns
    -------
    array (..., k) of bool
    """
    if click_model == "independent":
        return u < p
    if click_model == "pbm":
        return u < theta * p
    attract = u < p
    if click_model == "cascade":
        stop = attract
    else:
        stop = attract & (v >= lam)
    # examined: no stop strictly above
    before = np.cumsum(stop, axis=-1) - stop
    return attract & (before == 0)
