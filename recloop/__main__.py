"""``python -m recloop``: the same command line as ``recloop``."""

from recloop._cli import main

# The guard matters: worker processes started with "spawn" import the main module again.
if __name__ == "__main__":
    raise SystemExit(main())
