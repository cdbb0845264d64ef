"""Every public function of ``evaluators`` (its ``__all__`` and its public submodules) fed
hypothesis-generated bad arrays -- empty, nan, inf, strings, complex, objects, a dimension too
many or too few, a length off by one -- in place of each array argument of a valid call. Each
must raise a TypeError/ValueError that names the argument, or return ``nan`` with a warning
of a named category (documented degenerate input); never a silent number.

``VALID`` holds one small valid call per function; a public function missing from it (and
from ``NO_ARRAYS``) fails ``test_every_public_function_is_driven``, so a new function gets
its entry."""

import dataclasses
import inspect
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import evaluators
from agents import Popularity
from evaluators import datasets, metrics, splits
from recloop.testing._checks import _named_warning
from simulator.logs import BanditLog, SlateLog

# -- small valid inputs --------------------------------------------------------------------
_g = np.random.default_rng(0)
N, K = 6, 3
LOG = BanditLog(context=_g.normal(size=(N, 2)), action=np.array([0, 1, 2, 0, 1, 2]),
                reward=np.array([1.0, 0, 1, 1, 0, 0]), pscore=np.full(N, 1 / 3), n_actions=K,
                pi_b=np.full((N, K), 1 / 3))
PI = np.tile([0.2, 0.5, 0.3], (N, 1))
Q = _g.random((N, K))
EMB = np.array([[0], [0], [1]])


def _slate():
    from agents import PlackettLuce

    n, m, k = 5, 4, 2
    scores = _g.normal(size=(n, m))
    mu = PlackettLuce(scores, k=k, temperature=np.inf)  # uniform: the pseudo-inverse's logger
    pi = PlackettLuce(scores, k=k, temperature=1.0)
    obs = {"user": np.arange(n), "available": np.ones((n, m), bool)}
    S = mu.sample(obs, rng=_g)
    cas = mu.prefix_probabilities(obs, S)
    log = SlateLog(context=_g.normal(size=(n, 2)), action=S, reward=np.array(
        [[1.0, 0], [0, 1], [1, 1], [0, 0], [1, 0]]), pscore=cas[:, -1], pscore_cascade=cas,
        pscore_item_position=mu.item_position_probabilities(obs, S), n_items=m,
        user=np.arange(n))
    return log, {"cascade": pi.prefix_probabilities(obs, S),
                 "ipos": pi.item_position_probabilities(obs, S),
                 "marg": pi.item_marginals(obs, S), "dist": pi.conditional_probabilities(obs, S),
                 "q": _g.random((n, k, m))}


SLOG, ST = _slate()
RATINGS = (np.array([0, 0, 1, 1, 2, 2, 2]), np.array([0, 1, 0, 1, 0, 1, 2]),
           np.array([4.0, 3, 5, 2, 1, 4, 3]))
PROFILES = np.array([[1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 1, 1]], dtype=float)
CURRENT = np.array([[1, 1, 1, 0], [1, 1, 1, 0], [1, 0, 1, 1]], dtype=float)
REC = np.array([[0, 1], [2, 3], [1, 0]])
REL = [np.array([0]), np.array([3]), np.array([1, 2])]


# function -> (positional args, keyword args); the array arguments are those whose valid value
# is an ndarray, a sparse matrix, a list of arrays or the `ratings` triple
E = evaluators
VALID = {
    E.ips: ((LOG, PI), {}),
    E.snips: ((LOG, PI), {}),
    E.subgaussian_ips: ((LOG, PI), {}),
    E.direct_method: ((LOG, PI), {"model": Q}),
    E.doubly_robust: ((LOG, PI), {"model": Q}),
    E.sndr: ((LOG, PI), {"model": Q}),
    E.switch_dr: ((LOG, PI), {"model": Q}),
    E.dr_os: ((LOG, PI), {"model": Q}),
    E.mips: ((LOG, PI), {"action_embeddings": EMB, "pi_b": LOG.pi_b}),
    E.fit_reward_model: ((LOG,), {"model": Q, "rng": 0}),
    E.select_estimator: ((LOG, PI), {"estimator": "doubly_robust", "model": Q,
                                     "values": [np.inf, 1.0]}),
    E.select_by_twin: ((LOG, PI), {"candidates": [E.ips, E.snips], "n_twins": 2, "rng": 0}),
    E.evaluate_log: ((LOG, PI), {"estimators": ["ips", "snips"], "select": "none"}),
    datasets.read_target: ((PI, LOG), {}),
    E.select_by_cv: ((LOG, PI), {"candidates": [E.ips, E.snips], "n_splits": 2, "rng": 0}),
    E.select_by_pasif: ((LOG, PI), {"candidates": [E.ips, E.snips], "n_subsamples": 2,
                                    "rng": 0}),
    E.select_by_slope: ((LOG, PI), {"candidates": [E.ips, E.snips]}),
    E.slate_ips: ((SLOG, ST["cascade"][:, -1]), {}),
    E.independent_ips: ((SLOG, ST["ipos"]), {}),
    E.reward_interaction_ips: ((SLOG, ST["cascade"]), {}),
    E.pseudoinverse: ((SLOG, ST["marg"]), {}),
    E.cascade_dr: ((SLOG, ST["cascade"], ST["dist"]), {"reward_model": ST["q"]}),
    E.loo_knn: ((RATINGS,), {"k": 2, "users": np.array([0, 1]), "neighbours": np.array([1, 2])}),
    E.kfold_loo_knn: ((RATINGS, 2), {"k": 2, "rng": 0}),
    E.fit_item_weights: ((PROFILES, CURRENT), {"user_weights": np.array([1.0, 2.0, 1.0])}),
    E.kl_objective: ((PROFILES, CURRENT, np.array([1.0, 2.0, 1.0, 0.5])), {}),
    E.reference_gradient: ((PROFILES, CURRENT, np.array([1.0, 2.0, 1.0, 0.5])), {}),
    E.loo_quality: ((PROFILES, Popularity()), {"k": 2}),
    E.offline_score: ((PROFILES, Popularity()), {"k": 2, "user_weights": np.array([1.0, 1, 2]),
                                              "item_weights": np.array([1.0, 2, 1, 1])}),
    E.normal_estimate: ((np.array([1.0, 2.0, 4.0]),), {}),
    metrics.mae: ((np.array([1.0, 2, 3]), np.array([1.0, 2, 5])), {}),
    metrics.mse: ((np.array([1.0, 2, 3]), np.array([1.0, 2, 5])), {}),
    metrics.rmse: ((np.array([1.0, 2, 3]), np.array([1.0, 2, 5])), {}),
    metrics.mape: ((np.array([1.0, 2, 3]), np.array([1.0, 2, 5])), {}),
    metrics.tre: ((np.array([1.0, 2, 3]), np.array([1.0, 2, 5])), {}),
    metrics.precision: ((np.array([1, 0, 1, 1]), np.array([1, 1, 0, 1])), {}),
    metrics.recall: ((np.array([1, 0, 1, 1]), np.array([1, 1, 0, 1])), {}),
    metrics.accuracy: ((np.array([1, 0, 1, 1]), np.array([1, 1, 0, 1])), {}),
    metrics.f1: ((np.array([1, 0, 1, 1]), np.array([1, 1, 0, 1])), {}),
    metrics.hits_at_k: ((REC, REL), {"k": 2}),
    metrics.hit_rate_at_k: ((REC, REL), {"k": 2}),
    metrics.precision_at_k: ((REC, REL), {"k": 2}),
    metrics.recall_at_k: ((REC, REL), {"k": 2}),
    metrics.dcg_at_k: ((REC, REL), {"k": 2}),
    metrics.ndcg_at_k: ((REC, REL), {"k": 2}),
    metrics.map_at_k: ((REC, REL), {"k": 2}),
    metrics.mrr_at_k: ((REC, REL), {"k": 2}),
    metrics.catalog_coverage: ((REC,), {"n_items": 4}),
    metrics.item_popularity: ((sp.csr_array(PROFILES),), {}),
    metrics.novelty: ((REC, np.array([0.5, 0.2, 0.2, 0.1])), {}),
    metrics.cooccurrence_similarity: ((sp.csr_array(PROFILES),), {}),
    metrics.intra_list_diversity: ((REC,), {"item_vectors": _g.normal(size=(4, 3))}),
    metrics.serendipity: ((REC, REL, np.array([[0, 3], [1, 2], [3, 2]])), {"k": 2}),
    datasets.bernoulli_ts_action_dist: (((np.array([1.0, 2, 3]), np.array([2.0, 2, 1])), 3, 2),
                                        {"n_sim": 50, "rng": 0}),
    datasets.multiclass_to_bandit: ((_g.normal(size=(24, 2)), np.arange(24) % 3),
                                    {"logging": datasets.ClassifierPolicy(0.5),
                                     "target": datasets.ClassifierPolicy(0.9), "rng": 0}),
    datasets.full_information_to_bandit: ((_g.normal(size=(24, 2)),
                                           (_g.random((24, 3)) < 0.4).astype(float)),
                                          {"logging": datasets.ClassifierPolicy(0.5),
                                           "target": datasets.ClassifierPolicy(0.9),
                                           "labels": np.arange(24) % 3, "rng": 0}),
    splits.temporal_split: ((np.array([5, 1, 3, 2, 4]),), {"test_fraction": 0.4}),
    splits.kfold_by_user: ((np.array([0, 0, 1, 1, 2, 2]),), {"n_folds": 2, "rng": 0}),
    splits.leave_one_out: ((np.array([0, 0, 1, 1, 2, 2]),), {"which": "last", "timestamps":
                                                             np.array([1, 2, 1, 2, 1, 2])}),
}
#: public functions without an array argument (their scalars are checked where they are
#: tested: tests/evaluators/test_estimate.py, test_splits.py, test_ab.py, test_datasets.py)
NO_ARRAYS = {E.ab_test: "environment and policies", E.replay: "a log and an agent",
             E.bred: "a log and an agent factory", E.wilson_estimate: "two counts",
             splits.train_test_split: "a count", splits.kfold: "a count",
             splits.train_validation_test_split: "a count",
             datasets.load_movielens_100k: "a path", datasets.load_movielens_1m: "a path",
             datasets.load_movielens_10m: "a path", datasets.load_movielens_20m: "a path",
             datasets.load_movielens_25m: "a path", datasets.load_jester: "a path",
             datasets.load_csv: "a path", datasets.synthetic_ratings: "sizes",
             datasets.load_open_bandit: "a path", datasets.read_bts_prior: "a path",
             datasets.load_classification: "a data set's name",
             datasets.read_bandit_log: "a path",
             datasets.jester_full_information: "ratings read from a path (its arrays come "
             "from load_jester)"}


#: (function, argument) -> kinds of "bad" array that are legal there, with the reason
LEGAL = {
    # reference and current may hold different users (without user_weights)
    **{(f, arg): {"short"} for f in (E.kl_objective, E.reference_gradient)
       for arg in ("reference", "current")},
    (E.loo_quality, "profiles"): {"short"},  # any number of users
    (E.loo_knn, "users"): {"short"}, (E.loo_knn, "neighbours"): {"short"},  # subsets
    (E.normal_estimate, "samples"): {"short"},
    (splits.temporal_split, "timestamps"): {"short"},
    # user ids of the splits may be strings
    (splits.kfold_by_user, "users"): {"short", "strings"},
    (splits.leave_one_out, "users"): {"strings"},
    (datasets.multiclass_to_bandit, "y"): {"strings"},  # labels of any sortable type
    # no list covers no item: 0 of n_items, a well-defined share
    (metrics.catalog_coverage, "recommended"): {"short", "empty"},
    (metrics.item_popularity, "interactions"): {"short"},
    (metrics.cooccurrence_similarity, "interactions"): {"short"},
    (metrics.intra_list_diversity, "recommended"): {"short"},
    (metrics.novelty, "recommended"): {"short"},
    # Open Bandit Pipeline's (n_rounds, n_actions, 1) is the other accepted shape
    **{(f, arg): {"extra_dim"} for f in (E.ips, E.snips, E.subgaussian_ips, E.direct_method,
                                         E.doubly_robust, E.sndr, E.switch_dr, E.dr_os, E.mips,
                                         E.select_estimator, E.fit_reward_model,
                                         E.select_by_twin, E.select_by_cv, E.select_by_pasif,
                                         E.select_by_slope)
       for arg in ("action_dist", "model", "pi_b")},
    # a user's target: OBP's (n_rounds, n_actions, 1) too
    **{(f, "target"): {"extra_dim"} for f in (E.evaluate_log, datasets.read_target)},
    (E.evaluate_log, "estimators"): {"short"},  # any number of estimators, one included
}


#: arguments whose parts are named on their own in messages
PARTS = {datasets.bernoulli_ts_action_dist: ["alpha", "beta"]}


def _public_functions():
    out = []
    for mod in (evaluators, metrics, splits, datasets):
        for name in mod.__all__:
            f = getattr(mod, name)
            if inspect.isfunction(f):
                out.append(f)
    return out


def test_every_public_function_is_driven():
    missing = [f"{f.__module__}.{f.__name__}" for f in _public_functions()
               if f not in VALID and f not in NO_ARRAYS]
    assert not missing, f"add a valid call to VALID (or a reason to NO_ARRAYS): {missing}"


@pytest.mark.parametrize("f", list(VALID), ids=lambda f: f.__name__)
def test_the_valid_calls_are_valid(f):
    args, kwargs = VALID[f]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(*args, **kwargs)


def _array_arguments(f):
    """(name, position or keyword, valid value) of every array argument of f's valid call."""
    args, kwargs = VALID[f]
    names = list(inspect.signature(f).parameters)
    out = []
    for i, v in enumerate(args):
        if isinstance(v, (np.ndarray, list, tuple)) or sp.issparse(v):
            out.append((names[i], i, v))
    for k, v in kwargs.items():
        if isinstance(v, (np.ndarray, list, tuple)) and not isinstance(v, str):
            if k != "values":  # select_estimator's candidates: a sequence of scalars
                out.append((k, k, v))
    return out


CASES = [(f, arg) for f in VALID for arg in _array_arguments(f)]


def _bad(draw, v, legal=frozenset()):
    """A bad version of the valid array ``v`` (none of the kinds in ``legal``)."""
    a = np.asarray(v.toarray() if sp.issparse(v) else v, dtype=None if not isinstance(
        v, list) else object)
    if isinstance(v, tuple):  # the ratings triple, a prior's (alpha, beta): spoil one array
        j = draw(st.integers(0, len(v) - 1))
        parts = list(v)
        parts[j] = _bad(draw, v[j])
        return tuple(parts)
    if isinstance(v, list):  # per-user id lists: spoil one of them, or the list
        kind = draw(st.sampled_from([k for k in ("inner", "strings", "short") if k not in legal]))
        if kind == "inner":
            j = draw(st.integers(0, len(v) - 1))
            return v[:j] + [draw(st.sampled_from([np.array([0.5]), np.array(["x"]),
                                                  np.array([[0]])]))] + v[j + 1:]
        return "abc" if kind == "strings" else v[:-1]
    kind = draw(st.sampled_from([k for k in ("empty", "nan", "inf", "strings", "complex",
                                             "object", "extra_dim", "scalar", "short")
                                 if k not in legal]))
    if kind == "empty":
        return np.empty((0,) + a.shape[1:], dtype=a.dtype)
    if kind in ("nan", "inf"):
        b = a.astype(np.float64)
        b.flat[draw(st.integers(0, b.size - 1))] = (np.nan if kind == "nan"
                                                   else draw(st.sampled_from([np.inf, -np.inf])))
        return b
    if kind == "strings":
        return a.astype(str)
    if kind == "complex":
        return a + 1j
    if kind == "object":
        b = a.astype(object)
        b.flat[0] = None
        return b
    if kind == "extra_dim":
        return a[..., None]
    if kind == "scalar":
        return a.flat[0]
    return a[:-1]  # one row short


def _numbers(result):
    """Every number a result carries (to tell a silent number from a nan)."""
    if hasattr(result, "value"):
        return [float(result.value)]
    if isinstance(result, (bool, int, float, np.number)):
        return [float(result)]
    if sp.issparse(result):
        return list(np.asarray(result.data, dtype=float))
    if isinstance(result, np.ndarray):
        return list(result.ravel().astype(float))
    if isinstance(result, (tuple, list)):
        return [x for r in result for x in _numbers(r)]
    if isinstance(result, evaluators.RewardModel):  # its predictions are its numbers
        return _numbers(result.cross_fitted) + _numbers(result.in_sample)
    if dataclasses.is_dataclass(result):
        return [x for fld in dataclasses.fields(result)
                if isinstance(getattr(result, fld.name), (np.ndarray, float, np.floating))
                for x in _numbers(getattr(result, fld.name))]
    raise AssertionError(f"what numbers does a {type(result).__name__} carry?")


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_bad_arrays_are_refused_by_name_or_give_a_documented_nan(data):
    f, (name, where, valid) = data.draw(st.sampled_from(CASES), label="function, argument")
    bad = _bad(data.draw, valid, LEGAL.get((f, name), frozenset()))
    args, kwargs = list(VALID[f][0]), dict(VALID[f][1])
    if isinstance(where, int):
        args[where] = bad
    else:
        kwargs[where] = bad
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = f(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            # the argument replaced, or the one it disagrees with (`y_true` and `y_pred`)
            msg = str(exc)
            names = list(inspect.signature(f).parameters) + PARTS.get(f, [])
            assert any(f"`{n}" in msg for n in names), (
                f"{f.__name__}({name}=bad): {type(exc).__name__} names no argument: {msg}")
            return
    # returned: only a documented degenerate case, nan (or nothing) with a named warning
    numbers = _numbers(result)
    named = sorted({w.category.__name__ for w in caught if _named_warning(w.category)})
    assert named and (not numbers or any(math.isnan(x) for x in numbers)), (
        f"{f.__name__}({name}={bad!r:.80}) returned {numbers[:5]} with "
        f"{named or 'no named warning'}: expected a TypeError/ValueError naming an argument, "
        f"or nan with a named warning")
