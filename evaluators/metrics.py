"""Evaluation measures (public submodule): ``from evaluators import metrics``.

Regression (:func:`mae`, :func:`mse`, :func:`rmse`, :func:`mape`, :func:`tre`),
classification (:func:`precision`, :func:`recall`, :func:`accuracy`, :func:`f1`), top-k
ranking with trec_eval's definitions (:func:`hits_at_k`, :func:`hit_rate_at_k`,
:func:`precision_at_k`, :func:`recall_at_k`, :func:`dcg_at_k`, :func:`ndcg_at_k`,
:func:`map_at_k`, :func:`mrr_at_k`, all returning a :class:`RankingResult`) and beyond
accuracy (:func:`catalog_coverage`, :func:`novelty`, :func:`intra_list_diversity`,
:func:`serendipity`). Undefined values are ``nan`` with an :class:`UndefinedMetricWarning`.
"""

# The private module's ``__all__`` is the single list of public names; this module only
# re-exports it.
from evaluators._metrics import *  # noqa: F403
from evaluators._metrics import __all__  # noqa: F401
