"""The policy names ``placement bench cycles`` knows, each a factory ``options -> policy``.

Why this exists: the one module that knows every scheduler, the peers and ours, so the simulator
and the command line look policies up by name and depend on none of them. The peers and ours are
imported inside their factories: a run asking only for some policies never imports the others
(ours pulls in the solver).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from placement.bench.cycles.state import SchedulerPolicy


@dataclass(frozen=True)
class PolicyOptions:
    """What the command line hands every factory; each policy takes what it needs."""

    time_limit_s: float = 1.0  #: per plan call, for our optimizer
    seed: int = 0


PolicyFactory = Callable[[PolicyOptions], SchedulerPolicy]


def _peer(cls_name: str) -> PolicyFactory:
    def factory(options: PolicyOptions) -> SchedulerPolicy:
        peers = importlib.import_module("placement.bench.cycles.peers")
        return getattr(peers, cls_name)()

    factory.__doc__ = f"placement.bench.cycles.peers.{cls_name}()"
    return factory


def _ours(preset: str, name: str) -> PolicyFactory:
    def factory(options: PolicyOptions) -> SchedulerPolicy:
        ours = importlib.import_module("placement.bench.cycles.ours")
        return ours.Ours(time_limit_s=options.time_limit_s, seed=options.seed, preset=preset, name=name)

    factory.__doc__ = f"placement.bench.cycles.ours.Ours(preset={preset!r})"
    return factory


#: name -> factory, in the order the table lists them: the peers, then ours.
POLICIES: dict[str, PolicyFactory] = {
    "fifo": _peer("StrictFifo"),
    "volcano": _peer("VolcanoLike"),
    "kueue": _peer("KueueLike"),
    "easy": _peer("EasyBackfill"),
    "tiresias": _peer("TiresiasLike"),
    "ours": _ours("auto", "placement"),  # the default call: a call carrying time is `completion`
    "ours-las": _ours("las", "placement-las"),
    "ours-wait": _ours("bounded-wait", "placement-wait"),
}


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Make a policy available to the command line (tests register small ones)."""
    POLICIES[name.lower()] = factory


def make_policy(name: str, options: PolicyOptions | None = None) -> SchedulerPolicy:
    """A fresh policy per run, so no state leaks from one run into the next; ValueError for an unknown name."""
    try:
        factory = POLICIES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None
    return factory(options or PolicyOptions())
