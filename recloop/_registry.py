"""What a scenario may ask for: evaluation kinds and agent kinds, each with a parameter schema.

One mechanism serves validation, execution and documentation: ``EVALUATIONS`` and ``AGENTS``
map a ``kind`` name to a :class:`Kind` -- the callable that does the work (named as
``"module:function"`` and imported only when a cell runs, so nothing heavy happens at import
time) and the :class:`Param` list that the scenario loader validates against and that
``scenarios/README.md`` documents.

An evaluation callable is called once per cell as ``func(cell)`` where ``cell`` is a
:class:`recloop._runner.CellContext` (parameters, agents, world section, seed sequence) and
returns a list of ``recloop._results.Measurement``. An agent kind's callable is the agent's
constructor: it takes the agent's parameters as keyword arguments, and
``CellContext.make_agent(name)`` wraps it into a factory ``factory(rng) -> agent`` (constructed,
then ``reset(rng)``), so that an experiment can build as many independent copies as it needs.
Recommender kinds that need the world's data (``constant_agreeing``, ``constant_disagreeing``)
are built by the experiment itself.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = [
    "AGENTS", "EVALUATIONS", "REQUIRED", "Bool", "FilePath", "Float", "Int", "Kind", "ListOf", "OneOf",
    "Param", "Str", "Table",
]


class _Required:
    def __repr__(self):
        return "REQUIRED"


#: Marks a parameter without a default.
REQUIRED = _Required()


def _fmt(value) -> str:
    """How a received value is shown in an error message (type and value, shortened)."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


# --- the small type language of scenario values ------------------------------------------
# Each type can describe itself ("an integer >= 1") and check a value, returning None when
# the value is fine or "expected ..., got ..." otherwise.


@dataclass(frozen=True)
class Int:
    low: int | None = None
    high: int | None = None

    def describe(self) -> str:
        return "an integer" + _range_text(self.low, self.high, False, False)

    def check(self, value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected {self.describe()}, got {_fmt(value)}"
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return f"expected {self.describe()}, got {value}"
        return None


@dataclass(frozen=True)
class Float:
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def describe(self) -> str:
        return "a number" + _range_text(self.low, self.high, self.low_open, self.high_open)

    def check(self, value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"expected {self.describe()}, got {_fmt(value)}"
        v = float(value)
        bad = not math.isfinite(v)
        if self.low is not None:
            bad |= v <= self.low if self.low_open else v < self.low
        if self.high is not None:
            bad |= v >= self.high if self.high_open else v > self.high
        return f"expected {self.describe()}, got {value!r}" if bad else None


def _range_text(low, high, low_open, high_open) -> str:
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {low}"
    if high is not None:
        return f" {'<' if high_open else '<='} {high}"
    return ""


@dataclass(frozen=True)
class Bool:
    def describe(self) -> str:
        return "true or false"

    def check(self, value) -> str | None:
        return None if isinstance(value, bool) else f"expected {self.describe()}, got {_fmt(value)}"


@dataclass(frozen=True)
class Str:
    choices: tuple[str, ...] | None = None
    pattern: str | None = None
    pattern_text: str = ""

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        return self.pattern_text or "a string"

    def check(self, value) -> str | None:
        if not isinstance(value, str):
            return f"expected {self.describe()}, got {_fmt(value)}"
        if self.choices is not None and value not in self.choices:
            import difflib

            close = difflib.get_close_matches(value, self.choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"expected {self.describe()}{hint}, got {value!r}"
        if self.pattern is not None:
            import re

            if not re.fullmatch(self.pattern, value):
                return f"expected {self.describe()}, got {value!r}"
        return None


@dataclass(frozen=True)
class OneOf:
    options: tuple[Any, ...]

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)

    def check(self, value) -> str | None:
        if any(o.check(value) is None for o in self.options):
            return None
        return f"expected {self.describe()}, got {_fmt(value)}"


@dataclass(frozen=True)
class ListOf:
    item: Any
    min_len: int = 1
    max_len: int | None = None
    unique: bool = False

    def describe(self) -> str:
        size = f"at least {self.min_len}" if self.min_len else "any number of"
        if self.max_len is not None:
            size = (f"exactly {self.min_len}" if self.min_len == self.max_len
                    else f"{self.min_len} to {self.max_len}")
        return f"a list of {size} ({self.item.describe()})"

    def check(self, value) -> str | None:
        if not isinstance(value, list):
            return f"expected {self.describe()}, got {_fmt(value)}"
        if len(value) < self.min_len or (self.max_len is not None and len(value) > self.max_len):
            return f"expected {self.describe()}, got a list of {len(value)}"
        for j, v in enumerate(value):
            problem = self.item.check(v)
            if problem is not None:
                return f"[{j}]: {problem}"
        if self.unique:
            seen = [repr(v) for v in value]
            if len(set(seen)) != len(seen):
                return f"expected {self.describe()} without repeats, got {value!r}"
        return None


@dataclass(frozen=True)
class FilePath:
    """A path to an existing file, relative to the scenario file's folder (stored absolute)."""

    def describe(self) -> str:
        return "a path to an existing file (relative to the scenario file)"

    def check(self, value) -> str | None:
        if not isinstance(value, str) or not value or "\0" in value:
            return f"expected {self.describe()}, got {_fmt(value)}"
        return None


@dataclass(frozen=True)
class Table:
    """A free-form table whose keys are validated elsewhere (e.g. world overrides)."""

    def describe(self) -> str:
        return "a table"

    def check(self, value) -> str | None:
        return None if isinstance(value, dict) else f"expected {self.describe()}, got {_fmt(value)}"


@dataclass(frozen=True)
class Param:
    """One key of a scenario table: its type, default (``REQUIRED`` if none) and meaning."""

    name: str
    type: Any
    default: Any = REQUIRED
    doc: str = ""
    sweepable: bool = True

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class Kind:
    """A named capability: the callable behind it and the parameters a scenario may set.

    ``target`` is ``"module:function"``. For evaluations, ``per_agent`` says whether cells
    are split by agent (each agent its own cell) or whether one cell runs all the
    evaluation's agents together on one world (so they can be compared on the same draws);
    ``agent_family`` is the family of agent the evaluation accepts (``"bandit"``,
    ``"recommender"``, ``"test"``) and ``needs_world`` whether the scenario must have a
    ``[world]`` section.
    """

    name: str
    target: str
    summary: str
    params: tuple[Param, ...] = ()
    per_agent: bool = True
    agent_family: str = "bandit"
    needs_world: bool = False
    min_agents: int = 1
    family: str = ""  # for agent kinds
    check: str = ""  # "module:function" (params, agents, world) -> [(key, msg)]: cross-key rules
    figures: str = ""  # "module:function" (measurements, out_dir, world) -> [png paths]
    figures_only: bool = True  # the kind's figures replace the report's generic ones

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def load(self, target: str | None = None) -> Callable:
        module, _, attr = (target or self.target).partition(":")
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj


# --- the registries -------------------------------------------------------------------------

_POSITIVE_INT = Int(low=1)

EVALUATIONS: dict[str, Kind] = {}
AGENTS: dict[str, Kind] = {}


def _register(table: dict[str, Kind], kind: Kind) -> None:
    if kind.name in table:
        raise ValueError(f"kind {kind.name!r} registered twice")
    table[kind.name] = kind


# A self-contained evaluation that exercises the harness without the simulator: each agent
# picks an arm of a Bernoulli bandit whose means come from the cell's seed; the estimate is
# the Monte-Carlo mean of n pulls, the truth is the arm's mean.
_register(EVALUATIONS, Kind(
    name="selfcheck",
    target="recloop._selfcheck:run_selfcheck",
    summary="Harness self-check: Monte-Carlo mean of n pulls of each agent's arm against the "
            "arm's true Bernoulli rate (no simulator needed).",
    params=(
        Param("n_arms", Int(low=1, high=1000), 5, "Number of Bernoulli arms (means drawn "
              "uniformly in [0, 1] from the cell's seed)."),
        Param("n", Int(low=1, high=10_000_000), 100, "Pulls per estimate."),
        Param("ticks", Int(low=1, high=1000), 1, "Repeated estimates per cell, reported on "
              "the tick column (fresh pulls each tick)."),
        Param("delay", Float(low=0.0, high=60.0), 0.0, "Seconds each cell sleeps before it "
              "returns (to test interruption and resume)."),
    ),
    per_agent=True,
    agent_family="test",
    check="recloop._registry:check_selfcheck",
))


def check_selfcheck(params, agents, world):
    """Cross-key rule of ``selfcheck``: every agent's arm exists.

    (Cross-key rules live here, not beside the experiments, so that validating a scenario
    does not import the experiments and everything they need.)
    """
    for a in agents:
        if a.get("arm", 0) >= params["n_arms"]:
            yield "agents", (f"expected agents whose arm is < n_arms = {params['n_arms']}, got "
                             f"agent {a['name']!r} with arm = {a['arm']}")

_register(AGENTS, Kind(
    name="fixed_arm",
    target="recloop._selfcheck:FixedArm",
    summary="Always plays the same arm (the selfcheck evaluation's agent).",
    params=(Param("arm", Int(low=0), 0, "Index of the arm played (must be < n_arms)."),),
    family="test",
))


# --- agents from the `agents` package ----------------------------------------------------------

_ALPHA = Float(low=0.0)
for _name, _target, _summary, _params in (
    ("uniform_random", "agents:UniformRandom", "Uniform random choice among available arms "
     "(the usual logging policy; exact action probabilities).", ()),
    ("ucb1", "agents:UCB1", "UCB1: mean + alpha * sqrt(2 ln t / n_a); every arm once first.",
     (Param("alpha", _ALPHA, 1.0, "Exploration weight."),)),
    ("linucb", "agents:LinUCB", "LinUCB, disjoint model (Li et al. 2010): per-arm ridge "
     "regression, upper confidence bound with width alpha.",
     (Param("alpha", _ALPHA, 1.0, "Exploration weight."),
      Param("ridge", Float(low=0.0, low_open=True), 1.0, "Ridge penalty of each arm's model."))),
    ("epsilon_greedy", "agents:EpsilonGreedy", "Best empirical mean, a uniform arm with "
     "probability epsilon.", (Param("epsilon", Float(low=0.0, high=1.0), 0.1,
                                    "Exploration probability."),)),
    ("thompson_sampling", "agents:ThompsonSampling", "Beta-Bernoulli Thompson sampling.",
     (Param("a0", Float(low=0.0, low_open=True), 1.0, "Prior Beta(a0, b0): a0."),
      Param("b0", Float(low=0.0, low_open=True), 1.0, "Prior Beta(a0, b0): b0."))),
):
    _register(AGENTS, Kind(name=_name, target=_target, summary=_summary, params=_params,
                           family="bandit"))

for _name, _target, _summary, _params in (
    ("constant", "agents:Constant", "Always recommends the same list of items.",
     (Param("items", ListOf(Int(low=0), unique=True), REQUIRED, "The recommended items, in "
            "rank order."),)),
    ("constant_agreeing", "agents:Constant.agreeing", "g1 of de Myttenaere et al.: the k "
     "items most pushed by the campaigns in the evaluation window (built by the evaluation "
     "from the world; k is the evaluation's).", ()),
    ("constant_disagreeing", "agents:Constant.disagreeing", "g2: the k most frequent items at "
     "the window's first tick among items never pushed (built by the evaluation).", ()),
    ("popularity", "agents:Popularity", "The most popular items the profile does not hold.",
     ()),
    ("user_cosine_cf", "agents:UserCosineCF", "User-based CF on binary profiles: score_i = "
     "sum_v cos(B_u, B_v) B_vi.", ()),
    ("naive_cf", "agents:NaiveCF", "Item co-occurrence CF: score_i = max_j #(U_i & U_j) / "
     "#U_j over the profile's items j.", ()),
):
    _register(AGENTS, Kind(name=_name, target=_target, summary=_summary, params=_params,
                           family="recommender"))

# --- evaluations from recloop.experiments --------------------------------------------------------

_P_VALUE = OneOf((Int(low=0), Str(choices=("all",))))

_register(EVALUATIONS, Kind(
    name="campaign_bias",
    target="recloop._registry:run_campaign_bias",
    summary="Offline LOO score of recommenders over a window of ticks -- unweighted, with "
            "item weights fitted on p items (`weighted_p{p}`), and on the counterfactual twin "
            "without campaigns (`twin`, the truth) -- de Myttenaere et al. 2014/2015.",
    params=(
        Param("ticks", ListOf(Int(low=0), unique=True), REQUIRED, "Evaluation ticks; the "
              "first is the reference of the item weights (must be < the world's n_ticks)."),
        Param("p_values", ListOf(_P_VALUE, min_len=0, unique=True), [0, 5, 20, "all"],
              "Numbers of reweighted items (`\"all\"`: every item)."),
        Param("k", Int(low=1, high=10_000), 5, "Length of the recommended lists "
              "(metric `loo_hit@{k}`)."),
        Param("n_samples", Int(low=0, high=10**8), 20_000, "Draws of the stochastic "
              "evaluation (metric `loo_hit@{k}_sampled`); 0 skips it."),
    ),
    per_agent=False,
    agent_family="recommender",
    needs_world=True,
    check="recloop._registry:check_campaign_bias",
    figures="recloop._registry:figures_campaign_bias",
))


def figures_campaign_bias(measurements, out_dir, world):
    """The paper-like figures of ``campaign_bias`` (score over time per p; pushed marginals)."""
    from recloop.experiments._campaign_bias import plot_campaign_bias

    starts = [c["start"] for c in (world or {}).get("campaigns", [])]
    prefix = measurements[0].evaluation if measurements else "campaign_bias"
    return plot_campaign_bias(measurements, out_dir, campaign_ticks=starts, prefix=prefix)


def check_campaign_bias(params, agents, world):
    """Cross-key rules of ``campaign_bias``: a recommendation world, ticks inside it."""
    from recloop._scenario import world_config

    if not world:
        return
    config = world_config(world)
    n_ticks = getattr(config, "n_ticks", None)
    if n_ticks is None or not hasattr(config, "campaigns"):
        yield "kind", (f"expected a [world] with a recommendation preset (users, items, "
                       f"campaigns), got preset {world['preset']!r}")
        return
    late = [t for t in params["ticks"] if t >= n_ticks]
    if late:
        yield "ticks", f"expected ticks < n_ticks = {n_ticks} of the world, got {late[0]}"
    for a in agents:
        if a.get("kind") == "constant" and any(i >= config.n_items for i in a.get("items", ())):
            yield "agents", (f"expected constant agents whose items are < n_items = "
                             f"{config.n_items}, got agent {a['name']!r}")


def run_campaign_bias(cell):
    """Adapter: one cell of ``campaign_bias`` (all its recommenders on one world)."""
    from recloop._scenario import world_config
    from recloop.experiments._campaign_bias import campaign_bias

    recommenders = {}
    for name in cell.agent_names:
        kind = next(a["kind"] for a in cell.agents if a["name"] == name)
        recommenders[name] = cell.make_agent(name)(None) if kind == "constant" else kind
    p = cell.params
    return campaign_bias(
        world_config(cell.world), recommenders=recommenders, ticks=p["ticks"],
        p_values=[None if v == "all" else v for v in p["p_values"]], k=p["k"],
        n_samples=p["n_samples"] or None, rng=cell.seed_sequence, progress=cell.progress,
        evaluation=cell.evaluation)


def _bandit_config_check(params, world, *, what: str):
    """Shared rules of the bandit kinds: a LinearBandit world, T within its horizon."""
    from recloop._scenario import world_config

    if not world:
        return
    config = world_config(world)
    if not hasattr(config, "n_arms") or not hasattr(config, "horizon"):
        yield "kind", (f"expected a [world] with a linear bandit preset (bred_linear, "
                       f"dynamic_news) for {what}, got preset {world['preset']!r}")
        return
    if config.horizon is not None and params["T"] > config.horizon:
        yield "T", f"expected T <= {config.horizon} (the world's horizon), got {params['T']}"


def _bandit_makers(cell) -> dict:
    return {name: cell.make_agent(name) for name in cell.agent_names}


_BANDIT_COMMON = (
    Param("n_logs", Int(low=1, high=100_000), 50, "Independent uniformly logged datasets "
          "(each evaluated by every agent and variant)."),
    Param("n_bootstrap", Int(low=1, high=100_000), 100, "BRED bootstrap replicates."),
    Param("n_truth_runs", Int(low=2, high=1_000_000), 200, "Online runs of the ground truth "
          "(Monte Carlo value of the agent)."),
)

_register(EVALUATIONS, Kind(
    name="bred_vs_replay",
    target="recloop._registry:run_bred_vs_replay",
    summary="Replay (Li et al. 2011), BRED, BRED without jitter (Mary, Preux, Nicol 2014) "
            "and BRED revealing each record once (variant bred_once) on uniform logs of size "
            "T, against the agent's Monte-Carlo online value V(T): metrics value, bias, rmse, "
            "coverage, width per variant; bias_at_matches, rmse_at_matches, "
            "coverage_at_matches against V(m) at the variant's number of matches m "
            "(metric mean_matches).",
    params=(Param("T", Int(low=1, high=10**7), REQUIRED, "Size of each logged dataset "
                  "(sweep it for the paper's Figure 2)."),) + _BANDIT_COMMON,
    per_agent=True,
    agent_family="bandit",
    needs_world=True,
    check="recloop._registry:check_bred_vs_replay",
    figures="recloop._registry:figures_bred_vs_replay",
    figures_only=False,
))


def figures_bred_vs_replay(measurements, out_dir, world):
    """Figure 2 of Mary et al.: RMSE and bias of each variant against T, per agent."""
    from recloop.experiments._bandit_eval import plot_bred_vs_replay

    prefix = measurements[0].evaluation if measurements else "bred_vs_replay"
    return plot_bred_vs_replay(measurements, out_dir, prefix=prefix)


def check_bred_vs_replay(params, agents, world):
    """Cross-key rules of ``bred_vs_replay``."""
    yield from _bandit_config_check(params, world, what="bred_vs_replay")


def run_bred_vs_replay(cell):
    """Adapter: one cell (one agent, one T) of ``bred_vs_replay``."""
    from recloop._scenario import world_config
    from recloop.experiments._bandit_eval import bred_vs_replay

    p = cell.params
    return bred_vs_replay(world_config(cell.world), _bandit_makers(cell), T=p["T"],
                          n_logs=p["n_logs"], n_bootstrap=p["n_bootstrap"],
                          n_truth_runs=p["n_truth_runs"], rng=cell.seed_sequence,
                          progress=cell.progress)


_register(EVALUATIONS, Kind(
    name="dynamic_news",
    target="recloop._registry:run_dynamic_news",
    summary="Replay's time-acceleration bias on a drifting news world, and BRED run on "
            "windows over which the world is nearly static, against the online values "
            "V_0(T) and the windows' local values (variants replay, bred_window, "
            "bred_window_local).",
    params=(
        Param("T", Int(low=1, high=10**7), REQUIRED, "Log size (ticks 0 .. T-1), at most "
              "the world's horizon."),
        Param("window", Int(low=1, high=10**7), REQUIRED, "BRED window length, in [1, T] "
              "(sweep it for the bias/variance trade-off)."),
        Param("n_logs", Int(low=1, high=100_000), 20, "Independent logs."),
        Param("n_bootstrap", Int(low=1, high=100_000), 50, "BRED bootstrap replicates per "
              "window."),
        Param("n_truth_runs", Int(low=2, high=1_000_000), 100, "Online runs of each ground "
              "truth."),
        Param("jitter", OneOf((Str(choices=("auto",)), Float(low=0.0))), "auto", "BRED's "
              "context jitter: \"auto\" (bandwidth ~ 1/sqrt(T)) or a bandwidth (0: none)."),
    ),
    per_agent=True,
    agent_family="bandit",
    needs_world=True,
    check="recloop._registry:check_dynamic_news",
))


def check_dynamic_news(params, agents, world):
    """Cross-key rules of ``dynamic_news``: a bandit world, window <= T <= horizon."""
    yield from _bandit_config_check(params, world, what="dynamic_news")
    if params["window"] > params["T"]:
        yield "window", f"expected window <= T = {params['T']}, got {params['window']}"


def run_dynamic_news(cell):
    """Adapter: one cell (one agent, one window) of ``dynamic_news``."""
    from recloop._scenario import world_config
    from recloop.experiments._bandit_eval import dynamic_news

    p = cell.params
    return dynamic_news(world_config(cell.world), _bandit_makers(cell), T=p["T"],
                        window=p["window"], n_logs=p["n_logs"], n_bootstrap=p["n_bootstrap"],
                        n_truth_runs=p["n_truth_runs"], jitter=p["jitter"],
                        rng=cell.seed_sequence, progress=cell.progress)


_SIMILARITIES = ("pearson", "cosine", "adjusted_cosine", "pearson_corated", "cosine_corated")
_DATA_FORMATS = ("movielens_100k", "movielens_1m", "jester", "csv")

_register(EVALUATIONS, Kind(
    name="fast_loo_cf",
    target="recloop._registry:run_fast_loo_cf",
    summary="Exact leave-one-out MAE/RMSE of user-based kNN rating prediction (the truth, "
            "fast algorithm after Zhang et al. 2016) beside the leaky protocols that fit the "
            "similarities once on all the data (`fit_once`, `fit_once_self`); one row group "
            "per similarity (the `agent` column).",
    params=(
        Param("similarities", ListOf(Str(choices=_SIMILARITIES), unique=True),
              list(_SIMILARITIES), "Similarities compared (the `agent` column)."),
        Param("k", Int(low=1, high=100_000), 20, "Neighbours per prediction."),
        Param("min_support", Int(low=0, high=100_000), 1, "Fewest co-rated items for a "
              "neighbour."),
        Param("clip", ListOf(Float(), min_len=2, max_len=2), None, "Clip every prediction "
              "to [low, high] (default: no clipping)."),
        Param("data", FilePath(), None, "A local rating file (default: a synthetic set of "
              "`n_users` x `n_items` with `n_ratings` ratings drawn from the cell's seed)."),
        Param("format", Str(choices=_DATA_FORMATS), "movielens_100k", "Format of `data`."),
        Param("columns", ListOf(Str(), min_len=3, max_len=3), ["userId", "itemId", "rating"],
              "User, item and rating column names of a `csv` file."),
        Param("n_users", Int(low=2, high=10**7), 943, "Users of the synthetic set."),
        Param("n_items", Int(low=1, high=10**7), 1682, "Items of the synthetic set."),
        Param("n_ratings", Int(low=1, high=10**9), 100_000, "Ratings of the synthetic set "
              "(at most n_users x n_items)."),
        Param("naive_users", Int(low=0, high=100_000), 0, "Users also predicted by the "
              "literal (naive) LOO to time it against the fast one (rows `fast_s`, "
              "`naive_s_estimated`, `speedup`); 0 skips it. Timing rows are not "
              "reproducible."),
    ),
    per_agent=False,
    agent_family="",
    min_agents=0,
    check="recloop._registry:check_fast_loo_cf",
    figures="recloop._registry:figures_fast_loo_cf",
))


def figures_fast_loo_cf(measurements, out_dir, world):
    """MAE and RMSE per similarity, exact LOO beside the leaky protocols."""
    from recloop.experiments._loo_cf import plot_fast_loo_cf

    prefix = measurements[0].evaluation if measurements else "fast_loo_cf"
    return plot_fast_loo_cf(measurements, out_dir, prefix=prefix)


def check_fast_loo_cf(params, agents, world):
    """Cross-key rules of ``fast_loo_cf``: a synthetic set that fits its shape."""
    if params.get("data") is None and params["n_ratings"] > params["n_users"] * params["n_items"]:
        yield "n_ratings", (f"expected at most n_users x n_items = "
                            f"{params['n_users'] * params['n_items']}, got {params['n_ratings']}")
    if params.get("clip") is not None and params["clip"][0] > params["clip"][1]:
        yield "clip", f"expected [low, high] with low <= high, got {params['clip']}"


def run_fast_loo_cf(cell):
    """Adapter: one cell of ``fast_loo_cf``."""
    from recloop.experiments._loo_cf import fast_loo_cf, load_ratings

    p = cell.params
    ratings = None
    if p.get("data") is not None:
        ratings = load_ratings(p["data"], format=p["format"], columns=tuple(p["columns"]))
    return fast_loo_cf(ratings, similarities=p["similarities"], k=p["k"],
                       min_support=p["min_support"],
                       clip=tuple(p["clip"]) if p.get("clip") is not None else None,
                       shape=(p["n_users"], p["n_items"], p["n_ratings"]),
                       naive_users=p["naive_users"], rng=cell.seed_sequence,
                       progress=cell.progress, evaluation=cell.evaluation)


_register(EVALUATIONS, Kind(
    name="offline_vs_online",
    target="recloop._registry:run_offline_vs_online",
    summary="Does each offline evaluator rank the agents as the ground truth does? Replay and "
            "BRED score every agent on the same uniform logs of size T; Kendall's tau between "
            "their ordering and the ordering by online value, at T and at T/K (the horizon "
            "replay measures), averaged over logs with a bootstrap interval (metric "
            "`kendall_tau`, agent = the evaluator), beside each agent's estimates and truth "
            "(metrics `value`, `online_value`).",
    params=(
        Param("T", Int(low=1, high=10**7), 1000, "Size of each logged dataset and horizon of "
              "the truth (at most the world's horizon)."),
        Param("n_logs", Int(low=1, high=100_000), 10, "Independent uniform logs (every agent "
              "and evaluator sees the same ones)."),
        Param("n_bootstrap", Int(low=1, high=100_000), 20, "BRED bootstrap replicates."),
        Param("n_truth_runs", Int(low=2, high=1_000_000), 100, "Online runs of each agent's "
              "ground truth."),
        Param("evaluators", ListOf(Str(choices=("replay", "bred")), unique=True),
              ["replay", "bred"], "Offline evaluators compared."),
        Param("n_resamples", Int(low=1, high=10**6), 2000, "Bootstrap resamples of the logs "
              "for the interval of the mean tau."),
    ),
    per_agent=False,
    agent_family="bandit",
    needs_world=True,
    min_agents=2,
    check="recloop._registry:check_offline_vs_online",
    figures="recloop._registry:figures_offline_vs_online",
))


def check_offline_vs_online(params, agents, world):
    """Cross-key rules of ``offline_vs_online``: a bandit world, T within its horizon."""
    yield from _bandit_config_check(params, world, what="offline_vs_online")


def figures_offline_vs_online(measurements, out_dir, world):
    """Kendall tau per evaluator and estimates against the truth, one figure per T."""
    from recloop.experiments._offline_vs_online import plot_offline_vs_online

    prefix = measurements[0].evaluation if measurements else "offline_vs_online"
    return plot_offline_vs_online(measurements, out_dir, prefix=prefix)


def run_offline_vs_online(cell):
    """Adapter: one cell (all its agents on the same logs, one T) of ``offline_vs_online``."""
    from recloop._scenario import world_config
    from recloop.experiments._offline_vs_online import offline_vs_online

    p = cell.params
    return offline_vs_online(world_config(cell.world), _bandit_makers(cell), T=p["T"],
                             n_logs=p["n_logs"], n_bootstrap=p["n_bootstrap"],
                             n_truth_runs=p["n_truth_runs"], estimators=list(p["evaluators"]),
                             n_resamples=p["n_resamples"], rng=cell.seed_sequence,
                             progress=cell.progress, evaluation=cell.evaluation)
