"""``python -m placement.bench.fleet ...``: the same as ``placement bench fleet ...``."""

from placement.bench.fleet.cli import main

raise SystemExit(main())
