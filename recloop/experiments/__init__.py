"""Experiments: functions that run one cell of a scenario and return ``Measurement`` rows."""

__all__: list[str] = []
