"""A placement in problem space: how many pods of each task sit on each node.

Both the greedy baseline and the solver produce one; decode turns it into a wire-format Plan.
Keeping this the single currency means the two are compared on exactly the same terms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placement.problem import Problem


@dataclass
class Placement:
    counts: dict[tuple[int, int], int] = field(default_factory=dict)  # (task, node) -> pods
    evicted: set[int] = field(default_factory=set)  # running jobs (Problem.running indices) preempted
    #: views derived from a finished plan and built once (explain.py: who holds each node), so thousands
    #: of pending reasons do not rescan every placement; not part of the placement's identity
    memo: dict[str, object] = field(default_factory=dict, repr=False, compare=False)
    #: shared pods: (task, node) -> the shared GPU of each pod (placement/devices.py)
    shares: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    #: GPUs whose MIG layout the plan changes: (node, gpu) -> new layout ((profile, start), ...); None = whole
    mig_layouts: dict[tuple[int, int], tuple[tuple[str, int], ...] | None] = field(default_factory=dict)
    #: plain GPUs the plan turns into shared GPUs (policy.sharing_default): (node, gpu); `shares` may name them
    sharing_changes: set[tuple[int, int]] = field(default_factory=set)
    #: pods sharing a MIG instance: (task, node) -> the (gpu, start) of each pod's shared instance
    instance_shares: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=dict)
    #: MIG instances the plan makes shared (policy.sharing_default): (node, gpu, start), each an instance of the
    #: new layout of a GPU in `mig_layouts` (a free instance shared, or one a re-partition creates)
    shared_instances: set[tuple[int, int, int]] = field(default_factory=set)

    def add(self, task: int, node: int, pods: int = 1) -> None:
        if pods:
            self.counts[task, node] = self.counts.get((task, node), 0) + pods

    def task_pods(self, task: int) -> int:
        return sum(k for (t, _), k in self.counts.items() if t == task)

    def placed_jobs(self, problem: Problem) -> set[int]:
        per_job: dict[int, int] = {}
        for (t, _), k in self.counts.items():
            if k:
                j = problem.tasks[t].job
                per_job[j] = per_job.get(j, 0) + k
        return set(per_job)

    def freed(self, problem: Problem) -> np.ndarray:
        """(N, 3) resources the preempted running jobs give back."""
        out = np.zeros_like(problem.free)
        for r in self.evicted:
            out[problem.running[r].nodes] += problem.running[r].use
        return out

    def usage(self, problem: Problem) -> np.ndarray:
        """(N, 3) resources this placement takes, on top of running pods."""
        used = np.zeros_like(problem.free)
        for (t, n), k in self.counts.items():
            used[n] += problem.tasks[t].demand * k
        return used
