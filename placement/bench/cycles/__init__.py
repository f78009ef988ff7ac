"""The scheduler loop over a real trace: ``placement bench cycles``.

Why this exists: a plan that packs one snapshot well can still starve gangs or throw work away
once jobs arrive and leave for weeks. This bench replays a real trace (Microsoft ITP jobs, or the
whole-GPU pods of Alibaba openb) through a cycle-by-cycle scheduler loop and measures waits,
completions, utilisation and lost work for FIFO-, Volcano-, Kueue-, Slurm-backfill- and
Tiresias-like peers and for our optimizer, each seeing runtime estimates only. The data is not
shipped: pass ``--data DIR`` (or set ``PLACEMENT_DATA``).

Modules, each importing only from the ones listed before it:

* :mod:`~placement.bench.cycles.state` — what the simulator and every policy share (``TraceJob``,
  ``Running``, ``Decision``, the ``SchedulerPolicy`` protocol, ``pods_of``);
* :mod:`~placement.bench.cycles.traces` — the ITP and openb CSVs read into jobs, slices, estimates;
* :mod:`~placement.bench.cycles.sim` — the event loop (``simulate``, ``SimConfig``, ``SimResult``);
* :mod:`~placement.bench.cycles.report` — metrics, the Markdown table, the plot;
* :mod:`~placement.bench.cycles.registry` — policy names → factories (peers and ours, imported lazily);
* :mod:`~placement.bench.cycles.cli` — ``placement bench cycles``.

Adding a policy: a class with ``name`` and ``cycle(now_s, queue, running, free, gpus_per_node) ->
Decision`` (set ``every_cycle = True`` to be called every cycle, not only when something changed),
registered with :func:`register_policy`.
"""

from placement.bench.cycles.cli import main
from placement.bench.cycles.registry import POLICIES, PolicyOptions, make_policy, register_policy
from placement.bench.cycles.sim import InvalidDecision, SimConfig, SimResult, simulate
from placement.bench.cycles.state import Decision, Running, SchedulerPolicy, TraceJob, pods_of
from placement.bench.cycles.traces import DataNotFound, load, parse_trace, with_estimates

__all__ = [
    "POLICIES",
    "DataNotFound",
    "Decision",
    "InvalidDecision",
    "PolicyOptions",
    "Running",
    "SchedulerPolicy",
    "SimConfig",
    "SimResult",
    "TraceJob",
    "load",
    "main",
    "make_policy",
    "parse_trace",
    "pods_of",
    "register_policy",
    "simulate",
    "with_estimates",
]
