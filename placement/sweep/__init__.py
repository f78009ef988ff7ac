"""Sweeps: a grid (or a list) of what-if changes, each point solved or simulated over a trace, locally or on Ray.

Why this exists: capacity questions come as sweeps ("spot nodes 0..64 × spot price × MIG layouts, over
last month's trace"), hundreds of solves or cycle simulations that one machine runs slowly and a Ray
cluster runs in minutes. Modules, each importing only from the ones before it:

* :mod:`~placement.sweep.grid` — axes and listed points → what-if scenarios, validated, at most 10,000;
* :mod:`~placement.sweep.trace` — trace mode: a point's request as the cycle simulator's cluster and policy;
* :mod:`~placement.sweep.run` — one point's evaluation (a top-level function any executor can run), the
  sweep over the shared executor (placement.executor), the Pareto front, the table;
* :mod:`~placement.sweep.plots` — PNGs (matplotlib, optional);
* :mod:`~placement.sweep.cli` — ``placement sweep`` (``register`` / ``run`` for the main command line).

Nothing heavy is imported here: ``placement sweep --help`` stays fast.
"""
