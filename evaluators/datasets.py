"""Rating-file loaders (public submodule): ``from evaluators import datasets``.

Local files only, nothing is downloaded: :func:`load_movielens_100k` (``u.data``),
:func:`load_movielens_1m` (``ratings.dat``), :func:`load_jester` (CSV or text) and
:func:`load_csv` (any delimited file, with a column mapping). Each returns a
:class:`RatingData`; malformed files raise :class:`DatasetFormatError` naming file and line.
"""

from evaluators._datasets import (
    DatasetFormatError,
    RatingData,
    load_csv,
    load_jester,
    load_movielens_1m,
    load_movielens_100k,
)

__all__ = [
    "DatasetFormatError",
    "RatingData",
    "load_movielens_100k",
    "load_movielens_1m",
    "load_jester",
    "load_csv",
]
