"""Replay evaluation of a (learning) bandit policy on logged data (Li et al. 2011)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from evaluators._estimate import Estimate, normal_estimate
from evaluators._validation import check_actions as _check_actions
from evaluators._validation import check_agent as _check_agent
from evaluators._validation import check_log as _check_log
from evaluators._validation import check_one_action as _check_one_action
from evaluators._validation import check_uniform as _check_uniform
from recloop_base.fast_paths import fast_path
from recloop_base.validation import as_generator, check_level

__all__ = ["replay", "ReplayEstimate", "NoMatchWarning"]

_METHODS = ("uniform", "rejection")


class NoMatchWarning(UserWarning):
    """Replay matched no record (or no replicate matched): the estimate is ``nan``."""


@dataclass(frozen=True)
class ReplayEstimate(Estimate):
    """:class:`Estimate` of a replay, with its diagnostics.

    ``n`` is the number of records used (matched and, for ``method="rejection"``, accepted);
    ``n_matches`` counts all matches before rejection; ``n_records`` the records walked.
    """

    n_records: int = 0
    n_matches: int = 0
    method: str = "uniform"


# -- the walk ------------------------------------------------------------------------------

def _walk(agent, context, available, logged, reward, *, index=None, eligible=None,
          jitter=None, jitter_scale=None, revealed=None, observation=None):
    """Chosen actions (n,) of ``agent`` replayed over records ``index`` (default: all), in order.

    Uses the agent's compiled ``replay_arrays`` when :func:`agents.fast_path` vouches that it
    implements the agent's ``act`` / ``update``; otherwise the plain loop (the reference):
    step j acts on record ``r = index[j]`` with context ``context[r] + jitter[j] *
    jitter_scale`` (float32 jitter widened first), and updates on an eligible match. With
    ``revealed`` (reveal once, BRED) a match is used only if record r is not yet revealed, and
    then marks it in ``revealed`` (in place). ``observation(r)`` builds the observation of
    record r when given (no ``index`` and no ``jitter`` then).
    """
    fast = fast_path(agent, "replay_arrays")
    if fast is not None:
        # only the options in use: a user's replay_arrays may implement just those it needs
        opts = {k: v for k, v in (("index", index), ("eligible", eligible), ("jitter", jitter),
                                  ("jitter_scale", jitter_scale), ("revealed", revealed))
                if v is not None}
        actions = np.asarray(fast(context, available, logged, reward, **opts))
        _check_actions(actions, available, index)
        return actions
    n = logged.shape[0] if index is None else index.shape[0]
    actions = np.empty(n, dtype=np.int64)
    for j in range(n):
        r = j if index is None else int(index[j])
        if observation is not None:
            obs = observation(r)
        else:
            x = context[r]
            if jitter is not None:
                noise = jitter[j].astype(np.float64)
                x = x + (noise if jitter_scale is None else noise * jitter_scale)
            obs = {"context": x, "available": available[r]}
        a = agent.act(obs)
        _check_one_action(a, j, available[r])
        actions[j] = a
        if a == logged[r] and (eligible is None or eligible[j]):
            if revealed is not None:
                if revealed[r]:
                    continue  # already revealed in this replicate: skipped
                revealed[r] = True
            agent.update(obs, int(a), float(reward[r]))
    return actions


def replay(log, agent, *, method="uniform", ci=0.95, rng=None) -> ReplayEstimate:
    """Replay estimate of a bandit policy's average reward on a logged dataset.

    Parameters
    ----------
    log : simulator.logs.BanditLog
        ``n_rounds`` records (context, available, action, reward, pscore), walked in order.
    agent : object with ``act(observation)`` and ``update(observation, action, reward)``
        Used as is (reset it beforehand); it learns from the matched records. An agent whose
        ``replay_arrays`` implements its own ``act`` / ``update`` (recloop's bandits and
        their subclasses that do not override these; see :func:`agents.fast_path`) is
        replayed by that compiled loop, with the same result as the plain loop; any other
        agent -- a subclass overriding ``act``, for one -- by the plain loop.
    method : {"uniform", "rejection"}
        ``"uniform"`` (Li et al. 2011) requires uniform logging, ``pscore == 1 /
        n_available``; ``"rejection"`` (Dudik et al. 2012) accepts a matching record with
        probability ``min(pscore) / pscore``, for any known propensities.
    ci : float in (0, 1)
        Confidence level of the interval.
    rng : None, int, SeedSequence or Generator
        Randomness of the rejection step (one uniform per record, drawn up front).

    Returns
    -------
    ReplayEstimate
        ``value`` is the mean reward over the used records, with the normal-approximation
        standard error and interval; ``n`` the number of used records, ``n_matches`` and
        ``n_records`` as diagnostics. ``nan`` (and a :class:`NoMatchWarning`) when no record
        was used.

    Raises
    ------
    TypeError
        ``log`` not a BanditLog, ``agent`` without ``act`` / ``update``.
    ValueError
        Empty log, unknown ``method``, non-uniform propensities with ``method="uniform"``,
        an agent returning an unavailable or out-of-range action (the record index is named).

    Notes
    -----
    Li, Chu, Langford, Wang (2011), "Unbiased offline evaluation of contextual-bandit-based
    news article recommendation algorithms": under uniform logging over K arms, the matched
    records are distributed as online interactions, so the mean matched reward estimates
    the policy's per-trial payoff -- for a learner, over about ``T / K`` of its steps (time
    acceleration). Rejection sampling (Dudik, Erhan, Langford, Li 2012) accepts a match
    with probability ``p_min / p`` so the accepted stream is again uniform-like. Records
    with fewer available arms are matched more often; with varying arm sets the estimate
    weights them accordingly. The interval treats the used rewards as i.i.d.: exact for a
    static policy, indicative for a learner (:func:`bred` gives a bootstrap interval).

    Examples
    --------
    >>> import numpy as np, agents
    >>> from simulator.logs import BanditLog
    >>> g = np.random.default_rng(0)
    >>> log = BanditLog(context=g.normal(size=(200, 2)), action=g.integers(0, 2, 200),
    ...                 reward=g.random(200), pscore=np.full(200, 0.5), n_actions=2)
    >>> ag = agents.UCB1(); ag.reset(0)
    >>> est = replay(log, ag)
    """
    log = _check_log(log)
    _check_agent(agent)
    if method not in _METHODS:
        raise ValueError(f"`method` must be one of {_METHODS}; got {method!r}.")
    level = check_level(ci)
    T = log.n_rounds
    if method == "uniform":
        _check_uniform(log, "replay")
        eligible = np.ones(T, dtype=bool)
    else:
        gen = as_generator(rng)
        eligible = gen.random(T) < log.pscore.min() / log.pscore
    actions = _walk(agent, log.context, log.available_mask(), log.action, log.reward,
                    eligible=eligible, observation=log.observation)
    match = actions == log.action
    used = match & eligible
    if not used.any():
        warnings.warn(f"replay matched no record of {T} (method={method!r}); returning nan.",
                      NoMatchWarning, stacklevel=2)
        est = Estimate(math.nan, math.nan, math.nan, math.nan, 0, level)
    else:
        est = normal_estimate(log.reward[used], level=level)
    return ReplayEstimate(est.value, est.stderr, est.ci_low, est.ci_high, est.n, level,
                          n_records=T, n_matches=int(match.sum()), method=method)
