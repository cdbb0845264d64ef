"""The built-in agent and estimator kinds, declared as plugins declare theirs.

Each is an :class:`recloop._registry.AgentKind` or :class:`~recloop._registry.EstimatorKind`
that the registry adds with the same :meth:`~recloop._registry.Registry.add` as an installed
package's entry points. The evaluation kinds are declared beside their experiments
(``recloop.experiments``).
"""

from __future__ import annotations

import warnings

import agents
import evaluators
from recloop._registry import AgentKind, EstimatorKind
from recloop._schema import REQUIRED, Float, Int, ListOf, Param

__all__ = ["KINDS", "LEARNING_ESTIMATORS"]

_ALPHA = Float(low=0.0)

_BANDITS = (
    AgentKind("uniform_random", agents.UniformRandom, "bandit", "Uniform random choice among "
              "available arms (the usual logging policy; exact action probabilities)."),
    AgentKind("ucb1", agents.UCB1, "bandit", "UCB1: mean + alpha * sqrt(2 ln t / n_a); every "
              "arm once first.", (Param("alpha", _ALPHA, 1.0, "Exploration weight."),)),
    AgentKind("linucb", agents.LinUCB, "bandit", "LinUCB, disjoint model (Li et al. 2010): "
              "per-arm ridge regression, upper confidence bound with width alpha.",
              (Param("alpha", _ALPHA, 1.0, "Exploration weight."),
               Param("ridge", Float(low=0.0, low_open=True), 1.0, "Ridge penalty of each "
                     "arm's model."))),
    AgentKind("epsilon_greedy", agents.EpsilonGreedy, "bandit", "Best empirical mean, a "
              "uniform arm with probability epsilon.",
              (Param("epsilon", Float(low=0.0, high=1.0), 0.1, "Exploration probability."),)),
    AgentKind("thompson_sampling", agents.ThompsonSampling, "bandit", "Beta-Bernoulli "
              "Thompson sampling.",
              (Param("a0", Float(low=0.0, low_open=True), 1.0, "Prior Beta(a0, b0): a0."),
               Param("b0", Float(low=0.0, low_open=True), 1.0, "Prior Beta(a0, b0): b0."))),
)

_RECOMMENDERS = (
    AgentKind("constant", agents.Constant, "recommender", "Always recommends the same list "
              "of items.", (Param("items", ListOf(Int(low=0), unique=True), REQUIRED, "The "
                                  "recommended items, in rank order."),)),
    AgentKind("constant_agreeing", agents.Constant.agreeing, "recommender", "g1 of de "
              "Myttenaere et al.: the k items most pushed by the campaigns in the evaluation "
              "window (built by the evaluation from the world; k is the evaluation's).",
              by_evaluation=True),
    AgentKind("constant_disagreeing", agents.Constant.disagreeing, "recommender", "g2: the k "
              "most frequent items at the window's first tick among items never pushed "
              "(built by the evaluation).", by_evaluation=True),
    AgentKind("popularity", agents.Popularity, "recommender", "The most popular items the "
              "profile does not hold."),
    AgentKind("user_cosine_cf", agents.UserCosineCF, "recommender", "User-based CF on binary "
              "profiles: score_i = sum_v cos(B_u, B_v) B_vi."),
    AgentKind("naive_cf", agents.NaiveCF, "recommender", "Item co-occurrence CF: score_i = "
              "max_j #(U_i & U_j) / #U_j over the profile's items j."),
)


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evaluators.NoMatchWarning)
        return fn(*args, **kw)


def replay(log, make_agent, *, rng=None):
    """Replay (Li et al. 2011): the agent walks the uniform log and learns on its matches.
    One stream builds the agent, the other drives the replay."""
    agent_rng, replay_rng = rng.spawn(2)
    return _quiet(evaluators.replay, log, make_agent(agent_rng), rng=replay_rng)


def bred(log, make_agent, *, n_bootstrap=100, rng=None):
    """BRED as Mary, Preux & Nicol (2014) describe it: B jittered bootstrap resamples of
    K*T records, every match revealed (optimistic for context-using learners: see
    ``evaluators.bred``'s Notes)."""
    return _quiet(evaluators.bred, log, make_agent, n_bootstrap=n_bootstrap, rng=rng)


def bred_nojitter(log, make_agent, *, n_bootstrap=100, rng=None):
    """BRED without the context jitter."""
    return _quiet(evaluators.bred, log, make_agent, n_bootstrap=n_bootstrap, jitter=0.0,
                  rng=rng)


def bred_once(log, make_agent, *, n_bootstrap=100, rng=None):
    """BRED revealing each logged record once per replicate (``reveal="once"``): unbiased
    for the value at its own horizon, about T/4 matches for LinUCB at K = 10."""
    return _quiet(evaluators.bred, log, make_agent, n_bootstrap=n_bootstrap, reveal="once",
                  rng=rng)


_N_BOOTSTRAP = (Param("n_bootstrap", Int(low=1, high=100_000), 100, "Bootstrap replicates."),)

#: Learning-policy evaluators whose value is optimistic for context-using learners.
OPTIMISTIC_FOR_CONTEXT_LEARNERS = ("bred", "bred_nojitter")

_LEARNING = (
    EstimatorKind("replay", replay, "learning", "Replay (Li et al. 2011) on the uniform log.",
                  ()),
    EstimatorKind("bred", bred, "learning", "BRED (Mary et al. 2014), every match revealed.",
                  _N_BOOTSTRAP),
    EstimatorKind("bred_nojitter", bred_nojitter, "learning", "BRED without context jitter.",
                  _N_BOOTSTRAP),
    EstimatorKind("bred_once", bred_once, "learning", "BRED revealing each record once per "
                  "replicate.", _N_BOOTSTRAP),
)

#: Names of the built-in learning-policy evaluators.
LEARNING_ESTIMATORS = tuple(k.name for k in _LEARNING)


def _static(name, fn):
    summary = " ".join((fn.__doc__ or "").strip().split("\n\n")[0].split())
    return EstimatorKind(name, fn, "static", summary, None)


_STATIC = tuple(_static(name, getattr(evaluators, name)) for name in (
    "ips", "snips", "direct_method", "doubly_robust", "sndr", "switch_dr", "dr_os",
    "subgaussian_ips", "mips", "select_estimator", "select_by_twin", "select_by_cv",
    "select_by_pasif", "select_by_slope"))

KINDS = _BANDITS + _RECOMMENDERS + _LEARNING + _STATIC
