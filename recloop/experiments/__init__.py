"""Experiments: functions that run one cell of a scenario and return ``Measurement`` rows."""

from recloop.experiments._campaign_bias import (RECOMMENDER_KINDS, campaign_bias,
                                                plot_campaign_bias)

__all__: list[str] = [
    "RECOMMENDER_KINDS",
    "campaign_bias",
    "plot_campaign_bias",
]
