"""Registration of recloop's Gymnasium environments under the ``recloop/`` namespace."""


def register_envs() -> None:
    """Register the environments (idempotent); called on import and by Gymnasium's plugin hook."""
