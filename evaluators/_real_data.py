"""Real bandit logs: the Open Bandit Dataset, its Bernoulli TS policy, and classification
data turned into bandit feedback (re-exported by :mod:`evaluators.datasets`).

* :func:`load_open_bandit` reads the Open Bandit Dataset's CSV layout (the small sample that
  ships with OBP and the full release alike, from a local path; nothing is downloaded) into a
  position-aware :class:`simulator.logs.BanditLog`.
* :func:`read_bts_prior` and :func:`bernoulli_ts_action_dist`: the Beta prior the platform's
  Bernoulli Thompson sampling ran with (``prior_bts.yaml``), and that policy's probability of
  each item at each position, by simulation -- the dataset's evaluation policy.
* :func:`multiclass_to_bandit`: the multiclass-to-bandit protocol of Dudik, Langford & Li
  (2011) on real labels, where the target's value is exact; :func:`load_classification`
  gives scikit-learn's bundled classification sets.

pandas (for the CSVs) and scikit-learn (for the classifiers, the ``[real]`` extra) are
imported on first use only.
"""

from __future__ import annotations

import copy
import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from evaluators._datasets import DatasetFormatError
from evaluators._user_log import utf8_error
from recloop_base.validation import (
    ArgumentTypeError,
    ArgumentValueError,
    as_generator,
    check_choice,
    check_float,
    check_int,
)
from simulator.logs import BanditLog, microseconds

__all__ = [
    "OBD_BEHAVIOR_POLICIES",
    "OBD_CAMPAIGNS",
    "BetaPrior",
    "ClassifierPolicy",
    "MulticlassBandit",
    "FullInformation",
    "JESTER_JOKES",
    "CLASSIFICATION_SETS",
    "load_open_bandit",
    "read_bts_prior",
    "bernoulli_ts_action_dist",
    "multiclass_to_bandit",
    "full_information_to_bandit",
    "jester_full_information",
    "load_classification",
]

#: The Open Bandit Dataset's logging policies and campaigns (its directory names).
OBD_BEHAVIOR_POLICIES = ("random", "bts")
OBD_CAMPAIGNS = ("all", "men", "women")

_OBD_COLUMNS = ("timestamp", "item_id", "position", "click", "propensity_score")
_USER = "user_feature_"
_AFFINITY = "user-item_affinity_"


# -- the Open Bandit Dataset ------------------------------------------------------------------
def _err(path, line, msg) -> DatasetFormatError:
    return DatasetFormatError(f"{path}:{line}: {msg}" if line else f"{path}: {msg}")


def _header(path: Path) -> list[str]:
    """The CSV header; a column named twice, text that is not UTF-8 (anywhere in the file:
    checked in blocks, before pandas reads it) and an empty file are refused."""
    where = utf8_error(path)
    if where is not None:
        raise _err(path, where[0], f"not valid UTF-8 text (byte {where[1]}); the Open Bandit "
                                   "Dataset's files are UTF-8.")
    with open(path, newline="", encoding="utf-8") as fh:
        try:
            header = next(csv.reader(fh))
        except StopIteration:
            raise _err(path, 0, "the file is empty; expected a CSV header.") from None
    seen: dict[str, int] = {}
    for j, c in enumerate(header):
        if c in seen:
            raise _err(path, 1, f"column {c!r} appears twice (columns {seen[c] + 1} and "
                                f"{j + 1}); which one holds the data?")
        seen[c] = j
    return header


def _require(path, header, required) -> None:
    missing = [c for c in required if c not in header]
    if missing:
        raise _err(path, 1, f"missing column(s) {', '.join(map(repr, missing))}; the header "
                            f"has {len(header)} columns: {', '.join(header[:8])}"
                            f"{', ...' if len(header) > 8 else ''}.")


def _numeric(path, frame, column, *, integer=False) -> np.ndarray:
    """A column as float64; DatasetFormatError naming the first line that is not a number
    (an integer with ``integer``)."""
    import pandas as pd

    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if integer:
        bad |= np.isfinite(values) & (values != np.round(values))
    if bad.any():
        j = int(np.argmax(bad))
        kind = "an integer" if integer else "a finite number"
        raise _err(path, j + 2, f"column {column!r} must hold {kind}; got {raw.iloc[j]!r}.")
    return values


def _first_bad(path, ok, column, values, rule) -> None:
    if not ok.all():
        j = int(np.argmax(~ok))
        raise _err(path, j + 2, f"column {column!r} must be {rule}; got {values[j]:g}.")


def _codes(values) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and each value's index among them (scikit-learn's
    ``LabelEncoder``, pandas' sorted categories)."""
    uniq, inv = np.unique(np.asarray(values), return_inverse=True)
    return uniq, inv.ravel().astype(np.int64)


def _item_context(path: Path) -> tuple[np.ndarray, list[str], dict, int]:
    """``(embeddings (K, F) int, column names, numeric columns' raw values, K)``."""
    import pandas as pd

    header = _header(path)
    _require(path, header, ("item_id",))
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    ids = _numeric(path, frame, "item_id", integer=True).astype(np.int64)
    K = ids.size
    if K == 0:
        raise _err(path, 0, "no items.")
    if not np.array_equal(np.sort(ids), np.arange(K)):
        raise _err(path, 0, f"column 'item_id' must number the {K} items 0 ... {K - 1}, each "
                            f"once; got {np.unique(ids).size} distinct ids in "
                            f"[{ids.min()}, {ids.max()}].")
    order = np.argsort(ids)
    features = [c for c in header if c.startswith("item_feature_")]
    categorical, numeric, raw_numeric = [], [], {}
    for c in features:
        col = frame[c].to_numpy()[order]
        num = pd.to_numeric(pd.Series(col), errors="coerce").to_numpy(dtype=np.float64)
        if np.isfinite(num).all():
            numeric.append((c, _codes(num)[1]))
            raw_numeric[c] = num.tolist()
        else:
            categorical.append((c, _codes(col)[1]))
    # OBP's order: the label-encoded categorical features, then the numeric ones
    cols = categorical + numeric
    emb = (np.stack([v for _, v in cols], axis=1) if cols
           else np.zeros((K, 0), dtype=np.int64))
    return emb, [c for c, _ in cols], raw_numeric, K


def load_open_bandit(path, *, behavior_policy: str, campaign: str,
                     affinity: bool = False) -> BanditLog:
    """Read one log of the Open Bandit Dataset (OBD) into a position-aware log.

    Parameters
    ----------
    path : str or os.PathLike
        The dataset's root directory, which holds ``{behavior_policy}/{campaign}/
        {campaign}.csv`` and ``item_context.csv`` beside it: the small sample that ships
        with Open Bandit Pipeline (10,000 rows per file) or the full release. Read locally;
        nothing is downloaded.
    behavior_policy : {"random", "bts"}
        The logging policy: uniform random, or the platform's Bernoulli Thompson sampling.
    campaign : {"all", "men", "women"}
        The campaign (80, 34 and 46 items).
    affinity : bool, default False
        Append the ``user-item_affinity_*`` columns (one per item) to the context.

    Returns
    -------
    BanditLog
        One record per CSV row (an impression's position), in time order (a stable sort by
        ``timestamp``, as OBP sorts): ``action`` the ``item_id``, ``position`` the CSV's
        1-3 (left, centre, right) minus one, ``len_list`` the largest position (3),
        ``reward`` the click, ``pscore`` the ``propensity_score`` (the logging policy's
        probability of that item at that position), ``tick`` the timestamp in microseconds
        since 1970-01-01 UTC, ``n_actions`` the number of items in ``item_context.csv``.

        ``context`` is OBP's: the one-hot encoding of the 4 hashed ``user_feature_*``
        columns with the first (sorted) category of each dropped (``pandas.get_dummies(...,
        drop_first=True)``), float64 -- equal to ``OpenBanditDataset(...).context`` column
        for column; with ``affinity`` the affinity columns follow. One-hot rather than
        hashing: the features have 3-9 categories each, so the encoding is exact and small
        (21-24 columns). The categories are those of the file read; two files may differ
        (the sample's ``random`` and ``bts`` logs do): ``metadata["context_columns"]``
        names each column (``"user_feature_0=<hash>"``) to align them.

        ``action_embeddings`` (OBP's ``action_context``): per item, the codes of its
        categorical features (scikit-learn's ``LabelEncoder``: index in sorted order, as
        OBP) followed by the numeric ``item_feature_0`` as the dense rank of its value
        (a log holds integer embeddings, what MIPS reads); its raw values are in
        ``metadata["item_feature_values"]``.

    Raises
    ------
    ValueError
        ``behavior_policy`` or ``campaign`` not one of the above.
    FileNotFoundError
        A missing CSV.
    DatasetFormatError
        (a ``ValueError``) naming the file, line and column: missing columns, a value that
        is not a number, an ``item_id`` outside the items of ``item_context.csv``, a
        ``position`` below 1 or not an integer, a ``click`` other than 0 or 1, a
        ``propensity_score`` outside (0, 1], an unreadable timestamp.

    Notes
    -----
    Saito, Aihara, Matsutani & Narita (2021), "Open Bandit Dataset and Pipeline: Towards
    Realistic and Reproducible Off-Policy Evaluation", NeurIPS Datasets and Benchmarks. The
    dataset is for research benchmarking; cite it, and never redistribute it.

    Examples
    --------
    >>> from evaluators.datasets import load_open_bandit
    >>> log = load_open_bandit("data/obd", behavior_policy="bts",
    ...                        campaign="men")  # doctest: +SKIP
    >>> log.len_list, log.n_actions, round(log.reward.mean(), 4)  # doctest: +SKIP
    (3, 34, 0.0069)
    """
    import pandas as pd

    behavior_policy = check_choice(behavior_policy, "behavior_policy", OBD_BEHAVIOR_POLICIES)
    campaign = check_choice(campaign, "campaign", OBD_CAMPAIGNS)
    if not isinstance(affinity, bool):
        raise ArgumentTypeError("affinity", "a bool", type(affinity).__name__)
    folder = Path(path) / behavior_policy / campaign
    csv_path, item_path = folder / f"{campaign}.csv", folder / "item_context.csv"
    for p in (csv_path, item_path):
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such file (`path` must be the Open Bandit "
                                    "Dataset's root, holding {random,bts}/{all,men,women}/).")
    emb, emb_cols, raw_numeric, K = _item_context(item_path)

    header = _header(csv_path)
    _require(csv_path, header, _OBD_COLUMNS)
    users = [c for c in header if c.startswith(_USER)]
    if not users:
        raise _err(csv_path, 1, f"missing the user feature columns {_USER}0, ...")
    aff = [c for c in header if c.startswith(_AFFINITY)] if affinity else []
    if affinity and not aff:
        raise _err(csv_path, 1, f"missing the affinity columns {_AFFINITY}0, ... "
                                "(asked for by `affinity=True`).")
    cols = list(_OBD_COLUMNS) + users + aff
    # strings throughout: every column is then checked here, with the line it sits on
    frame = pd.read_csv(csv_path, usecols=cols, dtype=str, keep_default_na=False,
                        engine="c")
    n = len(frame)
    if n == 0:
        raise _err(csv_path, 0, "no records.")

    item = _numeric(csv_path, frame, "item_id", integer=True)
    _first_bad(csv_path, (item >= 0) & (item < K), "item_id", item,
               f"an item of item_context.csv, in [0, {K})")
    pos = _numeric(csv_path, frame, "position", integer=True)
    # a list of distinct items has at most K slots (2^63 - 1 gave len_list 2^63)
    _first_bad(csv_path, (pos >= 1) & (pos <= K), "position", pos,
               f"an integer in [1, {K}] (1 = left; at most one slot per item)")
    click = _numeric(csv_path, frame, "click", integer=True)
    _first_bad(csv_path, (click == 0) | (click == 1), "click", click, "0 or 1")
    pscore = _numeric(csv_path, frame, "propensity_score")
    _first_bad(csv_path, (pscore > 0) & (pscore <= 1), "propensity_score", pscore,
               "in (0, 1]")
    tick, bad = microseconds(frame["timestamp"])
    if bad is not None:
        raise _err(csv_path, bad + 2, f"column 'timestamp' must hold a date (ISO 8601, "
                                      f"between the years 1678 and 2261); got "
                                      f"{frame['timestamp'].iloc[bad]!r}.")

    blocks, names = [], []
    for c in users:  # pandas.get_dummies(drop_first=True): sorted categories, first dropped
        uniq, inv = _codes(frame[c].to_numpy())
        onehot = np.zeros((n, uniq.size - 1))
        rows = np.flatnonzero(inv > 0)
        onehot[rows, inv[rows] - 1] = 1.0
        blocks.append(onehot)
        names += [f"{c}={u}" for u in uniq[1:]]
    for c in aff:
        blocks.append(_numeric(csv_path, frame, c)[:, None])
        names.append(c)
    context = np.concatenate(blocks, axis=1)

    order = np.argsort(tick, kind="stable")
    meta = {"dataset": "open_bandit", "source": str(csv_path),
            "behavior_policy": behavior_policy, "campaign": campaign,
            "context_columns": names, "action_embedding_columns": emb_cols,
            "item_feature_values": raw_numeric}
    return BanditLog(context=context[order], action=item[order].astype(np.int64),
                     reward=click[order], pscore=pscore[order], n_actions=K,
                     tick=tick[order], metadata=meta, action_embeddings=emb,
                     position=pos[order].astype(np.int64) - 1, len_list=int(pos.max()))


# -- the Bernoulli TS evaluation policy ------------------------------------------------------
@dataclass(frozen=True, eq=False)
class BetaPrior:
    """A Beta(``alpha[i]``, ``beta[i]``) prior on each item's click rate.

    Raises
    ------
    ValueError
        Arrays that are not 1-d, of different lengths, empty, or not finite and > 0.
    """

    alpha: np.ndarray
    beta: np.ndarray

    def __post_init__(self):
        for name in ("alpha", "beta"):
            a = np.asarray(getattr(self, name))
            if a.dtype.kind not in "biuf":  # strings such as "1.0" and complex too
                raise ArgumentTypeError(name, "an array of numbers",
                                        f"{type(getattr(self, name)).__name__} of dtype "
                                        f"{a.dtype}")
            a = np.array(a, dtype=np.float64)
            if a.ndim != 1 or a.size == 0:
                raise ArgumentValueError(name, "a non-empty 1-d array", f"shape {a.shape}")
            bad = np.flatnonzero(~(np.isfinite(a) & (a > 0)))
            if bad.size:
                raise ArgumentValueError(name, "finite and > 0",
                                         f"{a[bad[0]]} at index {bad[0]}")
            a.setflags(write=False)
            object.__setattr__(self, name, a)
        if self.alpha.size != self.beta.size:
            raise ArgumentValueError("beta", f"as long as `alpha` ({self.alpha.size})",
                                     f"{self.beta.size} entries")

    @property
    def n_actions(self) -> int:
        return int(self.alpha.size)


def read_bts_prior(path) -> dict[str, BetaPrior]:
    """The Beta priors of the Open Bandit Dataset's ``prior_bts.yaml``, per campaign.

    The file's layout is a two-level mapping of lists of numbers::

        all:
          alpha:
            - 47.0
            ...
          beta:
            - 12198.0
            ...

    read by a small parser of exactly that layout (comments and blank lines allowed;
    recloop does not depend on a YAML library).

    Returns
    -------
    dict
        Campaign name -> :class:`BetaPrior`, in file order.

    Raises
    ------
    FileNotFoundError
    DatasetFormatError
        (a ``ValueError``) naming the file and line of anything outside that layout, a
        campaign without both ``alpha`` and ``beta``, or values a prior cannot take.
    """
    p = Path(path)
    out: dict[str, dict[str, list[float]]] = {}
    campaign = key = None
    with open(p, encoding="utf-8") as fh:
        for ln, raw in enumerate(fh, start=1):
            line = raw.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            indent = len(line) - len(line.lstrip(" "))
            text = line.strip()
            if indent == 0 and text.endswith(":"):
                campaign, key = text[:-1].strip().strip("'\""), None
                if campaign in out:
                    raise _err(p, ln, f"campaign {campaign!r} given twice.")
                out[campaign] = {}
            elif indent > 0 and text.endswith(":") and campaign is not None:
                key = text[:-1].strip().strip("'\"")
                if key not in ("alpha", "beta"):
                    raise _err(p, ln, f"expected 'alpha:' or 'beta:'; got {text!r}.")
                out[campaign][key] = []
            elif indent > 0 and text.startswith("-") and key is not None:
                try:
                    out[campaign][key].append(float(text[1:]))
                except ValueError:
                    raise _err(p, ln, f"expected '- <number>'; got {text!r}.") from None
            else:
                raise _err(p, ln, "expected 'campaign:', 'alpha:', 'beta:' or '- <number>' "
                                  f"(a two-level mapping of lists); got {text!r}.")
    if not out:
        raise _err(p, 0, "no campaign found.")
    priors = {}
    for name, d in out.items():
        if set(d) != {"alpha", "beta"}:
            raise _err(p, 0, f"campaign {name!r} must have both 'alpha' and 'beta'; got "
                             f"{sorted(d)}.")
        try:
            priors[name] = BetaPrior(d["alpha"], d["beta"])
        except ValueError as exc:
            raise _err(p, 0, f"campaign {name!r}: {exc}") from None
    return priors


_SIM_BATCH = 1 << 20  # Beta draws per batch: a fixed size, so the result never depends on it


def bernoulli_ts_action_dist(prior, n_actions: int, len_list: int, *, n_sim: int = 100_000,
                             rng=None) -> np.ndarray:
    """The probability that Bernoulli Thompson sampling with a fixed Beta prior shows each
    item at each position, by simulation.

    Each simulation draws one click rate per item from the prior and shows the
    ``len_list`` items of largest draws in decreasing order (each position a distinct
    item). The frequencies over ``n_sim`` simulations estimate the policy; with the
    Open Bandit Dataset's shipped prior (:func:`read_bts_prior`) this is the dataset's
    evaluation policy (OBP's ``BernoulliTS(is_zozotown_prior=True, ...)``).

    Parameters
    ----------
    prior : BetaPrior or (alpha, beta)
        One Beta prior per item.
    n_actions : int
        Number of items; must equal the prior's.
    len_list : int in [1, n_actions]
        Number of positions.
    n_sim : int >= 1, default 100,000
        Simulations (OBP's default). Each probability ``p`` has standard error
        ``sqrt(p (1 - p) / n_sim)``: at most 0.0016 at the default.
    rng : None, int, SeedSequence or Generator
        Source of the Beta draws.

    Returns
    -------
    ndarray (n_actions, len_list) float64
        Column ``l`` is the distribution of the item at position ``l`` (it sums to 1). The
        policy ignores the context: for an estimator's ``(n_rounds, n_actions, len_list)``
        use ``np.broadcast_to(dist, (n_rounds, n_actions, len_list))`` (a view, no copy),
        where OBP's ``compute_batch_action_dist`` tiles a copy.

    Notes
    -----
    Matches OBP's ``BernoulliTS.compute_batch_action_dist`` (before any update: the
    posterior is the prior), which loops over simulations; here all draws of a batch are
    ranked at once (``argpartition`` of the top ``len_list``, then their order). Ties
    between draws have probability 0; the lower index goes first.

    Examples
    --------
    >>> d = bernoulli_ts_action_dist(([1.0, 1.0, 50.0], [50.0, 50.0, 1.0]), 3, 2,
    ...                              n_sim=1000, rng=0)
    >>> d.shape, d.sum(axis=0).tolist(), float(d[2, 0])
    ((3, 2), [1.0, 1.0], 1.0)
    """
    if not isinstance(prior, BetaPrior):
        if not isinstance(prior, (tuple, list)) or len(prior) != 2:
            raise ArgumentTypeError("prior", "a BetaPrior or an (alpha, beta) pair",
                                    type(prior).__name__)
        prior = BetaPrior(*prior)
    n_actions = check_int(n_actions, "n_actions", low=1)
    if n_actions != prior.n_actions:
        raise ArgumentValueError("n_actions", f"the prior's number of items "
                                 f"({prior.n_actions})", str(n_actions))
    len_list = check_int(len_list, "len_list", low=1, high=n_actions)
    n_sim = check_int(n_sim, "n_sim", low=1)
    gen = as_generator(rng)
    K, L = n_actions, len_list
    counts = np.zeros(K * L, dtype=np.int64)
    rows = max(1, _SIM_BATCH // K)
    slot = np.arange(L)
    for start in range(0, n_sim, rows):
        b = min(rows, n_sim - start)
        draws = gen.beta(prior.alpha, prior.beta, size=(b, K))
        top = _top(draws, L)
        counts += np.bincount((top * L + slot).ravel(), minlength=K * L)
    return counts.reshape(K, L) / n_sim


def _top(draws, L) -> np.ndarray:
    """Indices of the ``L`` largest entries of each row, largest first (ties: lower index)."""
    if L < draws.shape[1]:
        idx = np.argpartition(-draws, L - 1, axis=1)[:, :L]
        idx.sort(axis=1)  # equal draws keep index order in the stable sort below
    else:
        idx = np.broadcast_to(np.arange(draws.shape[1]), draws.shape).copy()
    vals = np.take_along_axis(draws, idx, axis=1)
    return np.take_along_axis(idx, np.argsort(-vals, axis=1, kind="stable"), axis=1)


# -- classification data as bandit feedback --------------------------------------------------
def _sklearn(what: str):
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise ImportError(f"{what} needs scikit-learn, an optional dependency: "
                          "pip install 'recloop[real]'.") from None


@dataclass(frozen=True)
class ClassifierPolicy:
    """``pi(a | x) = alpha 1[a == h(x)] + (1 - alpha) / K``: a classifier ``h`` fitted on the
    training split, its prediction mixed with the uniform policy (OBP's
    ``MultiClassToBanditReduction`` policies).

    Parameters
    ----------
    alpha : float in [0, 1], default 0.9
        Weight of the classifier's prediction (0: uniform; 1: deterministic).
    classifier : "logistic" or object, default "logistic"
        ``"logistic"``: scikit-learn's ``LogisticRegression(C=C)`` on standardised features
        (``StandardScaler``; 2,000 iterations at most). Or any unfitted classifier with
        ``fit(X, y)`` and ``predict(X)``, copied before fitting (``sklearn.base.clone``).
    C : float > 0, default 1.0
        Inverse regularisation of ``"logistic"`` (smaller: a weaker classifier).
    """

    alpha: float = 0.9
    classifier: Any = "logistic"
    C: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "alpha", check_float(self.alpha, "alpha", low=0.0, high=1.0))
        object.__setattr__(self, "C", check_float(self.C, "C", low=0.0, low_open=True))
        c = self.classifier
        if isinstance(c, str):
            check_choice(c, "classifier", ("logistic",))
        elif not (callable(getattr(c, "fit", None)) and callable(getattr(c, "predict", None))):
            raise ArgumentTypeError("classifier", "'logistic' or an object with fit(X, y) "
                                    "and predict(X)", type(c).__name__)

    def _model(self):
        if isinstance(self.classifier, str):
            from sklearn.linear_model import LogisticRegression
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import StandardScaler

            return make_pipeline(StandardScaler(), LogisticRegression(C=self.C, max_iter=2000))
        try:
            from sklearn.base import clone

            return clone(self.classifier)
        except (ImportError, TypeError):
            return copy.deepcopy(self.classifier)

    def probabilities(self, predicted: np.ndarray, K: int) -> np.ndarray:
        """``(n, K)`` action probabilities from the classifier's predicted class indices."""
        p = np.full((predicted.size, K), (1.0 - self.alpha) / K)
        p[np.arange(predicted.size), predicted] += self.alpha
        return p


@dataclass(frozen=True, eq=False)
class MulticlassBandit:
    """A bandit log made from labelled data, with its target policies' exact values.

    Attributes
    ----------
    log : BanditLog
        One record per evaluation example: ``context`` its features, ``action`` drawn from
        the logging policy, ``reward`` 1 when the action is the true class, ``pscore`` and
        ``pi_b`` the logging probabilities.
    action_dist : ndarray (n_targets, n_rounds, n_actions)
        Each target policy's probabilities on the log's records.
    value : ndarray (n_targets,)
        Each target's exact value on these records: ``mean_j pi_e(y_j | x_j)``, the
        expected reward of the target on the evaluation examples (what every unbiased
        estimator estimates).
    classes : ndarray (n_actions,)
        The original labels; action ``a`` is class ``classes[a]``.
    train_index, eval_index : ndarray of int
        Rows of ``X`` that trained the classifiers, and the log's rows (in log order).
    rewards : ndarray (n_rounds, n_actions)
        Every action's reward on the log's records (the one-hot labels of a multiclass
        log): the log's rewards are ``rewards[j, action_j]``.
    """

    log: BanditLog
    action_dist: np.ndarray
    value: np.ndarray
    classes: np.ndarray
    train_index: np.ndarray
    eval_index: np.ndarray
    rewards: np.ndarray | None = None


def _check_x(X) -> np.ndarray:
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise ArgumentTypeError("X", "a numeric array", f"dtype {X.dtype}")
    if X.ndim != 2 or X.shape[0] == 0:
        raise ArgumentValueError("X", "a 2-d array (n_samples, n_features) with rows",
                                 f"shape {X.shape}")
    X = X.astype(np.float64)
    if not np.isfinite(X).all():
        raise ArgumentValueError("X", "finite", "nan or inf")
    return X


def _check_xy(X, y):
    X = _check_x(X)
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ArgumentValueError("y", f"a 1-d array of {X.shape[0]} labels (one per row of "
                                 "`X`)", f"shape {y.shape}")
    if y.dtype.kind not in "biufUS":
        raise ArgumentTypeError("y", "labels (bool, int, float or str)", f"dtype {y.dtype}")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        j = int(np.argmax(~np.isfinite(y)))
        raise ArgumentValueError("y", "labels without nan or inf", f"{y[j]} at index {j}")
    classes, label = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ArgumentValueError("y", "labels of at least 2 classes (one class leaves one "
                                 "action: nothing to choose)",
                                 f"1 class ({classes[0]!r})")
    return X, classes, label.ravel().astype(np.int64)


def _stratified_split(label, K, eval_size, gen):
    """Per class, a random ``round(eval_size * count)`` of its rows to the evaluation part."""
    train, ev = [], []
    for k in range(K):
        rows = gen.permutation(np.flatnonzero(label == k))
        m = int(round(eval_size * rows.size))
        ev.append(rows[:m])
        train.append(rows[m:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(ev))


def multiclass_to_bandit(X, y, *, logging: ClassifierPolicy, target, eval_size: float = 0.5,
                         rng=None) -> MulticlassBandit:
    """The multiclass-to-bandit protocol: labelled data as a bandit log whose target value
    is exact.

    The classes become the actions, and the reward is 1 when the action is the example's
    true class. The data are split (stratified by class) into a training part, on which
    each policy's classifier is fitted, and an evaluation part, which becomes the log: the
    logging policy picks an action per example, only that action's reward is kept. Every
    reward of every action is known from the label, so a target's value on the
    evaluation examples is exact.

    Parameters
    ----------
    X : array (n_samples, n_features)
    y : array (n_samples,)
        Labels of at least two classes (any sortable type).
    logging : ClassifierPolicy
        The logging policy; ``alpha < 1`` so that every action has a positive probability.
    target : ClassifierPolicy or sequence of them
        The target policies.
    eval_size : float in (0, 1), default 0.5
        Share of each class that goes to the log.
    rng : None, int, SeedSequence or Generator
        Source of the split and of the logged actions (the classifiers are deterministic).

    Returns
    -------
    MulticlassBandit
        ``rewards`` the one-hot encoding of the evaluation examples' labels.

    Raises
    ------
    ImportError
        scikit-learn is not installed and a policy uses ``"logistic"``.
    TypeError, ValueError
        Naming the argument: non-numeric or non-finite ``X``, ``y`` of another length or of
        one class, a logging policy with ``alpha == 1``, ``eval_size`` outside (0, 1), a
        split with an empty part, a classifier that fails to fit.

    Notes
    -----
    Dudik, Langford & Li (2011), "Doubly robust policy evaluation and learning" (section
    5.1), followed by most OPE studies since; OBP's ``MultiClassToBanditReduction`` builds
    the same policies. Example: ``X, y = load_classification("digits")``.
    :func:`full_information_to_bandit` is the same protocol for any table of rewards.

    Examples
    --------
    >>> import numpy as np
    >>> g = np.random.default_rng(0)
    >>> X = g.normal(size=(400, 3)); y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    >>> data = multiclass_to_bandit(X, y, logging=ClassifierPolicy(alpha=0.5),
    ...                             target=ClassifierPolicy(alpha=0.9), rng=1)
    >>> data.log.n_rounds, data.log.n_actions, data.action_dist.shape
    (200, 3, (1, 200, 3))
    """
    X, classes, label = _check_xy(X, y)
    rewards = np.eye(classes.size)[label]
    return _to_bandit(X, label, rewards, classes, logging, target, eval_size, rng,
                      "multiclass_to_bandit")


def full_information_to_bandit(X, rewards, *, labels=None, logging: ClassifierPolicy,
                               target, eval_size: float = 0.5, rng=None) -> MulticlassBandit:
    """Data where every action's reward is known (full information) as a bandit log whose
    target value is exact: the multiclass protocol for any table of rewards.

    Parameters
    ----------
    X : array (n_samples, n_features)
        The contexts.
    rewards : array (n_samples, n_actions)
        Every action's reward for every row (finite numbers).
    labels : array (n_samples,) of ints in [0, n_actions), optional
        The action each policy's classifier learns to predict from ``X`` (and the strata of
        the split); default each row's best action, ``argmax(rewards)`` (the first among
        ties).
    logging, target, eval_size, rng
        As for :func:`multiclass_to_bandit`.

    Returns
    -------
    MulticlassBandit
        ``log.reward`` is ``rewards[j, action_j]``; ``value`` each target's exact
        ``mean_j sum_a pi_e(a | x_j) rewards[j, a]`` over the evaluation rows; ``classes``
        the action indices ``0 ... n_actions - 1``.

    Raises
    ------
    TypeError, ValueError
        As :func:`multiclass_to_bandit`; ``rewards`` not a finite ``(n_samples, n_actions)``
        array with ``n_actions >= 2``, ``labels`` of another length or outside the actions.

    Notes
    -----
    Riquelme, Tucker & Snoek (2018), "Deep Bayesian bandits showdown" (ICLR), build their
    Jester problem this way: contexts the ratings of some jokes, actions other jokes, every
    action's reward known because the users rated every joke (:func:`jester_full_information`).

    Examples
    --------
    >>> import numpy as np
    >>> g = np.random.default_rng(0)
    >>> X = g.normal(size=(300, 2)); R = (g.random((300, 3)) < 0.3).astype(float)
    >>> data = full_information_to_bandit(X, R, logging=ClassifierPolicy(alpha=0.2),
    ...                                   target=ClassifierPolicy(alpha=0.9), rng=0)
    >>> data.rewards.shape, data.log.n_actions
    ((150, 3), 3)
    """
    X = _check_x(X)
    R = np.asarray(rewards)
    if R.dtype.kind not in "biuf":
        raise ArgumentTypeError("rewards", "a numeric array", f"dtype {R.dtype}")
    if R.ndim != 2 or R.shape[0] != X.shape[0] or R.shape[1] < 2:
        raise ArgumentValueError("rewards", f"an array ({X.shape[0]}, n_actions) with "
                                 "n_actions >= 2 (one row per row of `X`)", f"shape {R.shape}")
    R = R.astype(np.float64)
    if not np.isfinite(R).all():
        j, k = (int(i) for i in np.argwhere(~np.isfinite(R))[0])
        raise ArgumentValueError("rewards", "finite", f"{R[j, k]} at row {j}, action {k}")
    K = R.shape[1]
    if labels is None:
        label = R.argmax(axis=1).astype(np.int64)
    else:
        label = np.asarray(labels)
        if label.shape != (X.shape[0],) or label.dtype.kind not in "iu" or (
                label.size and (label.min() < 0 or label.max() >= K)):
            raise ArgumentValueError("labels", f"{X.shape[0]} ints in [0, {K})",
                                     f"shape {label.shape}, dtype {label.dtype}")
        label = label.astype(np.int64)
    return _to_bandit(X, label, R, np.arange(K), logging, target, eval_size, rng,
                      "full_information_to_bandit")


def _to_bandit(X, label, rewards, classes, logging, target, eval_size, rng, who):
    """The protocol of :func:`multiclass_to_bandit` on checked ``X``, the classifiers'
    labels and every action's reward."""
    if not isinstance(logging, ClassifierPolicy):
        raise ArgumentTypeError("logging", "a ClassifierPolicy", type(logging).__name__)
    if logging.alpha >= 1.0:
        raise ArgumentValueError("logging.alpha", "< 1 (a logging policy must give every "
                                 "action a positive probability)", str(logging.alpha))
    targets = (target,) if isinstance(target, ClassifierPolicy) else tuple(target) if (
        isinstance(target, Sequence) and not isinstance(target, str)) else None
    if not targets or not all(isinstance(t, ClassifierPolicy) for t in targets):
        raise ArgumentTypeError("target", "a ClassifierPolicy or a non-empty sequence of "
                                "them", type(target).__name__)
    eval_size = check_float(eval_size, "eval_size", low=0.0, high=1.0, low_open=True,
                            high_open=True)
    gen = as_generator(rng)
    K = rewards.shape[1]
    train, ev = _stratified_split(label, K, eval_size, gen)
    if train.size == 0 or ev.size == 0:
        raise ArgumentValueError("eval_size", "a share that leaves rows in both parts",
                                 f"{eval_size} ({train.size} training, {ev.size} evaluation "
                                 "rows)")
    if any(isinstance(p.classifier, str) for p in (logging, *targets)):
        _sklearn(who)
    fitted: dict = {}

    def predict(policy: ClassifierPolicy) -> np.ndarray:
        if policy.alpha == 0.0:
            return np.zeros(ev.size, dtype=np.int64)  # uniform: no classifier needed
        key = (policy.classifier if isinstance(policy.classifier, str)
               else id(policy.classifier), policy.C)
        if key not in fitted:
            model = policy._model()
            try:
                model.fit(X[train], label[train])
                pred = np.asarray(model.predict(X[ev]))
            except Exception as exc:  # a user's classifier may fail in any way
                raise ValueError(f"the classifier of a policy ({policy}) failed to fit or "
                                 f"predict on the training split: {exc}") from exc
            if pred.shape != (ev.size,) or not np.isin(pred, np.arange(K)).all():
                raise ValueError(f"the classifier of a policy ({policy}) must predict class "
                                 f"indices in [0, {K}); got {pred[:5].tolist()}...")
            fitted[key] = pred.astype(np.int64)
        return fitted[key]

    pi_b = logging.probabilities(predict(logging), K)
    u = gen.random(ev.size)
    action = np.minimum((np.cumsum(pi_b, axis=1) <= u[:, None]).sum(axis=1), K - 1)
    rows = np.arange(ev.size)
    R = np.ascontiguousarray(rewards[ev])
    dists = np.stack([t.probabilities(predict(t), K) for t in targets])
    log = BanditLog(context=X[ev], action=action, reward=R[rows, action],
                    pscore=pi_b[rows, action], n_actions=K, pi_b=pi_b,
                    metadata={"dataset": who.removesuffix("_to_bandit"),
                              "n_train": int(train.size)})
    value = np.array([np.einsum("jk,jk->j", d, R).mean() for d in dists])
    for a in (dists, value, classes, train, ev, R):
        a.setflags(write=False)
    return MulticlassBandit(log=log, action_dist=dists, value=value, classes=classes,
                            train_index=train, eval_index=ev, rewards=R)


#: The eight jokes of the bundled Jester slice rated by the most users (787 of its 906
#: rated all eight; all eight belong to Jester's gauge set, which the original study asked
#: every user to rate).
JESTER_JOKES = (7, 8, 13, 15, 16, 17, 18, 19)


@dataclass(frozen=True, eq=False)
class FullInformation:
    """Contexts with every action's reward known.

    Attributes
    ----------
    X : ndarray (n_rows, n_features)
        The contexts.
    rewards : ndarray (n_rows, n_actions)
        Every action's reward on every row.
    labels : ndarray (n_rows,) of int
        The action a policy's classifier learns to predict (the best one of each row).
    action_ids : ndarray (n_actions,)
        What each action is in the source data (Jester: the joke ids).
    """

    X: np.ndarray
    rewards: np.ndarray
    labels: np.ndarray
    action_ids: np.ndarray


def jester_full_information(data, *, jokes=JESTER_JOKES, n_context: int = 4,
                            threshold: float = 5.0) -> FullInformation:
    """Jester's users who rated every joke of a set, as contexts with every action's
    reward known (Riquelme, Tucker & Snoek 2018).

    Parameters
    ----------
    data : RatingData or str or os.PathLike
        Jester ratings (:func:`load_jester`, or a path it reads).
    jokes : sequence of joke ids, default :data:`JESTER_JOKES`
        The set: only users who rated all of them are kept. Sorted by id, the first
        ``n_context`` are the context, the others the actions.
    n_context : int >= 1, default 4
        Jokes whose ratings (divided by 10, so in [-1, 1]) are the context.
    threshold : float, default 5.0
        The reward of an action joke is 1 when the user rated it at least ``threshold``
        (ratings are in [-10, 10]: 5 is "liked it"), else 0.

    Returns
    -------
    FullInformation
        One row per such user (in user-id order); ``labels`` the action joke each user
        rated highest (the first among equal ratings); ``action_ids`` the action jokes.

    Raises
    ------
    ValueError
        Fewer than ``n_context + 2`` distinct jokes, a joke the data does not hold,
        ``n_context`` outside [1, len(jokes) - 2], fewer than 2 users who rated them all.

    Notes
    -----
    Riquelme, Tucker & Snoek (2018), "Deep Bayesian bandits showdown: an empirical
    comparison of Bayesian deep networks for Thompson sampling" (ICLR), take the users of
    Jester who rated all of 40 jokes: the ratings of 32 are the context, the other 8 the
    arms, the rating the reward. The bundled slice holds fewer complete users, so the set
    here is smaller and the reward is binary (a high rating), which the multiclass
    protocol's policies then meet as they meet labels (:func:`full_information_to_bandit`).
    """
    from evaluators._datasets import RatingData, load_jester

    ratings = data if isinstance(data, RatingData) else load_jester(data)
    ids = sorted({int(j) for j in jokes}) if not isinstance(jokes, (str, bytes)) else None
    if not ids or len(ids) < 3:
        raise ArgumentValueError("jokes", "at least 3 distinct joke ids", repr(jokes))
    n_context = check_int(n_context, "n_context", low=1, high=len(ids) - 2)
    threshold = check_float(threshold, "threshold")
    item_of = {int(v): i for i, v in enumerate(ratings.item_ids.tolist())}
    missing = [j for j in ids if j not in item_of]
    if missing:
        raise ArgumentValueError("jokes", f"jokes of the data ({ratings.source or 'ratings'})",
                                 f"joke {missing[0]}, which nobody rated")
    col = np.full(len(ratings.item_ids), -1)
    col[[item_of[j] for j in ids]] = np.arange(len(ids))
    keep = col[ratings.items] >= 0
    M = np.full((len(ratings.user_ids), len(ids)), np.nan)
    M[ratings.users[keep], col[ratings.items[keep]]] = ratings.ratings[keep]
    complete = np.isfinite(M).all(axis=1)
    if complete.sum() < 2:
        raise ArgumentValueError("jokes", "a set of jokes at least 2 users rated in full",
                                 f"{int(complete.sum())} such users")
    M = M[complete]
    ctx, acts = M[:, :n_context], M[:, n_context:]
    out = FullInformation(X=ctx / 10.0, rewards=(acts >= threshold).astype(np.float64),
                          labels=acts.argmax(axis=1).astype(np.int64),
                          action_ids=np.asarray(ids[n_context:], dtype=np.int64))
    for a in (out.X, out.rewards, out.labels, out.action_ids):
        a.setflags(write=False)
    return out


#: scikit-learn's bundled classification sets that :func:`load_classification` reads.
CLASSIFICATION_SETS = ("digits", "breast_cancer", "wine", "iris")


def load_classification(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of one of scikit-learn's bundled classification sets (on disk with the
    package; nothing is downloaded).

    ``"digits"``: 1,797 8x8 images, 10 classes (the test part of UCI's optdigits);
    ``"breast_cancer"``: 569 x 30, 2 classes; ``"wine"``: 178 x 13, 3 classes; ``"iris"``:
    150 x 4, 3 classes. ``X`` float64, ``y`` int64.

    Raises
    ------
    ValueError
        ``name`` not one of :data:`CLASSIFICATION_SETS`.
    ImportError
        scikit-learn is not installed (``pip install 'recloop[real]'``).
    """
    name = check_choice(name, "name", CLASSIFICATION_SETS)
    _sklearn("load_classification")
    from sklearn import datasets

    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64)
