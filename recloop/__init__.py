"""recloop: the harness that runs scenario files and puts every estimate beside the truth."""

__version__ = "0.1.0"

__all__ = ["__version__"]
