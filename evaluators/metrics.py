"""Evaluation measures (public submodule): ``from evaluators import metrics``.

Regression (:func:`mae`, :func:`mse`, :func:`rmse`, :func:`mape`, :func:`tre`),
classification (:func:`precision`, :func:`recall`, :func:`accuracy`, :func:`f1`), top-k
ranking with trec_eval's definitions (:func:`hits_at_k`, :func:`hit_rate_at_k`,
:func:`precision_at_k`, :func:`recall_at_k`, :func:`dcg_at_k`, :func:`ndcg_at_k`,
:func:`map_at_k`, :func:`mrr_at_k`, all returning a :class:`RankingResult`) and beyond
accuracy (:func:`catalog_coverage`, :func:`novelty`, :func:`intra_list_diversity`,
:func:`serendipity`). Undefined values are ``nan`` with an :class:`UndefinedMetricWarning`.
"""

from evaluators._metrics import (
    RankingResult,
    UndefinedMetricWarning,
    accuracy,
    catalog_coverage,
    cooccurrence_similarity,
    dcg_at_k,
    f1,
    hit_rate_at_k,
    hits_at_k,
    intra_list_diversity,
    item_popularity,
    mae,
    map_at_k,
    mape,
    mrr_at_k,
    mse,
    ndcg_at_k,
    novelty,
    precision,
    precision_at_k,
    recall,
    recall_at_k,
    rmse,
    serendipity,
    tre,
)

__all__ = [
    "UndefinedMetricWarning", "RankingResult",
    "mae", "mse", "rmse", "mape", "tre",
    "precision", "recall", "accuracy", "f1",
    "hits_at_k", "hit_rate_at_k", "precision_at_k", "recall_at_k", "dcg_at_k", "ndcg_at_k",
    "map_at_k", "mrr_at_k",
    "catalog_coverage", "item_popularity", "novelty", "cooccurrence_similarity",
    "intra_list_diversity", "serendipity",
]
