"""``python -m placement.bench.openb ...``: the same as ``placement bench openb ...``."""

from placement.bench.openb.cli import main

raise SystemExit(main())
