"""The simulated world, its Gymnasium environments, logs and ground truth."""

from simulator._bandit import LinearBanditConfig, LinearBanditEnv
from simulator._bandit import true_ctr as bandit_ctr
from simulator._calibrate import CalibratedWorld, CalibrationWarning, FitInfo, calibrate
from simulator._click_models import SLATE_CLICK_MODELS, SLATE_REWARDS
from simulator._config import AppealShock, CampaignConfig, FittedArrays, WorldConfig
from simulator._drift import DRIFT_MODELS, DriftFit, fit_drift
from simulator._envs import RecommendationConfig, RecommendationEnv
from simulator._fidelity import (
                                DISTRIBUTIONS,
                                Distance,
                                FidelityReport,
                                HoldoutFidelity,
                                NoiseBand,
                                NoiseBandReport,
                                fidelity,
                                holdout_fidelity,
                                holdout_split,
                                noise_bands,
)
from simulator._logging import LogTruth, collect_log
from simulator._presets import PRESETS, preset, register_preset
from simulator._ratings import RatingModel
from simulator._registration import register_envs
from simulator._sessions import SessionLaw, SessionSchedule
from simulator._slate_log import SlateLog
from simulator._slate_logging import SlateLogTruth, collect_slate_log
from simulator._slate_truth import SlateValue, slate_policy_value
from simulator._truth import (
                                OnlineValue,
                                context_atoms,
                                online_value,
                                oracle_value,
                                static_policy_value,
)
from simulator._vector import LinearBanditVectorEnv, RecommendationVectorEnv
from simulator._world import WORLD_STREAMS, World
from simulator.logs import SOURCES, BanditLog, InteractionLog, LogFormatError

__all__ = [
    "AppealShock",
    "CalibratedWorld",
    "CalibrationWarning",
    "FitInfo",
    "FittedArrays",
    "calibrate",
    "DISTRIBUTIONS",
    "Distance",
    "FidelityReport",
    "fidelity",
    "HoldoutFidelity",
    "holdout_fidelity",
    "holdout_split",
    "NoiseBand",
    "NoiseBandReport",
    "noise_bands",
    "DRIFT_MODELS",
    "DriftFit",
    "fit_drift",
    "RatingModel",
    "SessionLaw",
    "SessionSchedule",
    "CampaignConfig",
    "PRESETS",
    "WORLD_STREAMS",
    "World",
    "WorldConfig",
    "preset",
    "register_preset",
    "BanditLog",
    "InteractionLog",
    "LinearBanditConfig",
    "bandit_ctr",
    "context_atoms",
    "LinearBanditEnv",
    "LinearBanditVectorEnv",
    "RecommendationConfig",
    "RecommendationEnv",
    "RecommendationVectorEnv",
    "LogTruth",
    "OnlineValue",
    "LogFormatError",
    "SOURCES",
    "collect_log",
    "online_value",
    "oracle_value",
    "static_policy_value",
    "SLATE_CLICK_MODELS",
    "SLATE_REWARDS",
    "SlateLog",
    "SlateLogTruth",
    "SlateValue",
    "collect_slate_log",
    "slate_policy_value",
]

register_envs()
