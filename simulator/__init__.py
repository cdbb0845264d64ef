"""The simulated world, its Gymnasium environments, logs and ground truth."""

from simulator.logs import SOURCES, BanditLog, InteractionLog, LogFormatError
from simulator._config import AppealShock, CampaignConfig, WorldConfig
from simulator._presets import PRESETS, preset, register_preset
from simulator._world import WORLD_STREAMS, World

__all__ = [
    "AppealShock",
    "CampaignConfig",
    "PRESETS",
    "WORLD_STREAMS",
    "World",
    "WorldConfig",
    "preset",
    "register_preset",
    "BanditLog",
    "InteractionLog",
    "LogFormatError",
    "SOURCES",
]
