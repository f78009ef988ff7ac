"""The devices of one node that running pods already hold, handed out in index order.

Kubernetes does not say which physical GPU, MIG instance or GPU share a running pod holds, so
the importer assigns them in order, node by node, as it reads the running pods.
"""

from __future__ import annotations

from fractions import Fraction

from placement.catalog import normalize_profile
from placement.kube.nodes import NodeInfo


class Ledger:
    """Which devices of one node running pods already hold, handed out in index order."""

    def __init__(self, node: NodeInfo) -> None:
        healthy = [g for g in range(node.gpus) if g not in node.unhealthy]
        self.whole_free = [g for g in healthy if g not in node.mig and node.sharing is None]
        self.mig_free = [(g, p, s) for g, layout in sorted(node.mig.items()) for p, s in layout
                         if node.mig_ways(p) is None]
        #: shared MIG instances: (gpu, profile, start) -> (replicas left, part of the instance left)
        self.mig_left = {(g, p, s): (ways[1], Fraction(1)) for g, layout in sorted(node.mig.items()) for p, s in layout
                         if (ways := node.mig_ways(p)) is not None}
        replicas = node.sharing[1] if node.sharing else 0
        self.share_left = {g: (replicas, Fraction(1)) for g in healthy} if node.sharing else {}

    def whole(self, n: int) -> list[int] | None:
        if n > len(self.whole_free):
            return None
        taken, self.whole_free = self.whole_free[:n], self.whole_free[n:]
        return taken

    def mig(self, profile: str) -> tuple[int, str, int] | None:
        for k, (_, p, _) in enumerate(self.mig_free):
            if normalize_profile(p) == normalize_profile(profile):
                return self.mig_free.pop(k)
        return None

    def mig_share(self, profile: str, fraction: Fraction) -> tuple[int, str, int] | None:
        """A shared instance of `profile` with a replica and `fraction` of it left, the first in index order."""
        for key, (slots, left) in self.mig_left.items():
            if normalize_profile(key[1]) == normalize_profile(profile) and slots >= 1 and left >= fraction:
                self.mig_left[key] = (slots - 1, left - fraction)
                return key
        return None

    def share(self, fraction: Fraction) -> int | None:
        for g, (slots, left) in self.share_left.items():
            if slots >= 1 and left >= fraction:
                self.share_left[g] = (slots - 1, left - fraction)
                return g
        return None
