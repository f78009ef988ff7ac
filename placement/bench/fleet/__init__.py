"""A mixed-fleet scheduling benchmark, heterogeneity-aware as in Gavel (OSDI'20): ``placement bench fleet``.

Why this exists: on a fleet of several GPU models the same job runs at very different speeds, and not by
one factor for all jobs, so where a scheduler puts a job decides how long it takes. This bench replays
Gavel's published job mix (its measured K80/P100/V100 throughputs, Philly sizes and durations, Poisson
arrivals) through the cycles simulator on a fleet of a third each V100, P100 and K80 nodes, and compares
our optimizer called heterogeneity-agnostic, a Gavel-like max-min fairness scheduler, and our optimizer
told each job's speeds.

Modules, each importing only from those before it (and from ``placement.bench.cycles`` / ``placement.api``):

* :mod:`~placement.bench.fleet.data` — the throughput table shipped with the package, and how to rebuild it;
* :mod:`~placement.bench.fleet.mix` — the fleet and the seeded job generator;
* :mod:`~placement.bench.fleet.gavel` — the Gavel-like policy;
* :mod:`~placement.bench.fleet.optimizer` — our optimizer's loop with GPU models (and speeds);
* :mod:`~placement.bench.fleet.report` — metrics and the table;
* :mod:`~placement.bench.fleet.cli` — ``placement bench fleet``.
"""

from placement.bench.fleet.cli import POLICIES, main

__all__ = ["POLICIES", "main"]
