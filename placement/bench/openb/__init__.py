"""Replay of the FGD paper's evaluation (USENIX ATC'23) on the Alibaba openb GPU trace.

Why this exists: we claim better plans than greedy schedulers, and the only claim worth making is
one measured on data and a protocol nobody here wrote. Reproducing the published BestFit and FGD
numbers within half a point is what proves the harness; only then do numbers for our own
policies mean anything. The data is not shipped: pass ``--data DIR`` (or set ``PLACEMENT_DATA``) to
the openb traces from github.com/alibaba/clusterdata, folder cluster-trace-gpu-v2023.

Modules, each importing only from the ones listed before it:

* :mod:`~placement.bench.openb.trace` — the node and pod CSVs read into records (``Pod``, ``NodeTable``);
* :mod:`~placement.bench.openb.cluster` — the simulated cluster (``ClusterState``, ``Binding``) and
  what a policy is handed (``ReplayContext``, the online and batch policy interfaces);
* :mod:`~placement.bench.openb.policies` — the paper's peers: Random, BestFit, FGD;
* :mod:`~placement.bench.openb.cpsat_online`, :mod:`~placement.bench.openb.cpsat_batch` — this bench's
  own CP-SAT policies, not the product's planner: ``bench-cpsat-online`` and ``bench-cpsat-batch`` /
  ``bench-cpsat-batch50`` (windows of 200 / 50 queued pods; the names without ``bench-`` still work);
* :mod:`~placement.bench.openb.oracle` — where every policy's ceiling is, and the oracle that shows it;
* :mod:`~placement.bench.openb.registry` — policy names → factories;
* :mod:`~placement.bench.openb.replay` — the protocol (arrival order, replay loop, metric, ``run``);
* :mod:`~placement.bench.openb.loop`, :mod:`~placement.bench.openb.loop_load`,
  :mod:`~placement.bench.openb.loop_metrics` — the second protocol, ``--protocol departures``: pods
  leave after their lifetime, waiting pods are retried every cycle (a scheduler loop over time);
* :mod:`~placement.bench.openb.cli` — ``placement bench openb``: table, leftover summary, plot.

Adding a policy: write a class with ``name``, ``prepare(ctx)`` and either
``choose(state, pod) -> (node, gpu_indices) | None`` (online: sees one arrival) or
``window: int`` plus ``choose_batch(state, pods) -> list[(node, gpu_indices) | None]`` (batch:
sees ``window`` arrived pods at once and decides them together), and register a factory
``seed -> policy`` with :func:`register_policy`. The table lists batch policies apart.
"""

from placement.bench.openb.cli import main
from placement.bench.openb.registry import POLICIES, make_policy, register_policy
from placement.bench.openb.replay import replay, run
from placement.bench.openb.trace import DataNotFound, list_traces, load_nodes, load_trace, resolve_data_dir

__all__ = [
    "POLICIES",
    "DataNotFound",
    "list_traces",
    "load_nodes",
    "load_trace",
    "main",
    "make_policy",
    "register_policy",
    "replay",
    "resolve_data_dir",
    "run",
]
