"""Choose an off-policy estimator for a real log by scoring the candidates on simulated twins
of that log, where the target's value is exact, with the bias the twins cannot see read from
the log itself."""

from __future__ import annotations

import math

import numpy as np

from evaluators import _reward_models as _rm
from evaluators import _select
from evaluators._ope import _check_action_dist, _rows, doubly_robust
from evaluators._validation import check_log as _check_log
from recloop_base.guard import TRIAL_TIMEOUT
from recloop_base.validation import (
    as_seed_sequence,
    check_choice,
    check_int,
    check_level,
)
from simulator.logs import BanditLog

__all__ = ["BIAS_SOURCES", "select_by_twin"]

#: Where :func:`select_by_twin` reads each candidate's bias: the log where it resolves one
#: and the twins elsewhere ("auto"), always the log (against the reference estimator), or
#: the twins (their own RMSE).
BIAS_SOURCES = ("auto", "log", "twin")
#: "auto" reads a candidate's bias from the log when its squared difference from the
#: reference exceeds this many times that difference's variance over the twins.
LOG_RESOLVES = 2.0
#: |z| above which a candidate's difference from the reference on the log is one the twins
#: do not predict (the Bonferroni bound of 10 two-sided tests at 5%).
UNFAITHFUL_Z = 2.81


def logging_mode(log) -> str:
    """How a twin chooses its actions: "pi_b", "uniform" or "logged"."""
    if log.pi_b is not None:
        return "pi_b"
    n_avail = log.available_mask().sum(axis=1)
    return "uniform" if np.all(np.abs(log.pscore * n_avail - 1.0) <= 1e-9) else "logged"


def _draw_actions(probs, u) -> np.ndarray:
    """One action per row of ``probs`` by inverse CDF of the uniforms ``u``."""
    K = probs.shape[1]
    return np.minimum((np.cumsum(probs, axis=1) <= u[:, None]).sum(axis=1), K - 1)


def twin_log(log, idx, mu, sigma, mode, gen, outcomes=None) -> BanditLog:
    """One twin: the records ``idx`` of ``log`` (contexts, positions, availability), actions
    from the logging policy, rewards ``outcomes[idx, action]`` (0/1 potential outcomes of
    the log's records) or, without them, Gaussian around ``mu`` with sd ``sigma``."""
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
    reward = (outcomes[idx, action].astype(np.float64) if outcomes is not None
              else mu[idx, action] + sigma * gen.standard_normal(n))
    return BanditLog(context=log.context[idx], action=action, reward=reward, pscore=pscore,
                     n_actions=log.n_actions, available=available, pi_b=pi_b,
                     action_embeddings=log.action_embeddings,
                     position=None if log.position is None else log.position[idx],
                     len_list=log.len_list)


def select_by_twin(log, action_dist, *, candidates=None, n_twins: int = 20, model="ridge",
                   bias: str = "auto", ci: float = 0.95, rng=None,
                   timeout: float = TRIAL_TIMEOUT) -> _select.Selection:
    """Choose an estimator for ``log`` by its mean squared error on simulated twins of the
    log, where the target's value is exact, with its bias read from the log; return the
    winner's estimate on the real log.

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
        log, fitted from their ``model`` (default "ridge"). Default
        :data:`evaluators.CANDIDATES` (ten). Users' estimators run behind guards
        (:mod:`evaluators._select`).
    n_twins : int >= 2, default 20
        Simulated logs.
    model : "ridge", "mean", regressor or RewardModel, default "ridge"
        The twin's reward function: this model cross-fitted on the log
        (:func:`evaluators.fit_reward_model`; a :class:`RewardModel` fitted on ``log`` is
        used as it is).
    bias : {"auto", "log", "twin"}, default "auto"
        Where each candidate's bias comes from: ``"auto"``, the log where it resolves one
        and the twins elsewhere; ``"log"``, always the log (against the reference,
        :func:`evaluators.doubly_robust`); ``"twin"``, the twins (the score is then the
        RMSE over the twins, unless the self-check fails).
    ci : float in (0, 1)
        Level of the returned interval.
    rng : None, int, SeedSequence or Generator
        Source of everything drawn: the model's folds, then twin ``i``'s records, outcomes
        or rewards and actions (its first child) and its candidates' folds (its second
        child) from child ``i`` (the result does not depend on the order, or the threads,
        the twins are computed in).
    timeout : float > 0
        Seconds a call of a user's candidate may take.

    Returns
    -------
    Selection
        ``method="twin"``: the winner's estimate on the real log (its own standard error
        and interval, which do not account for the choice), ``selected``, the
        ``leaderboard`` (``score`` the estimated RMSE on this log, ``bias`` and ``sd`` the
        candidate's error over the twins), ``how_sure``, ``warnings`` (the self-check) and
        ``details``: ``twin_values`` (the target's exact value on each twin), ``reward``
        ("bernoulli" or "gaussian"), ``logging`` ("pi_b", "uniform" or "logged": how the
        twins choose their actions), ``reference`` and ``z`` (each candidate's self-check
        statistic).

    Raises
    ------
    TypeError, ValueError
        As :func:`evaluators.ips` for ``log`` and ``action_dist``; fewer than 2 candidates,
        a label twice, a candidate that is not callable or raises (named, with its error), a
        reward model that fails to fit or predicts nan (``model`` named), ``n_twins < 2``,
        every candidate without a number on the log.
    recloop_base.guard.UserCodeError
        A user's candidate that exits, runs past ``timeout`` or changes its input.

    Notes
    -----
    The twin of a log: contexts (with their positions and availability) resampled from the
    log's records; the logging policy the log's own (``pi_b`` when the log has it, uniform
    when it was logged uniformly; otherwise the logged actions and propensities are kept
    with their records, ``logging="logged"``); the expected reward ``mu(x_j, a)`` the
    cross-fitted regression ``q(x_j, a)`` of the log's rewards (at the record's position).
    With 0/1 rewards every log record's outcome of every action is drawn once per twin,
    ``Bernoulli(clip(mu, 0, 1))``, a twin record's reward is its record's outcome of the
    twin's action and the target's value on twin ``i`` (records ``idx_i``) is the realized
    ``mean_{j in idx_i} sum_a pi(a | x_j) outcome_j(a)`` -- as a labelled log's value is
    that of its fixed labels; otherwise rewards are Gaussian around ``mu`` with the
    standard deviation of the cross-fitted residuals and the value is ``mean_{j in idx_i}
    sum_a pi(a | x_j) mu(x_j, a)``. Either way it is exact, and every candidate's error on
    it is known.

    A twin's reward function is a regression, smoother than real rewards: a model-based
    candidate whose model can represent it looks better on the twins than it is on the log
    (on real labels, ``1[a == y]``, the direct method's bias on the twins was a tenth of its
    bias on the log, docs/real_data.md), and its Bernoulli rewards are noisier than fixed
    labels. What the twins reproduce well is the variance of a candidate's difference
    from another estimator on the same records. So the score of candidate ``c`` is
    ``sqrt(se_c^2 + b_c^2)``: ``se_c`` its own standard error on the log (the twins' sd
    where it gives none), ``b_c^2`` its squared bias. ``d_c``, its estimate minus the
    reference's (:func:`evaluators.doubly_robust`, unbiased when the propensities are
    right, whatever its cross-fitted model) on the log, has ``E[d_c^2] = bias_c^2 + v_c``,
    ``v_c`` the variance of that difference over the twins. With ``bias="auto"``,
    ``b_c^2 = d_c^2 - v_c`` where the log resolves a bias (``d_c^2 > 2 v_c``), else the
    square of the twins' mean error; with ``bias="log"``, ``max(0, d_c^2 - v_c)`` always.
    With ``bias="twin"`` the score is the RMSE over the twins. The winner has the least
    score; ``stderr`` and the ties come from paired comparisons over the same twins of the
    twins' part of the score and from ``2 |d_c| sqrt(v_c)`` for the log's part
    (:func:`evaluators._select.leaderboard`; the candidate's own standard error is taken
    as known). "auto" was chosen on 31 development problems (docs/real_data.md): within
    1.2x of the best fixed candidate in 25 of them, where the twins' RMSE alone was in 18.

    Self-check: ``z_c = (d_c - m_c) / sqrt(v_c)``, ``m_c`` the twins' mean of that
    difference, says whether the log shows the difference the twins predict. Where
    ``|z_c| > 2.81`` (10 two-sided tests at 5%, Bonferroni) for some candidate the twins
    are not faithful to this log; the result's ``warnings`` say so in words, naming the
    candidates. With ``bias="twin"`` the selection then falls back to the candidates' own
    standard errors and the log's biases (the ``"log"`` score, the documented safe choice;
    ``fallback=True``); with ``"auto"`` those candidates' biases come from the log where
    it resolves them.

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
    cands = _select.Candidates(candidates, timeout=timeout, reference=doubly_robust)
    n_twins = check_int(n_twins, "n_twins", low=2)
    bias = check_choice(bias, "bias", BIAS_SOURCES)
    level = check_level(ci)
    root = as_seed_sequence(rng)
    model_seq, twin_seqs = root.spawn(2)
    n = log.n_rounds
    if isinstance(model, _rm.RewardModel):
        base = _rm.prepare(log, model)
    else:
        base = _select.fit_model(log, model, np.random.default_rng(model_seq),
                                 "`model`: the reward model failed to fit on the log")
    q = base.cross_fitted
    binary = bool(np.all((log.reward == 0) | (log.reward == 1)))
    if binary:
        mu, sigma = np.clip(q, 0.0, 1.0), None
    else:
        mu = q
        sigma = float(np.std(log.reward - q[np.arange(n), log.action]))
    pi = np.asarray(_rows(log, a3), dtype=np.float64)
    v = np.einsum("jk,jk->j", pi, mu)  # each record's expected reward under the target
    mode = logging_mode(log)
    seqs = twin_seqs.spawn(n_twins)

    def one_twin(i):
        gen_log, gen_models = (np.random.default_rng(s) for s in seqs[i].spawn(2))
        idx = gen_log.integers(0, n, n)
        if binary:  # every record's outcome of every action, fixed for this twin
            outcomes = gen_log.random(mu.shape) < mu
            values = np.einsum("jk,jk->j", pi, outcomes)
        else:
            outcomes, values = None, v
        twin = twin_log(log, idx, mu, sigma, mode, gen_log, outcomes)
        truth = float(values[idx].mean())
        got = cands.run(twin, _select.resampled(a3, idx), gen_models, f"twin {i}", order=i)
        return truth, [math.nan if e is None else e.value - truth for e in got]

    with _select.silenced():
        done = _select.replicates(one_twin, n_twins,
                                  cells=n * log.n_actions * len(cands.items))
        # the candidates on the real log, with models fitted on it (the twin's own reused)
        reuse = {} if isinstance(model, _rm.RewardModel) else {_select._key(model): base}
        models = cands.models(log, np.random.default_rng(model_seq.spawn(1)[0]),
                              "`candidates`: the reward model failed to fit on the log",
                              reuse=reuse)
        ests = cands.run(log, a3, None, "the log", models=models)
    truths = np.array([t for t, _ in done])
    err = np.array([row for _, row in done], dtype=np.float64)
    cands.warn_refused()
    C, ref = len(cands), cands.reference
    z, d2, v, b2_se = _log_bias(err, ests, ref, C)
    unfaithful = [c for c in range(C) if math.isfinite(z[c]) and abs(z[c]) > UNFAITHFUL_Z]
    notes = [_unfaithful_words(cands.labels, unfaithful, z, err, ests, ref)] \
        if unfaithful else []
    E = err[:, :C]
    k = np.isfinite(E).sum(axis=0)
    mean = np.where(k > 0, np.nansum(E, axis=0) / np.maximum(k, 1), np.nan)
    var_pop = np.where(k > 0, np.nansum((E - mean) ** 2, axis=0) / np.maximum(k, 1), np.nan)
    # the twins' variance (ddof=1): unknown from one twin (0 would give a candidate without
    # its own standard error a score of 0 from one number)
    var = np.where(k > 1, var_pop * k / np.maximum(k - 1, 1), np.nan)
    use_log = bias == "log" or (bias == "twin" and bool(unfaithful))
    if bias == "twin" and not unfaithful:  # the twins' own RMSE
        board, _ = _select.leaderboard(cands.labels, E ** 2, ests[:C], errors=E)
        read = "from the twins"
    else:
        own = np.array([e.stderr ** 2 if e is not None and math.isfinite(e.stderr) else
                        math.nan for e in ests[:C]])
        s2 = np.where(np.isfinite(own), own, var)  # the log's own variance where it has one
        if use_log:  # every bias from the log: max(0, d^2 - v)
            from_log = np.ones(C, dtype=bool)
        else:  # "auto": the log's where it resolves one, the twins' elsewhere
            from_log = d2 > LOG_RESOLVES * v
        # per twin: s^2 + the twin's squared error less its variance (mean: s^2 + bias^2);
        # s^2 alone for a bias from the log; nan where the candidate has no number on the
        # twin (the leaderboard counts the twins with one)
        losses = np.where(from_log, np.where(np.isfinite(E), s2, np.nan),
                          s2 + E ** 2 - var_pop)
        offset = np.where(from_log, np.maximum(0.0, d2 - v), 0.0)
        board, _ = _select.leaderboard(cands.labels, losses, ests[:C], errors=E,
                                       offset=offset,
                                       offset_se=np.where(from_log, b2_se, 0.0))
        read = ("with each bias from the log" if use_log else
                f"with {int(from_log.sum())} of {C} biases read from the log")
    if unfaithful and bias == "twin":
        notes.append("The selection falls back to each candidate's own standard error and "
                     "its bias read from the log against the reference (bias='log').")
    return _select.finish(
        board, method="twin", level=level, n_replicates=n_twins,
        sentence=_select.how_sure(board, f"{n_twins} twins, {read}"), warnings_=notes,
        fallback=bool(unfaithful) and bias == "twin",
        details={"twin_values": tuple(truths.tolist()),
                 "reward": "bernoulli" if binary else "gaussian", "logging": mode,
                 "reference": cands.items[ref][0], "bias": bias,
                 "z": dict(zip(cands.labels, (float(x) for x in z), strict=True))})


def _log_bias(err, ests, ref, C):
    """Per candidate (the first ``C`` columns): the self-check statistic ``z``, the squared
    difference from the reference on the log ``d^2``, that difference's variance over the
    twins ``v`` (ddof=1) and the standard error of ``d^2`` as an estimate, ``2 |d|
    sqrt(v)``."""
    z, d2, v, se = (np.full(C, math.nan), np.zeros(C), np.zeros(C), np.zeros(C))
    e_ref = ests[ref]
    for c in range(C):
        e = ests[c]
        diff = err[:, c] - err[:, ref]
        diff = diff[np.isfinite(diff)]
        if e is None or e_ref is None or diff.size < 2:
            continue
        d = e.value - e_ref.value
        d2[c], v[c] = d * d, float(diff.var(ddof=1))
        se[c] = 2 * abs(d) * math.sqrt(v[c])
        if v[c] > 0:
            z[c] = (d - float(diff.mean())) / math.sqrt(v[c])
        else:  # the reference itself, or a candidate equal to it on every twin
            z[c] = 0.0 if d == float(diff.mean()) else math.copysign(math.inf, d)
    return z, d2, v, se


def _unfaithful_words(labels, which, z, err, ests, ref) -> str:
    """The self-check's finding, in words."""
    ref_label = "the reference"
    parts = []
    for c in sorted(which, key=lambda c: -abs(z[c]))[:3]:
        diff = err[:, c] - err[:, ref]
        diff = diff[np.isfinite(diff)]
        d = ests[c].value - ests[ref].value
        parts.append(f"{labels[c]!r} is {d:+.4g} from {ref_label} on the log where the twins "
                     f"put it at {diff.mean():+.4g} +- {diff.std(ddof=1):.2g} (z = {z[c]:+.1f})")
    more = len(which) - len(parts)
    return ("The twins are not faithful to this log: " + "; ".join(parts)
            + (f"; and {more} more candidate{'s' if more > 1 else ''}" if more > 0 else "")
            + ". Their biases are read from the log instead.")
