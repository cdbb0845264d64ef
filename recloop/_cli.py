"""The ``recloop`` command line (replaced by the full harness in issue 7)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="recloop", description=__doc__)
    parser.add_argument("--version", action="store_true")
    args = parser.parse_args(argv)
    from recloop import __version__

    print(f"recloop {__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
