"""Cohort trees in numbers: what each Kueue cohort's children draw on it, for one quota scope.

Apart from placement/teams.py (which states the rule and builds the trees) so that the scope, the
ledger, the model and the warm start share one recursion. Pure numpy, in the scope's integer unit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from placement_models import PlacementRequest

#: "no limit" for integer comparisons (larger than any cluster's milli-GPU, milli-CPU or MiB).
UNLIMITED = 1 << 50


@dataclass(frozen=True)
class Tree:
    """The cohorts of one scope, in the scope's integer unit (see the module docstring for the rule)."""

    names: tuple[str, ...]  # (C,)
    parent: np.ndarray  # (C,) int: the parent cohort, -1 for a root
    team_cohort: np.ndarray  # (T,) int: each team's cohort, -1 for none (borrows and lends nothing)
    nominal: np.ndarray  # (C,) int: the cohort's own nominal
    lending: np.ndarray  # (C,) int: its lending limit (UNLIMITED when unset)
    borrowing: np.ndarray  # (C,) int: its borrowing limit (UNLIMITED when unset; a root borrows nothing)
    order: tuple[int, ...]  # children before parents
    team_lendable: np.ndarray  # (T,) int: the teams' lendable nominal (0 outside any cohort)

    def pools(self) -> tuple[np.ndarray, np.ndarray]:
        """(pool, lendable) per cohort: own nominal + children's lendable, and what of it the parent may take."""
        pool = self.nominal.astype(np.int64).copy()
        lend = np.zeros(len(self.names), dtype=np.int64)
        for t, c in enumerate(self.team_cohort.tolist()):
            if c >= 0:
                pool[c] += int(self.team_lendable[t])
        for c in self.order:
            lend[c] = min(int(self.lending[c]), int(pool[c]))
            if self.parent[c] >= 0:
                pool[self.parent[c]] += lend[c]
        return pool, lend

    def draws(self, alloc: np.ndarray, guaranteed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(over, draw) per cohort for teams holding `alloc`: what each takes from its parent, and what its
        children take from it."""
        pool, lend = self.pools()
        draw = np.zeros(len(self.names), dtype=np.int64)
        over = np.zeros(len(self.names), dtype=np.int64)
        for t, c in enumerate(self.team_cohort.tolist()):
            if c >= 0:
                draw[c] += max(0, int(alloc[t]) - int(guaranteed[t]))
        for c in self.order:
            over[c] = max(0, int(draw[c]) - int(pool[c]) + int(lend[c]))
            if self.parent[c] >= 0:
                draw[self.parent[c]] += over[c]
        return over, draw

    def limit(self, before: np.ndarray, guaranteed: np.ndarray) -> np.ndarray:
        """(C,) the most each cohort's children may draw on it: its pool plus what it may borrow (a root:
        nothing), or what running work already draws if more."""
        pool, _ = self.pools()
        extra = np.where(self.parent >= 0, self.borrowing, 0)
        return np.maximum(np.minimum(pool + extra, UNLIMITED), self.draws(before, guaranteed)[1])


def fair_weights(request: PlacementRequest) -> np.ndarray:
    """(T,) each team's weight in the fair share: its own `weight` times the `weight` of every cohort on its
    path up to (not including) its tree's root.

    Kueue's hierarchical fair sharing compares, at each cohort, its children (ClusterQueues and child
    cohorts) by their share of what they borrow divided by their weight, and admits for (or preempts toward)
    the lowest; so sibling subtrees end up borrowing in proportion to their weights. The entitlement here is
    one weighted water-fill over all teams (`entitlements`, it does not recurse per cohort), so a cohort's
    weight enters through its teams: multiplying the weight of every team below a cohort by the cohort's
    scales the subtree's claim against its siblings by exactly that factor and leaves the ratios inside the
    subtree unchanged. That is Kueue's split exactly when sibling subtrees hold the same total team weight
    (one queue per cohort, the usual shape), and otherwise keeps the water-fill's flat reading of a tree (a
    subtree of more teams claims more), as before cohorts had weights; with every cohort at weight 1 nothing
    changes. A root's weight is left out: Kueue has no sibling to compare it with, and separate trees never
    borrow from each other, so it must not move one tree's entitlements against another's.
    """
    cohorts = {c.name: c for c in request.cohorts}
    out = np.ones(len(request.teams))
    for i, team in enumerate(request.teams):
        weight, seen = team.weight, set()
        cohort = cohorts.get(team.cohort) if team.cohort is not None else None
        while cohort is not None and cohort.parent is not None and cohort.name not in seen:
            seen.add(cohort.name)
            weight *= cohort.weight
            cohort = cohorts.get(cohort.parent)
        out[i] = weight
    # a long path of extreme weights must not underflow to 0 or overflow (the water-fill divides by sums)
    return np.clip(out, 1e-12, 1e12)
