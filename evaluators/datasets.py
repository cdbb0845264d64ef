"""Data loaders (public submodule): ``from evaluators import datasets``.

Local files only, nothing is downloaded.

Ratings: :func:`load_movielens_100k` (``u.data``), :func:`load_movielens_1m`
(``ratings.dat``), :func:`load_movielens_10m` (``ratings.dat``), :func:`load_movielens_20m`
and :func:`load_movielens_25m` (``ratings.csv``; read in blocks into int32 / float32),
:func:`load_jester` (CSV or text) and :func:`load_csv` (any delimited file, with a column
mapping). Each returns a :class:`RatingData`; malformed files raise
:class:`DatasetFormatError` naming file and line. :func:`synthetic_ratings` draws rating
sets of MovieLens shapes for tests and benchmarks.

Bandit logs from real data: :func:`load_open_bandit` (the Open Bandit Dataset's CSVs, with
positions), :func:`read_bts_prior` and :func:`bernoulli_ts_action_dist` (its Bernoulli TS
evaluation policy), :func:`multiclass_to_bandit` (labelled data as a log with exact target
values) and :func:`load_classification` (scikit-learn's bundled sets).

Your own log: :func:`read_bandit_log` (a CSV or Parquet file, columns found by name, ids
encoded; :meth:`simulator.logs.BanditLog.from_frame` for a DataFrame) and :func:`read_target`
(a target policy as an array, a ``.npy``, a CSV in your own ids or a callable).
"""

# The private modules' ``__all__`` are the lists of public names; this module only
# re-exports them.
from evaluators._datasets import *  # noqa: F403
from evaluators._datasets import __all__ as _ratings
from evaluators._real_data import *  # noqa: F403
from evaluators._real_data import __all__ as _real
from evaluators._user_log import *  # noqa: F403
from evaluators._user_log import __all__ as _user

__all__ = [*_ratings, *_real, *_user]
