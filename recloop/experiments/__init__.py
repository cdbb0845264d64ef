"""Experiments: functions that run one cell of a scenario and return ``Measurement`` rows.

Each experiment module declares its scenario kind (:class:`recloop._registry.EvaluationKind`)
next to the function it runs; :data:`KINDS` collects them for the registry.
"""

from recloop.experiments import (
                                 _bandit_eval,
                                 _campaign_bias,
                                 _loo_cf,
                                 _offline_vs_online,
                                 _ope,
                                 _selection,
                                 _slate_ope,
)
from recloop.experiments._bandit_eval import (
                                 TruthComparison,
                                 bred_vs_replay,
                                 compare_to_truth,
                                 dynamic_news,
                                 plot_bred_vs_replay,
)
from recloop.experiments._campaign_bias import RECOMMENDER_KINDS, campaign_bias, plot_campaign_bias
from recloop.experiments._slate_ope import SLATE_OPE_PARAMS, plot_slate_ope, slate_ope

#: Every built-in evaluation kind, in the order ``scenarios/README.md`` lists them.
KINDS = (_campaign_bias.KIND, *_bandit_eval.KINDS, _loo_cf.KIND, _offline_vs_online.KIND,
         _ope.KIND, _selection.KIND, _slate_ope.KIND)

__all__: list[str] = [
    "KINDS",
    "RECOMMENDER_KINDS",
    "campaign_bias",
    "plot_campaign_bias",
    "TruthComparison",
    "bred_vs_replay",
    "compare_to_truth",
    "dynamic_news",
    "plot_bred_vs_replay",
    "SLATE_OPE_PARAMS",
    "slate_ope",
    "plot_slate_ope",
]
