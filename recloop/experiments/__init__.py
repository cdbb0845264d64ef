"""Experiments: functions that run one cell of a scenario and return ``Measurement`` rows.

Each experiment module declares its scenario kinds (:class:`recloop._registry.EvaluationKind`)
in a tuple ``KINDS`` next to the function it runs; the registry reads them by module name
(:data:`recloop._registry.BUILTIN_MODULES`).
"""

from recloop.experiments._bandit_eval import (
                                 TruthComparison,
                                 bred_vs_replay,
                                 compare_to_truth,
                                 dynamic_news,
                                 plot_bred_vs_replay,
                                 plot_dynamic_news,
)
from recloop.experiments._campaign_bias import RECOMMENDER_KINDS, campaign_bias, plot_campaign_bias
from recloop.experiments._slate_ope import SLATE_OPE_PARAMS, plot_slate_ope, slate_ope

__all__: list[str] = [
    "RECOMMENDER_KINDS",
    "campaign_bias",
    "plot_campaign_bias",
    "TruthComparison",
    "bred_vs_replay",
    "compare_to_truth",
    "dynamic_news",
    "plot_bred_vs_replay",
    "plot_dynamic_news",
    "SLATE_OPE_PARAMS",
    "slate_ope",
    "plot_slate_ope",
]
