"""The simulated world, its Gymnasium environments, logs and ground truth."""

from simulator.logs import SOURCES, BanditLog, InteractionLog, LogFormatError

__all__ = [
    "BanditLog",
    "InteractionLog",
    "LogFormatError",
    "SOURCES",
]
