"""The greedy's choices for a pod sharing a MIG instance: best fit onto a shared instance with room, else
(re-partitioning on) a new shared instance, the cheapest way.

The device ledger (placement.baseline.devices) owns the node states and takes what is chosen here; these
functions only read states, so the ledger's trials and caches stay its own.
"""

from __future__ import annotations

from placement_models import Task

from placement.baseline.device_state import NodeState, free_options, repartition_node
from placement.catalog import MigGeometry, MigProfile
from placement.devices.pods import share_demand
from placement.devices.view import SharedInstance

#: (sort key, node, gpu, start); gpu -1: a plain GPU, partitioned now
Choice = tuple[tuple[int, ...], int, int, int]


def best_fit(state: NodeState, n: int, spec: Task, p: MigProfile, fresh: SharedInstance) -> Choice | None:
    """The fullest shared `p` instance of node n that still takes one pod of `spec` (memory counted as on a new
    instance of the profile: every instance of a profile on one node has the same)."""
    parts, need = share_demand(spec, fresh)
    best: Choice | None = None
    for (gpu, start), (pods, left, memory) in state.instances.items():
        g = state.mig.get(gpu)
        if g is None or gpu in state.converted or g.inst.get(start) != p.name:
            continue
        if pods >= 1 and left >= parts and memory >= need:
            key = (left - parts, n, gpu, start)
            if best is None or key < best[0]:
                best = (key, n, gpu, start)
    return best


def new_instance(state: NodeState, n: int, geo: MigGeometry, p: MigProfile, free_ok: bool, budget: bool
                 ) -> Choice | None:
    """The cheapest way node n makes one more shared `p` instance: a free instance or a re-partition on a GPU
    this plan changes already (no new MIG change), before one that changes another GPU (only within
    `budget`: policy.max_mig_changes); a free instance before a re-partition; `free_ok`: node n has a whole
    GPU free (a GPU counted in whole-GPU capacity may be used)."""
    options: list[Choice] = []
    for key, _, gpu, start in free_options(state, n, p, free_ok):
        fresh = not state.mig[gpu].changed()
        if fresh and not budget:
            continue
        options.append(((int(fresh), 0, *key[1:]), n, gpu, start))
    for key, _, gpu, start in repartition_node(state, n, geo, p, free_ok, budget):
        options.append(((key[1], 1, *key[2:]), n, gpu, start))
    return min(options) if options else None


def take(state: NodeState, gpu: int, start: int, fresh: SharedInstance, spec: Task) -> None:
    """One pod's share of instance (gpu, start) of the node: made shared first if it is not yet (`fresh` then
    gives its room), then its pods, share parts and memory parts left go down."""
    if (gpu, start) not in state.instances:
        state.mig[gpu].shared.add(start)
        state.mig[gpu].busy.add(start)
        state.instances[gpu, start] = [fresh.pods_left, fresh.parts_left, fresh.memory_left]
    parts, memory = share_demand(spec, fresh)
    left = state.instances[gpu, start]
    left[0] -= 1
    left[1] -= parts
    left[2] -= memory
