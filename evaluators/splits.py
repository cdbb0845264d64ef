"""Testing schemes (public submodule): ``from evaluators import splits``.

Seeded functions returning index arrays into a ratings table: :func:`train_test_split`,
:func:`temporal_split`, :func:`train_validation_test_split`, :func:`kfold`,
:func:`kfold_by_user` and :func:`leave_one_out`. Parts never overlap and always cover every
rating; the same ``rng`` gives the same split.
"""

from evaluators._splits import (
    TrainTestSplit,
    TrainValidationTestSplit,
    kfold,
    kfold_by_user,
    leave_one_out,
    temporal_split,
    train_test_split,
    train_validation_test_split,
)

__all__ = [
    "TrainTestSplit",
    "TrainValidationTestSplit",
    "train_test_split",
    "temporal_split",
    "train_validation_test_split",
    "kfold",
    "kfold_by_user",
    "leave_one_out",
]
