"""Tiresias' discretised two-dimensional LAS (2D-LAS, Gu et al., NSDI'19) as a peer of ``placement bench cycles``.

Why this exists: the one peer that needs no runtime estimates and preempts. Tiresias ranks jobs by
attained service, GPUs × time run so far (``TraceJob.attained_gpu_s``, kept by the simulator),
discretised into a few priority queues, so fresh jobs overtake long-running ones; it shows what
preemption buys when estimates are missing and what it costs in lost work.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from placement.bench.cycles.peers_common import Packer, fits
from placement.bench.cycles.state import Decision, Running, TraceJob


class TiresiasLike:
    """Discretised 2D-LAS: queues by attained GPU-time, FIFO within a queue, preemption across queues.

    A job's queue is the number of thresholds its attained service (GPU-seconds over all its runs) has
    reached: with the default ``thresholds_gpu_s=(3600.0,)`` there are two queues, Q0 below one
    GPU-hour and Q1 from then on (the defaults of the authors' public simulator, SymbioticLab/Tiresias:
    ``num_queue = 2``, first ``queue_limit`` 3600 in GPU-seconds for ``dlas-gpu``). Every cycle
    (``every_cycle``: demotion depends on time) the jobs are ranked by queue, then within a queue the
    running jobs before the waiting ones (as that simulator re-queues jobs that did not get GPUs behind
    the running ones), then by arrival (``submit_s``). Walking that ranking, a running job stays, and a
    waiting job starts if its pods fit on the free GPUs (best fit); if they do not, running jobs of lower
    queues (not yet passed in the walk) are preempted for it, the lowest-ranked first, as few as needed
    (a victim that turns out unneeded is spared); a waiting job that cannot fit even so is skipped and
    the walk goes on, so smaller jobs behind it can still start. Jobs running for less than
    ``min_lease_s`` in their current run are never preempted (our guard against thrashing; Tiresias
    itself has none, 600 s is our choice).

    ``TraceJob.priority`` is ignored, and so are runtime estimates. Not modelled: the paper's
    starvation knob (promotion after waiting long; off by default in that simulator) and its
    profile-based placement (consolidation skipped for models that do not need it): pods are
    consolidated by ``pods_of`` and placed best fit."""

    name = "tiresias"
    every_cycle = True

    def __init__(self, thresholds_gpu_s: Sequence[float] = (3600.0,), min_lease_s: float = 600.0) -> None:
        self.thresholds = sorted(float(t) for t in thresholds_gpu_s)
        self.min_lease_s = min_lease_s

    def queue_of(self, job: TraceJob) -> int:
        """0 for the highest-priority queue; one more per threshold the attained service reached."""
        return bisect.bisect_right(self.thresholds, job.attained_gpu_s)

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        if not queue:
            return Decision()
        free_now = Packer(free, gpus_per_node)  # free GPUs, plus those of the jobs preempted so far
        reach = Packer(free, gpus_per_node)  # free_now plus the GPUs of the preemptible jobs not yet ranked
        undecided: dict[str, Running] = {}
        rank: dict[str, tuple[int, int, float, str]] = {}
        items: list[tuple[tuple[int, int, float, str], Running | None, TraceJob | None]] = []
        for r in running:
            if now_s - r.start_s < self.min_lease_s:
                continue  # within its lease: stays, and its GPUs are out of reach
            key = (self.queue_of(r.job), 0, r.job.submit_s, r.job.name)
            rank[r.job.name] = key
            undecided[r.job.name] = r
            reach.give(r.nodes)
            items.append((key, r, None))
        if min(j.gpus for j in queue) > reach.total:
            return Decision()
        for job in queue:
            items.append(((self.queue_of(job), 1, job.submit_s, job.name), None, job))
        items.sort(key=lambda e: e[0])
        starts: list[tuple[TraceJob, dict[int, int]]] = []
        preempt: list[str] = []
        for _, r, job in items:
            if r is not None:
                if undecided.pop(r.job.name, None) is not None:
                    reach.take(r.nodes)  # ranked above every waiting job still to come: it stays
                continue
            assert job is not None
            if not reach.can(job.gpus):
                continue
            place = free_now.place(job.gpus)
            if place is None:
                victims = self.victims(job, free_now.free, undecided, rank, gpus_per_node)
                for v in victims:
                    free_now.give(v.nodes)
                    del undecided[v.job.name]
                    preempt.append(v.job.name)
                place = free_now.place(job.gpus)
                assert place is not None
            reach.take(place)
            starts.append((job, place))
        return Decision(starts=starts, preempt=preempt)

    @staticmethod
    def victims(job: TraceJob, free: np.ndarray, candidates: dict[str, Running],
                rank: dict[str, tuple[int, int, float, str]], gpus_per_node: int) -> list[Running]:
        """Running jobs to preempt so ``job`` fits: lowest-ranked first until it fits, then the
        higher-ranked of them dropped again while it still fits. The caller has checked that all the
        candidates together make room."""
        f = free.copy()
        chosen: list[Running] = []
        for r in sorted(candidates.values(), key=lambda r: rank[r.job.name], reverse=True):
            chosen.append(r)
            for n, g in r.nodes.items():
                f[n] += g
            if fits(f, job.gpus, gpus_per_node):
                break
        for r in list(reversed(chosen)):
            g_back = f.copy()
            for n, g in r.nodes.items():
                g_back[n] -= g
            if fits(g_back, job.gpus, gpus_per_node):
                f = g_back
                chosen.remove(r)
        return chosen
