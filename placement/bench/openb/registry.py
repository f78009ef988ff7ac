"""The policy names the replay and the command line know, each a factory ``seed -> policy``.

Why this exists: it is the one module that knows every policy, the paper's peers and ours, so the
policies depend on nothing above them and the protocol (:mod:`placement.bench.openb.replay`) looks
them up by name. Add your own with :func:`register_policy`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from placement.bench.openb.cpsat_batch import CpsatBatchPolicy
from placement.bench.openb.cpsat_online import CpsatOnlinePolicy
from placement.bench.openb.oracle import RefusingOracle
from placement.bench.openb.policies import BestFitPolicy, FGDPolicy, RandomPolicy
from placement.bench.openb.scarce import ScarceLastPolicy

PolicyFactory = Callable[[int], Any]
#: name -> factory(seed) returning an online or a batch policy (:mod:`placement.bench.openb.cluster`).
POLICIES: dict[str, PolicyFactory] = {
    "random": RandomPolicy,
    "bestfit": BestFitPolicy,
    "fgd": FGDPolicy,
}


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Make a policy available to :func:`~placement.bench.openb.replay.run` and the command line."""
    POLICIES[name.lower()] = factory


def _cpsat_batch(window: int) -> PolicyFactory:
    def factory(seed: int) -> Any:
        return CpsatBatchPolicy(seed, window=window)

    return factory


# This bench's own CP-SAT models, not the product's (`placement.plan` compiles placement.compile): their names
# say so, in every table. The batch policies see a window of queued pods: report apart.
OWN_PREFIX = "bench-"
register_policy("bench-cpsat-online", CpsatOnlinePolicy)
register_policy("bench-cpsat-online-scarce", ScarceLastPolicy)  # with departures: rare nodes kept for rare pods
register_policy("bench-cpsat-batch", _cpsat_batch(200))
register_policy("bench-cpsat-batch50", _cpsat_batch(50))
#: the names these policies had before they said whose they are, still accepted on the command line
ALIASES = {name.removeprefix(OWN_PREFIX): name for name in POLICIES if name.startswith(OWN_PREFIX)}


#: Printed under every table that lists one of this bench's own policies.
OWN_LEGEND = (f"{OWN_PREFIX}*: this bench's own CP-SAT policies (placement/bench/openb), not the product's planner "
              "(placement.plan); the paper's peers are random, bestfit and fgd.")


def own_legend(names: list[str]) -> list[str]:
    """OWN_LEGEND, when a table lists one of this bench's own policies."""
    return [OWN_LEGEND] if any(name.lower().startswith(OWN_PREFIX) for name in names) else []


def canonical(name: str) -> str:
    """`name` as tables print it: an old name of one of this bench's own policies gives its new one."""
    return ALIASES.get(name.lower(), name)


def _oracle_refuse810(seed: int) -> Any:
    return RefusingOracle(seed, refuse_milli=810)


# Not a policy: an analysis oracle that knows more demand is coming (see placement.bench.openb.oracle).
register_policy("oracle-refuse810", _oracle_refuse810)


def policy_kind(policy: Any) -> str:
    """``online`` or ``batch W=…``: a batch sees its window of queued pods, so it is not like-for-like."""
    return f"batch W={int(policy.window)}" if hasattr(policy, "choose_batch") else "online"


def make_policy(name: str, seed: int) -> Any:
    """A fresh policy per seed, so no state (RNG, caches) leaks from one replay into the next."""
    try:
        factory = POLICIES[canonical(name).lower()]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    return factory(seed)
