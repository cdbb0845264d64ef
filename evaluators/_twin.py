"""Choose an off-policy estimator for a real log by scoring the candidates on simulated twins
of that log, where the target's value is exact."""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np

from evaluators import _reward_models as _rm
from evaluators._estimate import Estimate, _z
from evaluators._ope import (
    OPEEstimate,
    _check_action_dist,
    _rows,
    direct_method,
    doubly_robust,
    dr_os,
    ips,
    sndr,
    snips,
    subgaussian_ips,
    switch_dr,
)
from evaluators._validation import check_log as _check_log
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_seed_sequence,
    check_int,
    check_level,
)
from simulator.logs import BanditLog

__all__ = ["TWIN_CANDIDATES", "TwinScore", "TwinSelection", "select_by_twin"]


def _label(fn, **kw) -> str:
    args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}"
                     for k, v in kw.items())
    return f"{fn.__name__}({args})" if kw else fn.__name__


def _candidate(fn, **kw):
    return (_label(fn, **kw), functools.partial(fn, **kw) if kw else fn)


#: The default candidates: ten estimators and hyper-parameters, ``(label, estimator)``.
TWIN_CANDIDATES = (
    _candidate(ips), _candidate(ips, clip=10.0), _candidate(snips),
    _candidate(subgaussian_ips), _candidate(direct_method), _candidate(doubly_robust),
    _candidate(sndr), _candidate(switch_dr, tau=10.0), _candidate(dr_os, lambda_=10.0),
    _candidate(dr_os, lambda_=100.0),
)

_MODEL_BASED = (direct_method, doubly_robust, sndr, switch_dr, dr_os)


@dataclass(frozen=True)
class TwinScore:
    """One candidate on the twins: ``rmse``, ``bias`` and ``sd`` of its error against the
    twins' exact values, over the ``n`` twins where it gave a number (``n_nan`` where it
    did not), and its ``estimate`` on the real log."""

    label: str
    rmse: float
    bias: float
    sd: float
    n: int
    n_nan: int
    estimate: Estimate


@dataclass(frozen=True)
class TwinSelection(OPEEstimate):
    """The chosen candidate's estimate on the real log (its value, standard error and
    interval), with ``selected`` (its label), ``leaderboard`` (every candidate's
    :class:`TwinScore`, best first), ``twin_values`` (the target's exact value on each twin),
    ``reward`` ("bernoulli" or "gaussian") and ``logging`` ("pi_b", "uniform" or "logged":
    how the twins choose their actions)."""

    selected: str = ""
    leaderboard: tuple = ()
    twin_values: tuple = ()
    reward: str = ""
    logging: str = ""


def _check_candidates(candidates) -> list:
    if candidates is None:
        return list(TWIN_CANDIDATES)
    if isinstance(candidates, dict):
        items = list(candidates.items())
    elif isinstance(candidates, (str, bytes)) or not hasattr(candidates, "__iter__"):
        raise ArgumentTypeError("candidates", "a sequence of (label, estimator) pairs or "
                                "estimator functions, or a mapping label -> estimator",
                                type(candidates).__name__)
    else:
        items = []
        for j, c in enumerate(candidates):
            if isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str):
                items.append(c)
            elif callable(c):
                items.append((getattr(c, "__name__", f"candidate {j}"), c))
            else:
                raise ArgumentTypeError(f"candidates[{j}]", "a (label, estimator) pair or an "
                                        "estimator function", type(c).__name__)
    if len(items) < 2:
        raise ArgumentValueError("candidates", "at least 2 candidates (one leaves nothing to "
                                 "choose)", f"{len(items)}")
    labels = set()
    for label, f in items:
        if not callable(f):
            raise ArgumentTypeError(f"candidates[{label!r}]", "a callable estimator(log, "
                                    "action_dist)", type(f).__name__)
        if label in labels:
            raise ArgumentValueError("candidates", "distinct labels", f"{label!r} twice")
        labels.add(label)
    return items


def _model_spec(f):
    """The reward-model specification a built-in model-based candidate fits itself (a
    name or a regressor; ``None``: the candidate is called as it is)."""
    fn, kw = getattr(f, "func", f), dict(getattr(f, "keywords", None) or {})
    if fn not in _MODEL_BASED:
        return None
    import inspect

    model = kw.get("model", inspect.signature(fn).parameters["model"].default)
    if isinstance(model, str) or callable(getattr(model, "fit", None)):
        return model
    return None


def _logging_mode(log) -> str:
    if log.pi_b is not None:
        return "pi_b"
    n_avail = log.available_mask().sum(axis=1)
    return "uniform" if np.all(np.abs(log.pscore * n_avail - 1.0) <= 1e-9) else "logged"


def _draw_actions(probs, u) -> np.ndarray:
    """One action per row of ``probs`` by inverse CDF of the uniforms ``u``."""
    K = probs.shape[1]
    return np.minimum((np.cumsum(probs, axis=1) <= u[:, None]).sum(axis=1), K - 1)


def _twin_log(log, idx, mu, sigma, mode, gen) -> BanditLog:
    """One twin: the records ``idx`` of ``log`` (contexts, positions, availability), actions
    from the logging policy, rewards around ``mu`` (Bernoulli when ``sigma`` is None)."""
    n = idx.shape[0]
    rows = np.arange(n)
    available = None if log.available is None else log.available[idx]
    pi_b = None
    if mode == "pi_b":
        pi_b = log.pi_b[idx]
        action = _draw_actions(pi_b, gen.random(n))
        pscore = pi_b[rows, action]
    elif mode == "uniform":
        avail = log.available_mask()[idx]
        action = _draw_actions(avail / avail.sum(axis=1, keepdims=True), gen.random(n))
        pscore = 1.0 / avail.sum(axis=1)
    else:
        action, pscore = log.action[idx], log.pscore[idx]
    m = mu[idx, action]
    reward = ((gen.random(n) < m).astype(np.float64) if sigma is None
              else m + sigma * gen.standard_normal(n))
    return BanditLog(context=log.context[idx], action=action, reward=reward, pscore=pscore,
                     n_actions=log.n_actions, available=available, pi_b=pi_b,
                     action_embeddings=log.action_embeddings,
                     position=None if log.position is None else log.position[idx],
                     len_list=log.len_list)


def _resampled(a, idx) -> np.ndarray:
    """``action_dist``'s records ``idx`` (a broadcast row stays a broadcast)."""
    if a.shape[0] and a.strides[0] == 0:
        return np.broadcast_to(a[:1], (idx.shape[0], *a.shape[1:]))
    return a[idx]


def _estimate(f, log, a, model, what):
    """One candidate's estimate (``None`` where it gave no finite number)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = f(log, a, model=model) if model is not None else f(log, a)
    except Exception as exc:  # a user's estimator may fail in any way
        raise ValueError(f"`candidates`: {what} failed: {type(exc).__name__}: {exc}") from exc
    value = getattr(est, "value", est)
    if not isinstance(value, (float, int, np.floating)) or not math.isfinite(value):
        return None
    return est if isinstance(est, Estimate) else Estimate(float(value), math.nan, math.nan,
                                                          math.nan, log.n_rounds)


def select_by_twin(log, action_dist, *, candidates=None, n_twins: int = 20, model="ridge",
                   ci: float = 0.95, rng=None) -> TwinSelection:
    """Choose an estimator for ``log`` by its RMSE on simulated twins of the log, where the
    target's value is exact; return the winner's estimate on the real log.

    Parameters
    ----------
    log : simulator.logs.BanditLog
        The real log.
    action_dist : array (n_rounds, n_actions) or (n_rounds, n_actions, len_list)
        The target policy on the log's records (as for :func:`evaluators.ips`).
    candidates : sequence or mapping, optional
        The estimators (and hyper-parameters) to choose from: ``(label, estimator)`` pairs,
        estimator functions, or a mapping ``label -> estimator``; ``estimator(log,
        action_dist)`` returns an :class:`Estimate` or a float. Give hyper-parameters with
        ``functools.partial`` (``("dr_os(lambda_=10)", partial(dr_os, lambda_=10.0))``).
        recloop's model-based estimators (and partials of them) share one reward model per
        twin, fitted from their ``model`` (default "ridge"). Default
        :data:`TWIN_CANDIDATES` (ten).
    n_twins : int >= 2, default 20
        Simulated logs.
    model : "ridge", "mean", regressor or RewardModel, default "ridge"
        The twin's reward function: this model cross-fitted on the log
        (:func:`evaluators.fit_reward_model`; a :class:`RewardModel` fitted on ``log`` is
        used as it is).
    ci : float in (0, 1)
        Level of the returned interval.
    rng : None, int, SeedSequence or Generator
        Source of everything drawn: the model's folds, then twin ``i``'s records, actions,
        rewards and its candidates' folds from child ``i`` (the result does not depend on
        the order the twins are computed in).

    Returns
    -------
    TwinSelection
        The winner's estimate on the real log (its own standard error and interval, which do
        not account for the choice), ``selected`` and the ``leaderboard``.

    Raises
    ------
    TypeError, ValueError
        As :func:`evaluators.ips` for ``log`` and ``action_dist``; fewer than 2 candidates,
        a label twice, a candidate that is not callable or raises (named, with its error), a
        reward model that fails to fit or predicts nan (``model`` named), ``n_twins < 2``.

    Notes
    -----
    The twin of a log: contexts (with their positions and availability) resampled from the
    log's records; the logging policy the log's own (``pi_b`` when the log has it, uniform
    when it was logged uniformly; otherwise the logged actions and propensities are kept
    with their records, ``logging="logged"``); the expected reward ``mu(x_j, a)`` the
    cross-fitted regression ``q(x_j, a)`` of the log's rewards (at the record's position),
    clipped to [0, 1] with Bernoulli rewards when every logged reward is 0 or 1, else
    Gaussian rewards around it with the standard deviation of the cross-fitted residuals.
    The target's value on twin ``i`` (records ``idx_i``) is exact: ``mean_{j in idx_i}
    sum_a pi(a | x_j) mu(x_j, a)``. Every candidate estimates it on every twin; the one with
    the least RMSE wins. The twin shares the log's size, contexts, propensities and reward
    scale, so its leaderboard reflects the variance and weight problems of this log; its
    reward function is a regression, so a model-based candidate whose model can represent it
    is favoured (the real rewards may be further from its model than the twin's are).
    Compare with SLOPE (:func:`evaluators.select_estimator`), which tunes one family's
    hyper-parameter from the log alone.

    Examples
    --------
    >>> import numpy as np
    >>> from simulator.logs import BanditLog
    >>> g = np.random.default_rng(0)
    >>> log = BanditLog(context=g.normal(size=(300, 2)), action=g.integers(0, 3, 300),
    ...                 reward=(g.random(300) < 0.3).astype(float),
    ...                 pscore=np.full(300, 1 / 3), n_actions=3)
    >>> est = select_by_twin(log, np.tile([0.8, 0.1, 0.1], (300, 1)), n_twins=5, rng=0)
    >>> est.selected in [s.label for s in est.leaderboard]
    True
    """
    log = _check_log(log)
    a3 = _check_action_dist(log, action_dist)  # values checked (every position)
    items = _check_candidates(candidates)
    n_twins = check_int(n_twins, "n_twins", low=2)
    level = check_level(ci)
    root = as_seed_sequence(rng)
    model_seq, twin_seqs = root.spawn(2)
    n = log.n_rounds
    if isinstance(model, _rm.RewardModel):
        base = _rm.prepare(log, model)
        spec = base.model
    else:
        spec = model
        base = _fit(log, model, np.random.default_rng(model_seq), "model")
    q = base.cross_fitted
    binary = bool(np.all((log.reward == 0) | (log.reward == 1)))
    if binary:
        mu, sigma = np.clip(q, 0.0, 1.0), None
    else:
        mu = q
        sigma = float(np.std(log.reward - q[np.arange(n), log.action]))
    pi = np.asarray(_rows(log, a3), dtype=np.float64)
    v = np.einsum("jk,jk->j", pi, mu)  # each record's expected reward under the target
    mode = _logging_mode(log)
    specs = {label: _model_spec(f) for label, f in items}
    err = np.full((n_twins, len(items)), np.nan)
    truths = np.empty(n_twins)
    for i, seq in enumerate(twin_seqs.spawn(n_twins)):
        gen_log, gen_models = (np.random.default_rng(s) for s in seq.spawn(2))
        idx = gen_log.integers(0, n, n)
        twin = _twin_log(log, idx, mu, sigma, mode, gen_log)
        truths[i] = float(v[idx].mean())
        a_twin = _resampled(a3, idx)
        models = _shared_models(twin, specs, gen_models)
        for c, (label, f) in enumerate(items):
            est = _estimate(f, twin, a_twin, models.get(specs[label]) if specs[label]
                            is not None else None, f"{label!r} on twin {i}")
            if est is not None:
                err[i, c] = est.value - truths[i]
    # the candidates on the real log, with models fitted on it (the twin's own reused)
    real_models = _shared_models(log, specs, np.random.default_rng(model_seq.spawn(1)[0]),
                                 reuse={_key(spec): base})
    board = []
    for c, (label, f) in enumerate(items):
        e = err[:, c][np.isfinite(err[:, c])]
        est = _estimate(f, log, a3, real_models.get(specs[label]) if specs[label] is not None
                        else None, f"{label!r} on the log")
        board.append(TwinScore(
            label=label, rmse=float(np.sqrt(np.mean(e ** 2))) if e.size else math.nan,
            bias=float(e.mean()) if e.size else math.nan,
            sd=float(e.std(ddof=1)) if e.size > 1 else math.nan, n=int(e.size),
            n_nan=n_twins - int(e.size),
            estimate=est if est is not None else Estimate(math.nan, math.nan, math.nan,
                                                          math.nan, n)))
    # the least RMSE among the candidates with a number on the real log and on most twins
    order = sorted(range(len(board)), key=lambda c: (
        not (board[c].n * 2 > n_twins and math.isfinite(board[c].estimate.value)),
        board[c].rmse if math.isfinite(board[c].rmse) else math.inf, c))
    ranked = tuple(board[c] for c in order)
    win = ranked[0]
    e = win.estimate
    lo, hi = e.ci_low, e.ci_high
    if e.level != level:  # the candidates ran at 0.95: the normal interval at `ci`
        lo, hi = e.value - _z(level) * e.stderr, e.value + _z(level) * e.stderr
    return TwinSelection(e.value, e.stderr, lo, hi, e.n, level,
                         ess=getattr(e, "ess", math.nan), estimator="select_by_twin",
                         selected=win.label, leaderboard=ranked,
                         twin_values=tuple(truths.tolist()),
                         reward="bernoulli" if binary else "gaussian", logging=mode)


def _key(spec):
    return spec if isinstance(spec, str) else id(spec)


def _fit(log, spec, gen, name):
    """``fit_reward_model(log, spec)`` with its predictions computed; a failure names
    ``name``."""
    try:
        m = _rm.fit_reward_model(log, spec, rng=gen)
        m.cross_fitted, m.in_sample  # noqa: B018 (fitted now)
    except (TypeError, ArgumentTypeError, ArgumentValueError):
        raise
    except Exception as exc:  # a user's regressor may fail in any way
        raise ValueError(f"`{name}`: the reward model failed to fit on "
                         f"{'the log' if name == 'model' else 'a twin of the log'}: "
                         f"{type(exc).__name__}: {exc}") from exc
    return m


class _Models(dict):
    """Fitted reward models of one log by specification."""

    def get(self, spec):
        return super().get(_key(spec))


def _shared_models(log, specs, gen, reuse=None) -> _Models:
    """One fitted reward model per distinct specification of the candidates, folds from
    ``gen`` (``reuse``: already fitted ones by key)."""
    out = _Models()
    for spec in specs.values():
        if spec is None or _key(spec) in out:
            continue
        if reuse and _key(spec) in reuse:
            out[_key(spec)] = reuse[_key(spec)]
        else:
            out[_key(spec)] = _fit(log, spec, gen, "candidates")
    return out
