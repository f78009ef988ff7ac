"""Best fit for one pod: which candidate node the greedy gives it, over an array or from an index.

The rule (`best_node`), among the candidates where the pod fits: nodes a pool would have to add come
last; then the fewest free GPUs (after the pod for GPU pods, before it for CPU pods: the same order);
then the least CPU left as a share of the node's, then the least memory left likewise; then the lowest
node index. `best_node` evaluates it over every candidate in a few vector passes.

The greedy asks at least once per gang, and at 12,500 nodes those passes cost 0.17 ms a question: three
seconds for 18,750 gangs. `Room` keeps the greedy's free capacity with a `best`-fit index instead: nodes
grouped by class (added or not, CPU and memory capacity) and free GPUs, each group sorted by free CPU,
free memory and index. Inside one class that order is the rule's, whatever the pod's demand (the
shares it compares divide by one capacity), so the first node of a group that fits is the group's best;
the rule's keys then compare the classes' bests. A pod that the first few nodes of each group do not fit
(filtered out, short of memory) falls back to `best_node`: the index is a shortcut to the same answer,
never another answer.
"""

from __future__ import annotations

from bisect import bisect_left, insort

import numpy as np

from placement.problem import Problem

#: Nodes `Room.best` may look at per question before it asks `best_node` instead.
SCAN = 64
#: `Room.best`'s answer when it gave up scanning (the caller then asks `best_node`).
_GAVE_UP = -1


def best_node(problem: Problem, cand: np.ndarray, free: np.ndarray, d: np.ndarray) -> int | None:
    """The best-fit node for one pod of demand `d` among `cand` on `free` (module docstring), None if none fits."""
    g, c, m = free[cand, 0], free[cand, 1], free[cand, 2]
    idx = np.flatnonzero((g >= d[0]) & (c >= d[1]) & (m >= d[2]))
    if idx.size == 0:
        return None
    real = idx[cand[idx] < len(problem.request.cluster.nodes)]  # nodes a pool would have to add: last resort
    if real.size:
        idx = real
    gpus = g[idx]
    idx = idx[gpus == gpus.min()]
    if idx.size > 1:
        nodes = cand[idx]
        cpu_left = (c[idx] - d[1]) / np.maximum(problem.capacity[nodes, 1], 1)
        idx = idx[cpu_left == cpu_left.min()]
        if idx.size > 1:
            mem_left = (m[idx] - d[2]) / np.maximum(problem.capacity[cand[idx], 2], 1)
            idx = idx[mem_left == mem_left.min()]
    return int(cand[idx].min())


def pods_at(row: tuple[int, int, int] | np.ndarray, d: tuple[int, int, int], most: int) -> int:
    """Pods of demand `d` to put at once on a node with `row` free, at most `most` (at least one: it fits)."""
    if not any(d):
        return most
    return max(1, min(most, *(int(row[i]) // d[i] for i in range(3) if d[i] > 0)))


class Room:
    """The greedy's free capacity (N, 3), changed in place, with a best-fit index when `indexed`.

    Every change while indexed goes through `add`, or is announced with `refresh`, so the index never
    disagrees with `free`.
    """

    def __init__(self, problem: Problem, free: np.ndarray, indexed: bool) -> None:
        self.problem = problem
        self.free = free
        self.indexed = indexed
        self.demands: dict[int, tuple[int, int, int]] = {}  # task -> its demand as Python ints
        if not indexed:
            return
        caps = np.maximum(problem.capacity[:, 1:], 1).tolist()
        added_from = len(problem.request.cluster.nodes)
        kinds = sorted({(n >= added_from, c1, c2) for n, (c1, c2) in enumerate(caps)})
        number = {kind: i for i, kind in enumerate(kinds)}
        self.kinds = kinds  # class -> (added, CPU capacity, memory capacity); real classes first
        self.cls = [number[(n >= added_from, c1, c2)] for n, (c1, c2) in enumerate(caps)]
        self.cls_of = np.array(self.cls, dtype=np.int64)
        self.rows: list[tuple[int, int, int]] = [(a, b, c) for a, b, c in free.tolist()]
        self.groups: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        for n, (f0, f1, f2) in enumerate(self.rows):
            self.groups.setdefault((self.cls[n], f0), []).append((f1, f2, n))
        for group in self.groups.values():
            group.sort()
        self.top = max((f0 for f0, _, _ in self.rows), default=0)
        #: per candidate array (by identity, kept alive here): it, a byte per node (1: candidate), and the
        #: classes it touches, real ones then added ones
        self.masks: dict[int, tuple[np.ndarray, bytes, tuple[list[int], list[int]]]] = {}

    def add(self, n: int, delta: tuple[int, int, int]) -> None:
        """free[n] += delta."""
        if not self.indexed:
            self.free[n] += delta
            return
        old = self.rows[n]
        new = (old[0] + delta[0], old[1] + delta[1], old[2] + delta[2])
        self.free[n] = new
        self._move(n, old, new)

    def refresh(self, nodes: np.ndarray) -> None:
        """`free` changed at `nodes` behind the index's back: index their new rows."""
        if not self.indexed:
            return
        for n, row in zip(nodes.tolist(), self.free[nodes].tolist(), strict=True):
            self._move(n, self.rows[n], (row[0], row[1], row[2]))

    def _move(self, n: int, old: tuple[int, int, int], new: tuple[int, int, int]) -> None:
        c = self.cls[n]
        group = self.groups[c, old[0]]
        del group[bisect_left(group, (old[1], old[2], n))]
        insort(self.groups.setdefault((c, new[0]), []), (new[1], new[2], n))
        self.rows[n] = new
        self.top = max(self.top, new[0])

    def place(self, t: int, counts: dict[tuple[int, int], int], limit: int | None = None) -> int:
        """Best fit, pod by pod, for task t on its candidates (baseline.gangs.place_task's rule and counts)."""
        task = self.problem.tasks[t]
        cand = task.candidates
        want = task.replicas if limit is None else min(limit, task.replicas)
        if cand.size == 0:
            return 0
        d = self.demands.get(t)
        if d is None:
            d = self.demands[t] = (int(task.demand[0]), int(task.demand[1]), int(task.demand[2]))
        placed = 0
        while placed < want:
            n = self.best(cand, d) if self.indexed else _GAVE_UP
            if n == _GAVE_UP:
                n = best_node(self.problem, cand, self.free, task.demand)
            if n is None:
                break
            k = pods_at(self.rows[n] if self.indexed else self.free[n], d, want - placed)
            self.add(n, (-d[0] * k, -d[1] * k, -d[2] * k))
            counts[t, n] = counts.get((t, n), 0) + k
            placed += k
        return placed

    def best(self, cand: np.ndarray, d: tuple[int, int, int]) -> int | None:
        """`best_node` from the index: the node, None when none fits, or _GAVE_UP after SCAN nodes."""
        _, mask, classes = self._mask(cand)
        budget = SCAN
        for group in classes:
            for level in range(d[0], self.top + 1):
                found: tuple[float, float, int] | None = None
                for c in group:
                    nodes = self.groups.get((c, level))
                    if not nodes:
                        continue
                    i, end = bisect_left(nodes, (d[1],)), len(nodes)
                    while i < end:  # the first node, in the class's order, that fits and is a candidate
                        f1, f2, n = nodes[i]
                        if f2 >= d[2] and mask[n]:
                            _, cap1, cap2 = self.kinds[c]
                            key = ((f1 - d[1]) / cap1, (f2 - d[2]) / cap2, n)  # as best_node computes them
                            found = key if found is None or key < found else found
                            break
                        budget -= 1
                        if budget < 0:
                            return _GAVE_UP
                        i += 1
                if found is not None:
                    return found[2]
        return None

    def _mask(self, cand: np.ndarray) -> tuple[np.ndarray, bytes, tuple[list[int], list[int]]]:
        hit = self.masks.get(id(cand))
        if hit is None or hit[0] is not cand:
            mask = np.zeros(len(self.rows), dtype=bool)
            mask[cand] = True
            touched = np.unique(self.cls_of[cand]).tolist()
            real = [c for c in touched if not self.kinds[c][0]]
            hit = self.masks[id(cand)] = (cand, mask.tobytes(), (real, [c for c in touched if self.kinds[c][0]]))
        return hit
