"""Marginalised inverse propensity scoring (MIPS) for large action spaces with action
embeddings."""

from __future__ import annotations

import numpy as np

from evaluators._ope import (
    _NO_WEIGHT,
    OPEEstimate,
    _check_action_dist,
    _ess,
    _mean_estimate,
    _nan,
    _rows,
)
from evaluators._validation import check_log as _check_log
from recloop_base.validation import ArgumentTypeError, ArgumentValueError, check_level

__all__ = ["mips"]

def _check_embeddings(log, action_embeddings) -> np.ndarray:
    E = log.action_embeddings if action_embeddings is None else action_embeddings
    if E is None:
        raise ArgumentValueError(
            "action_embeddings", "an int array (n_actions, n_embedding_features) (the log "
            "carries none)", "None")
    E = np.asarray(E)
    if E.dtype.kind not in "iu":
        raise ArgumentTypeError("action_embeddings", "an array of integers (discrete "
                                "embeddings)", f"dtype {E.dtype}")
    if E.ndim == 1:
        E = E[:, None]
    if E.ndim != 2 or E.shape[0] != log.n_actions or E.shape[1] < 1:
        raise ArgumentValueError("action_embeddings",
                                 f"of shape (n_actions, n_embedding_features) = "
                                 f"({log.n_actions}, F >= 1)", f"shape {np.shape(E)}")
    if E.size and E.min() < 0:
        raise ArgumentValueError("action_embeddings", "integers >= 0", f"min {int(E.min())}")
    return E.astype(np.int64, copy=False)


def _group_sums(dist, groups, n_groups, logged_group) -> np.ndarray:
    """``sum_{a: groups[a] == logged_group[j]} dist[j, a]`` for every row j.

    Reads only the entries of each row's own group: the members of every group are laid out
    in a padded ``(n_groups, max_size)`` table, gathered row by row in chunks (cost
    ``n_rounds * max_size``, not ``n_rounds * n_actions``)."""
    n, K = dist.shape
    dist = np.ascontiguousarray(dist)
    sizes = np.bincount(groups, minlength=n_groups)
    width = int(sizes.max())
    order = np.argsort(groups, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.arange(K) - np.repeat(starts, sizes)      # position inside its group
    members = np.zeros((n_groups, width), dtype=np.int64)
    members[groups[order], rank] = order
    valid = np.zeros((n_groups, width), dtype=bool)
    valid[groups[order], rank] = True
    full = bool(np.all(sizes[np.unique(logged_group)] == width))
    flat = dist.reshape(-1)  # a view: dist is C-contiguous (n, K), or made so once
    out = np.empty(n)
    step = max(1, (1 << 16) // width)
    for s in range(0, n, step):
        g = logged_group[s:s + step]
        idx = np.arange(s, s + g.shape[0], dtype=np.int64)[:, None] * K + members[g]
        vals = np.take(flat, idx)
        if not full:
            vals = np.where(valid[g], vals, 0)
        out[s:s + step] = vals.sum(axis=1, dtype=np.float64)
    return out


def _uniform_logging(log) -> bool:
    n_avail = log.available_mask().sum(axis=1) if log.available is not None else log.n_actions
    return bool(np.all(np.abs(log.pscore * n_avail - 1.0) <= 1e-9))


def _marginal(log, dist, groups, n_groups, uniform) -> np.ndarray:
    """p(e_j | x_j, policy) for the logged embedding of each record."""
    logged = groups[log.action]
    if dist is not None:
        return _group_sums(dist, groups, n_groups, logged)
    if log.available is None:  # uniform over all actions
        sizes = np.bincount(groups, minlength=n_groups)
        return sizes[logged] / log.n_actions
    av = log.available
    return _group_sums(av / av.sum(axis=1, keepdims=True), groups, n_groups, logged)


def mips(log, action_dist, *, action_embeddings=None, pi_b=None, ci=0.95) -> OPEEstimate:
    """Marginalised IPS: importance weights on the action embedding instead of the action.

    Parameters
    ----------
    log : simulator.logs.BanditLog
        The logged records.
    action_dist : array (n_rounds, n_actions) or (n_rounds, n_actions, len_list)
        The target policy's action probabilities on each record's context (OBP's shape; read
        at each record's position on a log with several).
    action_embeddings : int array (n_actions, n_embedding_features), optional
        Discrete embedding of every action (deterministic: action ``a`` has embedding
        ``action_embeddings[a]``). Default: the log's ``action_embeddings`` (OBP's
        ``action_context``).
    pi_b : array (n_rounds, n_actions) or (n_rounds, n_actions, len_list), optional
        The logging policy's action probabilities on each record (OBP's ``pi_b``, read at
        each record's position on a log with several). Default:
        the log's ``pi_b``; when the log has none and was logged uniformly (``pscore`` is
        ``1 / #available`` on every record), the uniform distribution over the available
        actions; otherwise a ``ValueError``.
    ci : float in (0, 1)
        Level of the interval.

    Returns
    -------
    OPEEstimate
        Mean of ``w(x_j, e_j) r_j``, ``std / sqrt(n)``, normal interval, ``ess`` of the
        marginal weights; ``nan`` with a :class:`NoSupportWarning` when every weight is 0.

    Raises
    ------
    TypeError, ValueError
        As :func:`ips`; embeddings missing, not integers, negative or of the wrong shape;
        ``pi_b`` missing for a non-uniform log, of the wrong shape or not a distribution.

    Notes
    -----
    ``V = (1/n) sum_j r_j p(e_j|x_j, pi) / p(e_j|x_j, pi_0)`` with ``e_j = e(a_j)`` and
    ``p(e|x, pi) = sum_{a: e(a) = e} pi(a|x)``, the marginal of the whole embedding vector
    (what Open Bandit Pipeline 0.5.7's ``MarginalizedInverseProbabilityWeighting`` computes
    from a one-hot ``p_e_a``; equal to it to 1e-15, several features included). Saito &
    Joachims (2022), "Off-policy evaluation for large action spaces via embeddings".
    Unbiased when (i) the embedding carries every effect of the action on the reward (*no
    direct effect*: ``E[r | x, a] = E[r | x, e(a)]``) and (ii) every embedding the target can
    produce the logging policy can too (common embedding support), which is much weaker than
    action support when many actions share an embedding. When (i) fails the bias is
    ``sum_e p(e|x, pi) (E_{pi_0}[q | x, e] - E_pi[q | x, e])``: the estimator sees the
    embedding's average reward under the logging policy, not the target's choice inside the
    embedding. The weights are exact (closed form for deterministic embeddings, no
    classifier): cost one pass over ``action_dist`` and ``pi_b`` in row chunks.

    Examples
    --------
    >>> import numpy as np
    >>> from simulator.logs import BanditLog
    >>> log = BanditLog(context=np.zeros((4, 1)), action=[0, 1, 2, 3], reward=[1.0, 0, 1, 0],
    ...                 pscore=[0.25] * 4, n_actions=4)
    >>> target = np.tile([0.5, 0.5, 0.0, 0.0], (4, 1))  # only actions of embedding 0
    >>> float(mips(log, target, action_embeddings=np.array([0, 0, 1, 1])).value)  # w = 2, 2, 0, 0
    0.5
    """
    log = _check_log(log)
    a = _rows(log, _check_action_dist(log, action_dist))
    E = _check_embeddings(log, action_embeddings)
    level = check_level(ci)
    uniform = False
    if pi_b is not None:
        pb = _rows(log, _check_action_dist(log, pi_b, "pi_b"))
    else:  # the log's own (checked when the log was made; at each record's position)
        pb = log.pi_b
        if pb is None:
            uniform = _uniform_logging(log)
            if not uniform:
                raise ArgumentValueError(
                    "pi_b", "the logging policy's action probabilities (n_rounds, n_actions): "
                    "the log has no `pi_b` and was not logged uniformly", "None")
    if pb is not None:
        got = pb[np.arange(log.n_rounds), log.action]
        bad = np.flatnonzero(np.abs(got - log.pscore) > 1e-6 * np.maximum(1.0, log.pscore))
        if bad.size:
            j = int(bad[0])
            raise ValueError(f"`pi_b` must agree with `log.pscore` on the logged actions; got "
                             f"{float(got[j])} against pscore {float(log.pscore[j])} at record "
                             f"{j}.")
    _, groups = np.unique(E, axis=0, return_inverse=True)
    groups = groups.reshape(-1)
    n_groups = int(groups.max()) + 1
    p_pi = _marginal(log, a, groups, n_groups, uniform)
    p_b = _marginal(log, None if uniform else pb, groups, n_groups, uniform)
    w = p_pi / p_b
    if not w.any():
        return _nan(log.n_rounds, level, "mips", _NO_WEIGHT)
    return _mean_estimate(w * log.reward, level, _ess(w), "mips")
