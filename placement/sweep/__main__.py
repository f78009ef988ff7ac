"""``python -m placement.sweep REQUEST --grid ...`` (the same as ``placement sweep``)."""

import sys

from placement.sweep.cli import main

if __name__ == "__main__":
    sys.exit(main())
