"""Rating-file loaders (public submodule): ``from evaluators import datasets``.

Local files only, nothing is downloaded: :func:`load_movielens_100k` (``u.data``),
:func:`load_movielens_1m` (``ratings.dat``), :func:`load_movielens_10m` (``ratings.dat``),
:func:`load_movielens_20m` and :func:`load_movielens_25m` (``ratings.csv``; read in blocks
into int32 / float32), :func:`load_jester` (CSV or text) and :func:`load_csv` (any delimited
file, with a column mapping). Each returns a :class:`RatingData`; malformed files raise
:class:`DatasetFormatError` naming file and line. :func:`synthetic_ratings` draws rating
sets of MovieLens shapes for tests and benchmarks.
"""

# The private module's ``__all__`` is the single list of public names; this module only
# re-exports it.
from evaluators._datasets import *  # noqa: F403
from evaluators._datasets import __all__  # noqa: F401
