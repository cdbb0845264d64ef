"""Off-policy estimators of static target policies against the exact policy value.

The question a practitioner brings: "which estimator can I trust on logs like mine?". On a
linear bandit world with a discrete context distribution (``bred_linear`` and its kin) the
value of any static policy is known exactly (:func:`simulator.static_policy_value`), so every
estimate -- of recloop's estimators and of the user's own -- is scored against the truth over
many independent logs: bias, RMSE, RMSE relative to the value, coverage and width of the
intervals, and how often an estimator gave no number at all.

Policies are tables of action probabilities on the atoms of the context distribution (``2^(d-1)``
binary contexts), computed once per cell; a record's probabilities are its atom's row. That
makes logging, the target's ``action_dist`` and the truth exact and fast, also for agents
used as targets: an agent is fitted on a separate uniform log (``update`` on every record),
then frozen, and its ``action_probabilities`` on each atom is its policy.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from typing import Callable, Mapping, Sequence

import numpy as np

from recloop._registry import Chunks, EvaluationKind, registry
from recloop._results import Measurement
from recloop._schema import EstimatorList, Float, Int, ListOf, Param, Str, Table
from recloop.experiments._common import (
    SECONDS_PER_RECORD_CALL,
    as_estimate,
    bound_arguments,
    child_rng,
    emit_per_log,
    estimator_table,
    name_key,
    same_header,
    seed_sequence,
)
from recloop_base.progress import bar
from recloop_base.validation import check_int

__all__ = ["DEFAULT_ESTIMATORS", "DEFAULT_TARGETS", "KIND", "LOGGING_POLICIES",
           "EstimatorErrorWarning", "leaderboard", "ope", "plot_ope", "policy_table"]

EVALUATION = "ope"

#: Policy constructors for the logging policy and the targets.
LOGGING_POLICIES = ("uniform", "epsilon_greedy", "softmax")

#: Estimators compared by default (recloop's built-ins).
DEFAULT_ESTIMATORS = ("ips", "snips", "direct_method", "doubly_robust")

#: Target policies compared by default: near-optimal, a softened optimum, and uniform.
DEFAULT_TARGETS = (
    {"name": "greedy_eps0.1", "policy": "epsilon_greedy", "epsilon": 0.1},
    {"name": "softmax_beta20", "policy": "softmax", "beta": 20.0},
    {"name": "uniform", "policy": "uniform"},
)

_Z = 1.959963984540054


class EstimatorErrorWarning(RuntimeWarning):
    """An estimator raised or returned a non-number on a log: that estimate is ``nan``
    (counted in ``nan_rate``)."""


# -- policies as tables on the context atoms ------------------------------------------------

def _atoms(config):
    from simulator import context_atoms

    x, prob, _ = context_atoms(config)
    return x, prob


def _atom_index(config, context: np.ndarray) -> np.ndarray:
    """Index of each record's context among the atoms (contexts are 0/1 vectors)."""
    i0 = int(config.intercept)
    bits = context[:, i0:].astype(np.int64)
    return bits @ (np.int64(1) << np.arange(bits.shape[1], dtype=np.int64))


def _true_ctr(config, x) -> np.ndarray:
    from simulator import bandit_ctr

    return bandit_ctr(config, x, np.zeros(x.shape[0], np.int64))


def policy_table(config, spec: Mapping) -> np.ndarray:
    """Action probabilities ``(n_atoms, K)`` of a policy constructor on every context atom.

    ``spec`` is ``{"policy": "uniform"}``, ``{"policy": "epsilon_greedy", "epsilon": e}``
    (the best arm by true CTR with probability ``1 - e``, uniform otherwise) or
    ``{"policy": "softmax", "beta": b}`` (``pi(a|x) ~ exp(b * p(x, a))`` with ``p`` the true
    click probability; ``b < 0`` favours the worst arms: an adversarial logger for IPS).
    """
    x, _ = _atoms(config)
    q = _true_ctr(config, x)
    n, K = q.shape
    kind = spec["policy"]
    if kind == "uniform":
        return np.full((n, K), 1.0 / K)
    if kind == "epsilon_greedy":
        eps = float(spec["epsilon"])
        table = np.full((n, K), eps / K)
        table[np.arange(n), q.argmax(axis=1)] += 1.0 - eps
        return table
    if kind == "softmax":
        s = float(spec["beta"]) * q
        s -= s.max(axis=1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=1, keepdims=True)
    raise ValueError(f"`policy` must be one of {', '.join(map(repr, LOGGING_POLICIES))}; got "
                     f"{kind!r}.")


def _agent_table(config, name: str, make_agent: Callable, n_train: int, rng_log, rng_agent):
    """Fit a (learning) agent on a uniform log of ``n_train`` records, then read its frozen
    ``action_probabilities`` on every atom; a clear error naming the agent otherwise."""
    import simulator

    agent = make_agent(rng_agent)
    if not callable(getattr(agent, "action_probabilities", None)):
        raise TypeError(f"target agent {name!r} must define `action_probabilities` (its "
                        "policy as probabilities) to be evaluated off-policy; "
                        f"{type(agent).__name__} does not.")
    if n_train:
        log, _ = simulator.collect_log(config, n_train, rng=rng_log)
        for j in range(log.n_rounds):
            agent.update(log.observation(j), int(log.action[j]), float(log.reward[j]))
    x, _ = _atoms(config)
    K = config.n_arms
    avail = np.ones(K, dtype=bool)
    table = np.empty((x.shape[0], K))
    for m in range(x.shape[0]):
        p = np.asarray(agent.action_probabilities({"context": x[m].copy(),
                                                   "available": avail.copy()}), dtype=float)
        if p.shape != (K,) or not np.all(np.isfinite(p)) or np.any(p < 0):
            raise ValueError(f"target agent {name!r}: `action_probabilities` must return {K} "
                             f"finite probabilities >= 0; got {p!r} on context {x[m]}.")
        if abs(p.sum() - 1.0) > 1e-6:
            raise ValueError(f"target agent {name!r}: `action_probabilities` must sum to 1; "
                             f"got {p.sum()!r} on context {x[m]}.")
        table[m] = p
    return table


def _lookup(config, table):
    """``policy(context (n, d), available (n, K)) -> (n, K)`` of a table on the atoms."""
    def policy(context, available):
        return table[_atom_index(config, context)]
    return policy


# -- the experiment ---------------------------------------------------------------------------


def _check_policy(spec, where: str) -> dict:
    if not isinstance(spec, Mapping):
        raise TypeError(f"`{where}` must be a mapping with a `policy` key; got "
                        f"{type(spec).__name__}.")
    kind = spec.get("policy")
    if kind not in LOGGING_POLICIES:
        raise ValueError(f"`{where}.policy` must be one of "
                         f"{', '.join(map(repr, LOGGING_POLICIES))}; got {kind!r}.")
    need = {"uniform": (), "epsilon_greedy": ("epsilon",), "softmax": ("beta",)}[kind]
    for key in need:
        v = spec.get(key)
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ValueError(f"`{where}.{key}` must be a finite number; got {v!r}.")
    if kind == "epsilon_greedy" and not 0 <= spec["epsilon"] <= 1:
        raise ValueError(f"`{where}.epsilon` must be in [0, 1]; got {spec['epsilon']}.")
    return dict(spec)


def _world(config, n_actions, residual=None):
    import simulator

    config = simulator.preset(config) if isinstance(config, str) else config
    if not isinstance(config, simulator.LinearBanditConfig):
        raise TypeError("`config` must be a LinearBanditConfig or a preset name; got "
                        f"{type(config).__name__}.")
    if not config.is_static:
        raise ValueError("`config` must be a static world (no arm lifetimes or CTR decay): "
                         "the exact value of a static policy is defined on it.")
    if n_actions is not None:
        n_actions = check_int(n_actions, "n_actions", low=1)
        config = dataclasses.replace(config, n_arms=n_actions,
                                     n_universal=min(config.n_universal, n_actions))
    if residual is not None:
        if not getattr(config, "n_embedding_features", 0):
            raise ValueError("`residual` needs a world whose arms carry embeddings "
                             "(n_embedding_features > 0, e.g. the preset 'large_actions').")
        config = dataclasses.replace(config, residual=residual)
    return config


def ope(config="bred_linear", targets: Sequence[Mapping] = DEFAULT_TARGETS, *,
        agents: Mapping[str, Callable] | None = None, estimators=DEFAULT_ESTIMATORS,
        logging: str = "uniform", beta: float = 10.0, epsilon: float = 0.2,
        n_rounds: int = 1000, n_logs: int = 100, n_actions: int | None = None,
        residual: float | None = None, reward_noise: float = 0.0, n_train: int = 2000,
        ab_users: int = 0, rng=None, progress: bool = False,
        evaluation: str = EVALUATION, on_error: Callable | None = None,
        per_log: Callable | None = None) -> list[Measurement]:
    """Estimators of static target policies scored against the exact value over many logs.

    Parameters
    ----------
    config : LinearBanditConfig or preset name, default "bred_linear"
        A static linear bandit world (binary contexts: the value of a policy is exact).
    targets : sequence of mappings
        Target policy constructors, each ``{"name": ..., "policy": "uniform" |
        "epsilon_greedy" | "softmax", "epsilon"/"beta": ...}`` (see :func:`policy_table`).
    agents : mapping name -> make_agent, optional
        More targets: bandit agents, each fitted on its own uniform log of ``n_train``
        records (``update`` on every record) and then frozen; their
        ``action_probabilities`` is the target policy.
    estimators : sequence, default ``("ips", "snips", "direct_method", "doubly_robust")``
        Names of ``evaluators`` functions and ``(name, estimator)`` pairs of your own
        (or a mapping ``name -> estimator``); ``estimator(log, action_dist, *, rng)`` gets
        ``action_dist`` of OBP's shape ``(n_rounds, n_actions, 1)`` and returns an
        ``evaluators.Estimate`` or a float.
    logging : {"uniform", "epsilon_greedy", "softmax"}
        The logging policy (with ``epsilon`` or ``beta``): uniform; the best arm with
        probability ``1 - epsilon``; or ``softmax(beta * p(x, a))`` (``beta < 0``:
        adversarial, most mass on the worst arms).
    beta, epsilon : float
        Parameters of the logging policy.
    n_rounds : int, default 1000
        Records per log.
    n_logs : int, default 100
        Independent logs per cell; every estimator and target sees the same logs.
    n_actions : int, optional
        Override the world's number of arms.
    residual : float in [0, 1], optional
        Override the world's ``residual`` (worlds whose arms carry embeddings, e.g.
        ``large_actions``): how far the reward depends on the action beyond its embedding --
        0 is MIPS's assumption, larger values break it.
    reward_noise : float >= 0, default 0
        Standard deviation of Gaussian noise added to every logged reward (the expected
        reward, hence the truth, is unchanged; the estimators' variance grows).
    n_train : int, default 2000
        Records of the uniform log each agent target is fitted on.
    ab_users : int, default 0
        Traffic budget of an online A/B test per log (variant ``ab_test``): the target
        against the logging policy on ``ab_users`` fresh users, each assigned to the target
        with probability 1/2; the estimate is the target's mean reward over its users (a
        static policy's users are i.i.d., so they are simulated as one vectorised run of the
        target, exactly as a live test would meet them). 0: no A/B test. Compare its RMSE
        with the offline estimators' on ``n_rounds`` logged records.
    rng : None, int, SeedSequence or Generator
        Root of every draw: log ``i``, estimator and target streams keyed by identity;
        the reward model of log ``i`` (its folds and resamples: one per specification,
        shared by every model-based estimator and target) from the log's own stream.
    progress : bool
        A progress bar over the logs.
    evaluation : str
        The ``evaluation`` column.
    on_error : callable ``(what, exception)``, optional
        Called when an estimator raises or returns a non-number or an infinite value on a
        log (the estimate is then ``nan`` and counts in ``nan_rate``). Default: an
        :class:`EstimatorErrorWarning`. The harness records the error in ``errors.log``.
    per_log : callable, optional
        Receives every estimator's estimate on every log as a ``Measurement`` (metric
        ``value``, ``log`` = the log's index, its interval and the exact value as
        ``truth``; ``nan`` where the estimator failed): the per-log estimates
        :func:`recloop.summarize` turns into bias, RMSE and coverage over logs.

    Returns
    -------
    list of Measurement
        Per target (``agent`` column) and estimator (``variant``), over the logs:
        ``value`` (mean estimate with its standard error over logs; ``truth`` the exact
        value), ``bias`` (mean error), ``rmse``, ``relative_rmse`` (RMSE / |value|, OBP's
        "relative estimation error"), ``coverage`` and ``width`` of the intervals when the
        estimator gives them, ``nan_rate`` (share of logs without a finite estimate).
        ``params`` holds the cell's setting (logging, beta/epsilon, n_rounds, n_actions,
        reward_noise).

    Notes
    -----
    The truth is :func:`simulator.static_policy_value` of the target: exact (a sum over
    the ``2^(d-1)`` context atoms), not estimated, so bias and RMSE carry only the Monte
    Carlo error of the ``n_logs`` logs (their standard errors are reported).

    Examples
    --------
    >>> rows = ope("bred_linear", n_rounds=200, n_logs=5, rng=0)
    >>> sorted({m.variant for m in rows})
    ['direct_method', 'doubly_robust', 'ips', 'snips']
    """
    study = _Study(config, targets, agents=agents, estimators=estimators, logging=logging,
                   beta=beta, epsilon=epsilon, n_rounds=n_rounds, n_logs=n_logs,
                   n_actions=n_actions, residual=residual, reward_noise=reward_noise,
                   n_train=n_train, ab_users=ab_users, rng=rng, evaluation=evaluation,
                   on_error=on_error)
    return finish(study.header, study.logs(0, study.n_logs, progress=progress), per_log)


class _Study:
    """One cell of :func:`ope` (its arguments, checked): the policies and their truth, then
    the estimates of any range of logs -- log ``i`` depends on ``i`` alone (its streams are
    keyed by it), so that logs ``[a, b)`` and ``[b, c)`` computed apart, in any processes,
    are logs ``[a, c)`` (the harness's chunks, :data:`CHUNKS`)."""

    def __init__(self, config, targets, *, agents, estimators, logging, beta, epsilon,
                 n_rounds, n_logs, n_actions, residual, reward_noise, n_train, ab_users, rng,
                 evaluation, on_error):
        import simulator

        config = _world(config, n_actions, residual)
        n_rounds = check_int(n_rounds, "n_rounds", low=1)
        n_logs = check_int(n_logs, "n_logs", low=1)
        n_train = check_int(n_train, "n_train", low=0)
        if isinstance(reward_noise, bool) or not isinstance(reward_noise, numbers.Real) \
                or not (math.isfinite(reward_noise) and reward_noise >= 0):
            raise ValueError(f"`reward_noise` must be a finite number >= 0; got {reward_noise!r}.")
        logging_spec = _check_policy({"policy": logging, "beta": beta, "epsilon": epsilon},
                                     "logging")
        specs = {}
        for j, t in enumerate(targets):
            t = _check_policy(t, f"targets[{j}]")
            name = t.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"`targets[{j}].name` must be a non-empty string; got {name!r}.")
            if name in specs:
                raise ValueError(f"`targets` must not repeat a name; got {name!r} twice.")
            specs[name] = t
        agents = dict(agents or {})
        clash = sorted(set(agents) & set(specs))
        if clash:
            raise ValueError(f"`agents` and `targets` must not share a name; got {clash[0]!r}.")
        if not specs and not agents:
            raise ValueError("`targets` and `agents` name no target policy; give at least one.")
        ab_users = check_int(ab_users, "ab_users", low=0)
        if ab_users == 1:
            raise ValueError("`ab_users` must be 0 (no A/B test) or >= 2; got 1.")
        builtins = {k: v.factory for k, v in registry().estimators.items()
                    if v.family == "static" and v.origin == "built-in"}
        table = estimator_table(estimators, tuple(builtins), what="estimator")
        if ab_users and "ab_test" in table:
            raise ValueError("`estimators` must not name an estimator 'ab_test' when `ab_users` "
                             "runs the A/B test of that name.")
        funcs = {name: f if f is not None else builtins[name] for name, f in table.items()}
        root = seed_sequence(rng)
        if on_error is None:
            def on_error(what, exc):
                warnings.warn(f"{what}: {type(exc).__name__}: {exc}; recorded as nan.",
                              EstimatorErrorWarning, stacklevel=3)

        # policies on the context atoms, the truth of each target
        policies = {name: policy_table(config, t) for name, t in specs.items()}
        for name, make in agents.items():
            key = name_key(name)
            policies[name] = _agent_table(config, name, make, n_train,
                                          child_rng(root, 4, key), child_rng(root, 5, key))
        truth = {name: simulator.static_policy_value(config, _lookup(config, tab))
                 for name, tab in policies.items()}
        variants = list(funcs) + (["ab_test"] if ab_users else [])
        params = {"logging": logging, "n_rounds": n_rounds, "n_actions": config.n_arms,
                  "reward_noise": float(reward_noise)}
        if ab_users:
            params["ab_users"] = ab_users
        if residual is not None:
            params["residual"] = float(residual)
        if logging == "softmax":
            params["beta"] = float(beta)
        elif logging == "epsilon_greedy":
            params["epsilon"] = float(epsilon)
        self.config, self.n_rounds, self.n_logs, self.root = config, n_rounds, n_logs, root
        self.reward_noise, self.ab_users, self.on_error = reward_noise, ab_users, on_error
        self.policies, self.funcs = policies, funcs
        self.logger = _lookup(config, policy_table(config, logging_spec))
        #: What the estimates of every log are read with (the same in every chunk).
        self.header = {"evaluation": evaluation, "targets": list(policies),
                       "variants": variants, "truth": truth, "params": params}

    def logs(self, start: int, stop: int, *, progress: bool = False) -> list[list]:
        """The estimates of logs ``start`` to ``stop - 1``: per log, one ``Estimate`` (or
        ``None``: the estimator failed) per (target, variant) of :attr:`header`, targets
        outermost."""
        funcs, config, root = self.funcs, self.config, self.root
        takes_rng = {e: _takes_rng(f) for e, f in funcs.items()}
        specs = {e: model_spec(f) for e, f in funcs.items()}
        out = []
        for i in bar(range(start, stop), desc="logs", show=progress):
            log, atoms = logged(config, self.n_rounds, self.logger, root, i, self.reward_noise)
            models = LogModels(log, root, i)
            calls = {e: f if specs[e] is None else models.bind(*specs[e])
                     for e, f in funcs.items()}
            row = []
            for t, tab in self.policies.items():
                action_dist = tab[atoms][:, :, None]
                for e, f in calls.items():
                    kw = {"rng": child_rng(root, 3, name_key(e), name_key(t), i)} \
                        if takes_rng[e] else {}
                    row.append(_safe_call(f, log, action_dist, kw, self.on_error,
                                          f"estimator {e!r} on target {t!r}, log {i}"))
                if self.ab_users:
                    row.append(_ab_arm(config, tab, self.ab_users,
                                       child_rng(root, 6, name_key(t), i)))
            out.append(row)
        return out


def finish(header: dict, values: list[list], per_log=None) -> list[Measurement]:
    """The rows of :func:`ope` from the estimates of every log in log order (``values``:
    :meth:`_Study.logs` of all the logs, or of consecutive ranges concatenated); each
    estimate goes to ``per_log`` first."""
    evaluation, params = header["evaluation"], header["params"]
    variants = header["variants"]
    rows = []
    for j, t in enumerate(header["targets"]):
        for k, e in enumerate(variants):
            col = [v[j * len(variants) + k] for v in values]
            truth = header["truth"][t]
            emit_per_log(per_log, col, truth, evaluation=evaluation, agent=t, variant=e,
                         params=params)
            rows += _summary_rows(col, truth, evaluation=evaluation, agent=t, variant=e,
                                  params=params)
    return rows


def _ab_arm(config, table, ab_users: int, rng):
    """The target's arm of an A/B test of ``ab_users`` users (each to the target with
    probability 1/2): its mean reward over its users, normal interval."""
    import simulator
    from evaluators import Estimate

    n_b = int(rng.binomial(ab_users, 0.5))
    if n_b == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0)
    log, _ = simulator.collect_log(config, n_b, policy=_lookup(config, table), rng=rng)
    r = log.reward
    m = float(r.mean())
    se = float(r.std(ddof=1) / math.sqrt(n_b)) if n_b > 1 else math.nan
    return Estimate(m, se, m - _Z * se, m + _Z * se, n_b)


def logged(config, n_rounds: int, logger, root, i: int, reward_noise: float):
    """Log ``i`` of a cell (its own keyed streams: the records, then the reward noise) and
    the atom index of each record's context."""
    import simulator

    log, _ = simulator.collect_log(config, n_rounds, policy=logger, rng=child_rng(root, 1, i))
    if reward_noise > 0:
        noise = child_rng(root, 2, i).normal(0.0, reward_noise, log.n_rounds)
        log = dataclasses.replace(log, reward=log.reward + noise)
    return log, _atom_index(config, log.context)


# -- one reward model per log ----------------------------------------------------------------

def model_spec(f):
    """``(function, keywords, specification)`` of an estimator that fits a reward model --
    one of evaluators' model-based estimators, given as itself, a ``functools.partial`` or
    the harness's bound call (both carry ``func`` and ``keywords``) -- whose model is a
    specification to fit ("ridge", "mean", a regressor); ``None`` otherwise (an array of
    predictions, an estimator of the user's own: called as they are)."""
    import inspect

    import evaluators

    shared = (evaluators.direct_method, evaluators.doubly_robust, evaluators.sndr,
              evaluators.switch_dr, evaluators.dr_os, evaluators.select_estimator)
    fn, kw = getattr(f, "func", f), dict(getattr(f, "keywords", None) or {})
    if fn not in shared or (fn is evaluators.select_estimator and kw.get("estimator", "ips")
                            not in ("doubly_robust", "switch_dr", "dr_os")):
        return None  # (SLOPE over a family without a model: nothing to fit)
    model = kw.get("model", inspect.signature(fn).parameters["model"].default)
    if not (isinstance(model, str) or callable(getattr(model, "fit", None))):
        return None
    spec = {"model": model}
    for key in ("per_action", "n_folds"):
        if kw.get(key) is not None:
            spec[key] = kw[key]
    return fn, kw, spec


class LogModels:
    """The reward models of log ``i``: one per specification, fitted when an estimator first
    asks for it, from the log's own stream (spawn key ``(7, i)`` of the root), so that every
    estimator and target evaluated on the log shares its folds, fit and resamples."""

    def __init__(self, log, root, i: int):
        self.log, self.root, self.i = log, root, i
        self.fitted: dict = {}

    def get(self, spec: dict):
        from evaluators import fit_reward_model

        model = spec["model"]
        key = (model if isinstance(model, str) else id(model), repr(spec.get("per_action")),
               repr(spec.get("n_folds")))
        if key not in self.fitted:  # a failing fit raises for every estimator that uses it
            self.fitted[key] = fit_reward_model(self.log, **spec,
                                                rng=child_rng(self.root, 7, self.i))
        return self.fitted[key]

    def bind(self, fn, kw: dict, spec: dict):
        """``call(log, action_dist, **more)``: ``fn`` with its keywords and the shared model."""
        def call(log, action_dist, **more):
            return fn(log, action_dist, **{**kw, "model": self.get(spec)}, **more)
        return call


def _takes_rng(fn) -> bool:
    import inspect

    try:
        ps = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "rng" or p.kind is p.VAR_KEYWORD for p in ps)


def _safe_call(f, log, action_dist, kw, on_error, what):
    """An estimate, or ``None`` after reporting the estimator's failure (raise, non-number,
    infinite value)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NoSupportWarning & co.: counted in nan_rate
            est = as_estimate(f(log, action_dist, **kw), what)
    except Exception as exc:  # the user's estimator may raise anything
        on_error(what, exc)
        return None
    if math.isinf(est.value):
        on_error(what, ValueError(f"returned {est.value}"))
        return None
    return est


def _summary_rows(ests, truth: float, *, evaluation, agent, variant, params):
    """value, bias, rmse, relative_rmse, coverage, width, nan_rate of one (target,
    estimator) over the logs."""
    from evaluators import wilson_estimate

    n_logs = len(ests)
    good = [e for e in ests if e is not None and math.isfinite(e.value)]
    n = len(good)
    kw = dict(evaluation=evaluation, agent=agent, variant=variant, params=params)
    nan_rate = wilson_estimate(n_logs - n, n_logs)
    rows = [Measurement(metric="nan_rate", estimate=nan_rate.value, stderr=nan_rate.stderr,
                        ci_low=nan_rate.ci_low, ci_high=nan_rate.ci_high, n=n_logs, **kw)]
    if n == 0:
        return rows + [Measurement(metric=m, estimate=math.nan, n=0, **kw)
                       for m in ("value", "bias", "rmse", "relative_rmse")]
    v = np.array([e.value for e in good])
    err = v - truth
    sq = math.sqrt
    se_v = float(v.std(ddof=1) / sq(n)) if n > 1 else math.nan
    mean_v = float(v.mean())
    rmse = sq(float(np.mean(err ** 2)))
    se_rmse = (float(np.std(err ** 2, ddof=1)) / sq(n) / (2 * rmse)
               if n > 1 and rmse > 0 else math.nan)
    bias = float(err.mean())
    rel = rmse / abs(truth) if truth != 0 else math.nan
    rows += [
        Measurement(metric="value", estimate=mean_v, stderr=se_v, ci_low=mean_v - _Z * se_v,
                    ci_high=mean_v + _Z * se_v, truth=truth, n=n, **kw),
        # errors already: no truth column (the report would show an error of an error)
        Measurement(metric="bias", estimate=bias, stderr=se_v, ci_low=bias - _Z * se_v,
                    ci_high=bias + _Z * se_v, n=n, **kw),
        Measurement(metric="rmse", estimate=rmse, stderr=se_rmse, n=n, **kw),
        Measurement(metric="relative_rmse", estimate=rel,
                    stderr=se_rmse / abs(truth) if truth != 0 else math.nan, n=n, **kw),
    ]
    lo = np.array([e.ci_low for e in good])
    hi = np.array([e.ci_high for e in good])
    has_ci = np.isfinite(lo) & np.isfinite(hi)
    if has_ci.any():
        m = int(has_ci.sum())
        cov = wilson_estimate(int(np.sum((lo <= truth) & (truth <= hi) & has_ci)), m)
        width = (hi - lo)[has_ci]
        se_w = float(width.std(ddof=1) / sq(m)) if m > 1 else math.nan
        rows += [Measurement(metric="coverage", estimate=cov.value, stderr=cov.stderr,
                             ci_low=cov.ci_low, ci_high=cov.ci_high, n=m, **kw),
                 Measurement(metric="width", estimate=float(width.mean()), stderr=se_w, n=m,
                             **kw)]
    return rows


# -- report: the leaderboard and a figure ----------------------------------------------------

def _setting(params: Mapping) -> str:
    return ", ".join(f"{k} = {params[k]}" for k in sorted(params))


def _paired(a: dict, b: dict) -> tuple[float, float, int]:
    """Mean and standard error of the difference of squared errors of two estimators over
    the logs both estimated (``a``, ``b``: log -> (estimate, truth))."""
    both = [k for k in a if k in b and math.isfinite(a[k][0]) and math.isfinite(b[k][0])]
    d = [(a[k][0] - a[k][1]) ** 2 - (b[k][0] - b[k][1]) ** 2 for k in both]
    n = len(d)
    if n < 2:
        return (d[0] if d else math.nan), math.nan, n
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    return mean, sd / math.sqrt(n), n


def _rmse_se(errors: dict, rmse: float) -> float:
    """Standard error of an RMSE over the logs (delta method: the standard error of the
    mean squared error over 2 RMSE)."""
    sq = [(e - t) ** 2 for e, t in errors.values() if math.isfinite(e)]
    n = len(sq)
    if n < 2 or not rmse > 0:
        return math.nan
    mean = sum(sq) / n
    return math.sqrt(sum((x - mean) ** 2 for x in sq) / (n - 1)) / math.sqrt(n) / (2 * rmse)


def ranks(rows, per_log: dict) -> list[tuple[str, list]]:
    """``rows`` (one setting and target) ranked by RMSE, with shared ranks: ``[(rank,
    [names tied with it]), ...]`` in the order of ``rows`` sorted by RMSE. The best
    estimator not yet ranked leads a rank; every other one a paired comparison over the
    same logs cannot separate from it (the difference of their squared errors within
    1.96 standard errors of 0) shares it."""
    ranked = sorted(rows, key=lambda r: (math.isnan(r.rmse), r.rmse))
    out: dict = {}
    position = 0
    for r in ranked:
        position += 1
        if r.variant in out:
            continue
        out[r.variant] = (str(position), [])
        for other in ranked:
            if other.variant in out or math.isnan(other.rmse):
                continue
            mean, se, n = _paired(per_log.get(r.variant, {}), per_log.get(other.variant, {}))
            if n and (not math.isfinite(se) or abs(mean) <= _Z * se):
                out[other.variant] = (str(position), [r.variant])
                out[r.variant][1].append(other.variant)
    return [out[r.variant] for r in ranked]


def leaderboard(summary, estimates=()) -> list:
    """Per setting and target, the estimators ranked by RMSE against the exact value over
    the logs (± its standard error over the logs), with bias, relative RMSE, coverage, nan
    rate and the number of logs -- from the :func:`recloop.summarize` rows of the per-log
    estimates (the logs of every seed pooled), the numbers of every other summary of the
    run. Ranks are shared where a paired comparison over the same logs cannot separate two
    estimators (:func:`ranks`), and a note says so in words. Blocks of
    :mod:`recloop._document`."""
    import json

    from recloop import _document as D

    acc: dict = {}
    for s in summary:
        if s.metric != "value":
            continue
        setting = json.dumps(dict(s.params), sort_keys=True)
        acc.setdefault((s.evaluation, setting, s.agent), []).append(s)
    per_log: dict = {}
    for e in estimates:
        if e["metric"] != "value":
            continue
        key = (e["evaluation"], json.dumps(dict(e["params"] or {}), sort_keys=True),
               e["agent"])
        per_log.setdefault(key, {}).setdefault(e["variant"], {})[e["seed"], e["log"]] = (
            e["estimate"], e["truth"])
    out: list = []
    for (evaluation, setting, target), rows in acc.items():
        logs = per_log.get((evaluation, setting, target), {})
        ranked = sorted(rows, key=lambda r: (math.isnan(r.rmse), r.rmse))
        places = ranks(rows, logs) if logs else [(str(j), []) for j in
                                                 range(1, len(ranked) + 1)]

        def f(x, digits=3):
            return "" if math.isnan(x) else f"{x:.{digits}g}"

        cells = []
        for r, (rank, tied) in zip(ranked, places, strict=True):
            se = _rmse_se(logs.get(r.variant, {}), r.rmse)
            cells.append([rank + (" (tied)" if tied else ""), D.Code(r.variant),
                          f(r.rmse) + (f" ± {f(se, 2)}" if math.isfinite(se) else ""),
                          f(r.bias), f(r.relative_rmse), f(r.coverage), f(r.nan_rate),
                          str(r.n_logs)])
        where = _setting(json.loads(setting))
        out += [D.Paragraph(D.Strong(f"{evaluation}, target"), " ", D.Code(target),
                            f" ({where})" if where else ""),
                D.Table(("rank", "estimator", "RMSE ± se", "bias", "relative RMSE",
                         "coverage", "nan rate", "logs"), cells)]
        groups = [(rank, [r.variant for r, (k, _) in zip(ranked, places, strict=True)
                          if k == rank]) for rank in dict.fromkeys(k for k, _ in places)]
        ties = [(rank, names) for rank, names in groups if len(names) > 1]
        n = max((r.n for r in ranked), default=0)
        if not logs:
            continue
        if ties:
            out.append(D.Note(f"{evaluation}, target ", D.Code(target),
                              f" ({where})" if where else "", ": ", *[
                                  p for j, (rank, names) in enumerate(ties) for p in (
                                      ["; " if j else ""] + _and([D.Code(x) for x in names])
                                      + [f" are tied for rank {rank}"])],
                              f" -- a paired comparison of their squared errors over the "
                              f"same {n} logs cannot separate them."))
        else:
            out.append(D.Paragraph(f"No two estimators are tied: paired comparisons over "
                                   f"the same {n} logs separate every rank."))
    return out


def _and(parts: list) -> list:
    """``a``, ``b`` and ``c``."""
    out: list = []
    for j, p in enumerate(parts):
        out += ([" and " if j == len(parts) - 1 else ", "] if j else []) + [p]
    return out


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: Parameters a figure may put on its x axis, in order of preference (log scale for all).
_X_AXES = ("n_rounds", "n_actions", "ab_users", "reward_noise", "residual")


def _logging_text(params: Mapping) -> str:
    """The logging policy of a row's parameters: ``softmax, beta = -10``."""
    policy = params.get("logging")
    if policy is None:
        return ""
    knob = {"softmax": "beta", "epsilon_greedy": "epsilon"}.get(policy)
    return policy + (f", {knob} = {params[knob]:g}" if knob in params else "")


#: Panels of one figure of :func:`plot_ope` at most (target x setting): more, a figure per
#: setting.
_MAX_PANELS = 4


def plot_ope(rows, out_dir, *, prefix: str = EVALUATION) -> list:
    """RMSE per estimator against the swept parameter (``n_rounds``, else ``n_actions``, ...:
    the first of :data:`_X_AXES` that takes several values), log-log, with 95% intervals of
    the RMSE: a panel per target and setting of the other swept parameters (one figure when
    they make at most four panels, else one figure per setting, :func:`recloop._plots.groups`)
    and a shared legend; the swept values ticked; a dot plot per estimator where a single
    value was swept -- a size each data set fixes is such a value, never a point on an axis
    shared with the other data sets. The caption names the logging policy. The first figure
    is the kind's figure of record. Bars: 95% intervals of the RMSE (its delta-method
    standard error over the logs)."""
    from pathlib import Path

    from recloop import _plots

    rmse = [r for r in rows if r.metric == "rmse" and math.isfinite(r.estimate)]
    seen: dict = {}
    for r in rmse:
        for k, v in r.params.items():
            seen.setdefault(k, set()).add(v)
    x_key = next((k for k in _X_AXES if len(seen.get(k, ())) > 1),
                 next((k for k in _X_AXES if k in seen), None))
    if x_key is None:
        return []
    estimators = list(dict.fromkeys(r.variant for r in rmse))
    settings = _plots.groups(rmse, x_key)
    panels = [(setting, t, [r for r in sel if r.agent == t]) for setting, sel in settings
              for t in dict.fromkeys(r.agent for r in sel)]
    if len(panels) <= _MAX_PANELS:
        figures = [panels]
    else:
        figures = [[p for p in panels if p[0] is setting] for setting, _ in settings]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for j, mine in enumerate(figures):
        ncols = 2 if len(mine) == 4 else min(3, len(mine))
        nrows = math.ceil(len(mine) / ncols)
        n_est = max(len({r.variant for r in rs}) for _, _, rs in mine)
        single = all(len({r.params[x_key] for r in rs}) == 1 for _, _, rs in mine)
        shared = len(figures) == 1 and len(settings) > 1
        fig, axes = _plots.figure(nrows, ncols, width=_plots.RECORD_WIDTH,
                                  height=nrows * ((0.28 * n_est + 1.1) if single else 2.5)
                                  + 1.3)
        for ax, (setting, t, rs) in zip(axes.flat, mine, strict=False):
            lines = []
            for e in estimators:
                pts = sorted((r for r in rs if r.variant == e), key=lambda r: r.params[x_key])
                if pts:
                    lines.append(_plots.Series(e, [r.params[x_key] for r in pts],
                                               [r.estimate for r in pts],
                                               [1.96 * r.stderr for r in pts],
                                               j=estimators.index(e)))
            mode = _plots.series_plot(ax, lines, x_label=x_key, y_label="RMSE", log_y=True,
                                      dot_label="RMSE (95% interval)")
            where = [f"target {t}"] + ([_plots.setting_text(setting)] if shared and setting
                                       else [])
            if mode == "dots" and lines:
                where.append(f"{x_key} = {_plots.number(lines[0].x[0])}")
            ax.set_title(", ".join(where[:1]) + ("\n" + ", ".join(where[1:]) if where[1:]
                                                 else ""), fontsize=8)
            ax.tick_params(labelsize=7)
            ax.xaxis.label.set_size(8)
            ax.yaxis.label.set_size(8)
            for line in ax.get_lines():
                line.set_markersize(line.get_markersize() * 0.7)
        for ax in list(axes.flat)[len(mine):]:
            ax.set_visible(False)
        rows_of = [[t.get_text() for t in ax.get_yticklabels()] for ax in axes.flat[:len(mine)]]
        if single and all(r == rows_of[0] for r in rows_of):
            for ax in axes[:, 1:].flat:  # the same estimators in every panel: named once
                ax.tick_params(labelleft=False)
        _plots.legend(fig)
        n_logs = sorted({r.n for _, _, rs in mine for r in rs if r.n})
        logs = f"{n_logs[-1]:,}" if len(n_logs) == 1 else (
            f"{n_logs[0]:,}-{n_logs[-1]:,}" if n_logs else "?")
        setting = mine[0][0] if not shared else {}
        logging = _logging_text(mine[0][2][0].params) if mine[0][2] else ""
        head = f"{prefix}: RMSE against the exact value" + (
            f" by {x_key}" if not single else "")
        where = ", ".join(x for x in (f"logging {logging}" if logging else "",
                                      _plots.setting_text(setting)) if x)
        _plots.caption(fig, head + (f" ({where})" if where else ""),
                       f"RMSE over {logs} logs per point; bars: 95% intervals (±1.96 standard "
                       "errors of the RMSE over the logs).")
        paths.append(_plots.save(fig, out_dir / f"{prefix}_rmse_{j}.png", dpi=100))
    return paths


# -- the scenario kind ------------------------------------------------------------------------

_POLICY_KEYS = {"uniform": (), "epsilon_greedy": ("epsilon",), "softmax": ("beta",)}


def _check_kind(params, agents, world):
    """Cross-key rules: a static linear bandit world; well-formed target tables; names
    distinct from the agents'."""
    from recloop._worlds import world_config

    if world:
        config = world_config(world)
        if not hasattr(config, "n_arms") or not getattr(config, "is_static", False):
            yield "kind", (f"expected a [world] with a static linear bandit preset (e.g. "
                           f"bred_linear) for ope, got preset {world['preset']!r}")
        elif (params.get("n_actions") or 0) > config.n_arms:
            yield "n_actions", (f"expected at most the world's n_arms = {config.n_arms} (an "
                                f"evaluation uses the world's arms or fewer: raise "
                                f"world.n_arms for more), got {params['n_actions']}")
    names = {a["name"] for a in agents}
    seen = set()
    for j, t in enumerate(params["targets"]):
        where = f"targets[{j}]"
        policy = t.get("policy")
        if policy not in _POLICY_KEYS:
            yield f"{where}.policy", (f"expected one of {', '.join(map(repr, _POLICY_KEYS))}, "
                                      f"got {policy!r}")
            continue
        allowed = {"name", "policy", *_POLICY_KEYS[policy]}
        for key in t:
            if key not in allowed:
                yield f"{where}.{key}", (f"expected one of the keys {', '.join(sorted(allowed))}"
                                         f", got unknown key {key!r}")
        for key in _POLICY_KEYS[policy]:
            problem = (Float(low=0.0, high=1.0) if key == "epsilon" else Float()).check(
                t.get(key))
            if problem:
                yield f"{where}.{key}", problem
        name = t.get("name")
        problem = Str(pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}",
                      pattern_text="a name of letters, digits, '_', '-', '.'").check(name)
        if problem:
            yield f"{where}.name", problem
        elif name in seen or name in names:
            yield f"{where}.name", (f"expected a name not used by another target or agent, "
                                    f"got {name!r} again")
        seen.add(name)
    if not params["targets"] and not agents:
        yield "targets", "expected at least one target policy (targets or agents), got none"
    from recloop._limits import ab_test_rules

    yield from ab_test_rules(params, agents, world)


def _resources(params, world):
    """Per log: the contexts and, per target policy, its action distribution
    ``(n_rounds, n_actions)``; the estimators' copies of it."""
    from recloop._limits import ESTIMATE_BYTES, F8, bandit_sizes, log_bytes, traffic_bytes

    K, d = bandit_sizes(world)
    K = params.get("n_actions") or K
    n = params["n_rounds"]
    targets = len(params.get("targets") or ()) + 4
    estimators = len(params.get("estimators") or ()) + 1
    return {"n_rounds x world.dim: one log": log_bytes(n, K, d),
            "n_rounds x n_actions: the log's availability, pi_b and true CTRs": 3 * n * K * F8,
            "n_rounds x n_actions x targets: action distributions": 3 * targets * n * K * F8,
            "n_logs x targets x estimators: the estimates of every log": (
                params.get("n_logs", 1) * targets * estimators * ESTIMATE_BYTES),
            **traffic_bytes(params, world)}


def _chunk(cell, start: int, stop: int):
    """Logs ``[start, stop)`` of a cell: ``(header, estimates)`` (:class:`_Study`)."""
    from recloop._worlds import world_config

    p = dict(cell.params)
    p["estimators"] = cell.estimators(p["estimators"], "static")
    makers = {name: cell.make_agent(name) for name in cell.agent_names}
    study = _Study(**bound_arguments(ope, world_config(cell.world), p.pop("targets"),
                                     agents=makers, **p, rng=cell.seed_sequence,
                                     evaluation=cell.evaluation, on_error=cell.report_error))
    return study.header, study.logs(start, stop, progress=cell.progress)


def _merge(cell, parts):
    """The cell's rows from its chunks' ``(header, estimates)`` in log order."""
    header = same_header(parts)
    return finish(header, [v for _, values in parts for v in values], cell.per_log)


def _cost(cell) -> float:
    """Estimated seconds of one log: records x (arms + context features: what a record
    costs the estimators and the reward model) x targets x (estimators + the A/B test), at
    :data:`SECONDS_PER_RECORD_CALL`."""
    from recloop._limits import bandit_sizes

    p = cell.params
    K, d = bandit_sizes(cell.world)
    targets = len(p.get("targets") or ()) + len(cell.agents)
    calls = len(p.get("estimators") or ()) + (1 if p.get("ab_users") else 0)
    return SECONDS_PER_RECORD_CALL * p["n_rounds"] * ((p.get("n_actions") or K) + d) \
        * max(1, targets) * max(1, calls)


CHUNKS = Chunks(n_logs=lambda cell: cell.params["n_logs"], cost=_cost, run=_chunk,
                merge=_merge)


def _figures_kind(measurements, out_dir, world):
    prefix = measurements[0].evaluation if measurements else EVALUATION
    return plot_ope(measurements, out_dir, prefix=prefix)


KIND = EvaluationKind(
    name="ope",
    summary="Off-policy estimators (recloop's and your own) of static target policies on "
            "logs of a static linear bandit world, against the exact policy value: per "
            "target (the `agent` column) and estimator (`variant`), over `n_logs` logs, "
            "metrics value, bias, rmse, relative_rmse, coverage and width of the intervals, "
            "nan_rate; the report ranks the estimators by RMSE per setting.",
    run=CHUNKS.whole,
    chunks=CHUNKS,
    params=(
        Param("targets", ListOf(Table(), min_len=0), [dict(t) for t in DEFAULT_TARGETS],
              "Target policy constructors: tables `{name, policy = \"uniform\" | "
              "\"epsilon_greedy\" | \"softmax\", epsilon or beta}` (softmax of beta x the "
              "true CTR; epsilon-greedy around the best arm). The evaluation's agents are "
              "targets too, fitted on `n_train` uniform records, then frozen.",
              sweepable=False),
        Param("estimators", EstimatorList("static"), list(DEFAULT_ESTIMATORS),
              "Estimators compared: names (`ips`, `snips`, `direct_method`, "
              "`doubly_robust`, plugins), import paths `\"package.module:attribute\"` of "
              "your own `estimator(log, action_dist, *, rng)`, or tables `{name, factory, "
              "params}`.", sweepable=False),
        Param("logging", Str(choices=LOGGING_POLICIES), "uniform", "Logging policy."),
        Param("beta", Float(), 10.0, "Inverse temperature of the softmax logging policy "
              "(negative: adversarial, most mass on the worst arms)."),
        Param("epsilon", Float(low=0.0, high=1.0), 0.2, "Exploration of the epsilon-greedy "
              "logging policy."),
        Param("n_rounds", Int(low=1, high=10**7), 1000, "Records per log."),
        Param("n_logs", Int(low=1, high=100_000), 100, "Independent logs per cell."),
        Param("n_actions", Int(low=1, high=10_000), None, "Number of arms, at most the "
              "world's `n_arms` (the world drawn again with that many; default: the world's "
              "`n_arms`)."),
        Param("residual", Float(low=0.0, high=1.0), None, "Worlds whose arms carry "
              "embeddings (`large_actions`): the arms' own reward residual beyond their "
              "embedding (0: MIPS's assumption holds; default: the world's)."),
        Param("reward_noise", Float(low=0.0), 0.0, "Standard deviation of Gaussian noise "
              "added to each logged reward (the truth is unchanged)."),
        Param("n_train", Int(low=0, high=10**7), 2000, "Uniform records each agent target "
              "is fitted on before it is frozen."),
        Param("ab_users", Int(low=0, high=10**7), 0, "Traffic budget of an online A/B test "
              "per log (variant `ab_test`): the target against the logging policy, half the "
              "users each; its estimate is the target's mean reward. 0: none."),
    ),
    per_agent=False,
    agent_family="bandit",
    needs_world=True,
    min_agents=0,
    check=_check_kind,
    figures=_figures_kind,
    resources=_resources,
    headline=("value",),
    unit="log",
    report=lambda rows, scenario, summary, estimates=(): [
        "Estimators ranked by RMSE against the exact value over the logs (the logs of every "
        "seed pooled; ± its standard error over the logs), per setting and target; a rank is "
        "shared where a paired comparison over the same logs cannot separate two "
        "estimators; coverage is blank for estimators without intervals.", ""]
    + leaderboard(summary, estimates),
    function=ope,
)

#: The kinds this module declares (the registry reads them: recloop._registry.BUILTIN_MODULES).
KINDS = (KIND,)
