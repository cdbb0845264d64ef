"""Testing schemes (public submodule): ``from evaluators import splits``.

Seeded functions returning index arrays into a ratings table: :func:`train_test_split`,
:func:`temporal_split`, :func:`train_validation_test_split`, :func:`kfold`,
:func:`kfold_by_user` and :func:`leave_one_out`. Parts never overlap and always cover every
rating; the same ``rng`` gives the same split.
"""

# The private module's ``__all__`` is the single list of public names; this module only
# re-exports it.
from evaluators._splits import *  # noqa: F403
from evaluators._splits import __all__  # noqa: F401
