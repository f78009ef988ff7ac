"""Which (task, node) pairs get a variable: all of them on small clusters, the promising ones on big.

At 1,024 nodes every pending task can go to most nodes: ~900k integer variables, which CP-SAT
cannot even presolve within a scheduler cycle (CPSAT.md lessons 2-4). Above a pair budget each
task keeps its best-fit nodes, a spread sample of the rest (so the solver can still trade), and
every node the greedy plan used for it (so the greedy hint stays a feasible solution and the
returned plan is never worse than greedy). This restricts the search, not the rules: every
kept pair is exact, and the plan is still verified against the whole cluster.
"""

from __future__ import annotations

import math

import numpy as np

from placement import topology
from placement.problem import Problem
from placement.solution import Placement

#: Total (task, node) pairs above which candidate lists are trimmed.
MAX_PAIRS = 20_000
#: Nodes every task keeps at least, beyond what its gang needs.
MIN_PER_TASK = 12


def select(problem: Problem, baseline: Placement, max_pairs: int = MAX_PAIRS) -> list[np.ndarray]:
    full = [t.candidates for t in problem.tasks]
    total = sum(c.size for c in full)
    if total <= max_pairs:
        return full
    share = max(MIN_PER_TASK, max_pairs // max(1, len(problem.tasks)))
    used: dict[int, set[int]] = {}
    for (t, n), k in baseline.counts.items():
        if k:
            used.setdefault(t, set()).add(n)
    out = []
    for t, task in enumerate(problem.tasks):
        cand = task.candidates
        nodes_needed = math.ceil(task.replicas / max(1, int(np.median(task.max_per_node)))) if cand.size else 0
        keep = max(share, 2 * nodes_needed)
        if cand.size <= keep:
            out.append(cand)
            continue
        free = problem.free[cand]
        # best fit: fewest GPUs (then CPUs) left after one pod; CPU-only pods prefer GPU-less nodes
        primary = free[:, 0] - task.demand[0] if task.demand[0] > 0 else free[:, 0]
        order = np.lexsort((cand, free[:, 1] - task.demand[1], primary))
        best = order[: keep * 3 // 4]
        rest = order[keep * 3 // 4:]
        spread = rest[np.linspace(0, rest.size - 1, num=min(rest.size, keep - best.size)).astype(int)]
        chosen = set(cand[best].tolist()) | set(cand[spread].tolist()) | used.get(t, set())
        out.append(np.array(sorted(chosen), dtype=np.int64))
    return topology.coherent_candidates(problem, baseline.counts, out)  # gangs with topology: whole domains
