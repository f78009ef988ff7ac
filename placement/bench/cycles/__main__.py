"""``python -m placement.bench.cycles ...``: the same as ``placement bench cycles ...``."""

from placement.bench.cycles.cli import main

raise SystemExit(main())
