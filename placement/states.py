"""States: the cluster a scheduler's loop plans against, kept between calls so each cycle sends a change.

A loop at scale re-sends tens of megabytes of nodes and running jobs every cycle, nearly all of it what it
sent the cycle before. Here it sends the full request once (`States.plan` keeps it and names the state) and
afterwards a `ClusterChange` against a state it holds (placement_models.changes): the change is read alone, applied
to the state — removals drop entries in place, a put replaces the entry of the same name in place or
appends a new one, as a caller keeping its own list would — and the result is planned as the full request
it stands for, so the plan is the one that request gives (in deterministic mode, the same plan).

The store is bounded (`max_states`, least recently used first out): a state evicted, or an id never issued, is
`UnknownState`, naming the `base` field; a change naming a node or job the state lacks is a `ChangeError`
naming the entry. Neither ever yields a plan of some other cluster. `diff` gives the change between two
requests, for callers that keep whole requests and for tests.

What scales with the change: what the caller sends and what is read and validated entry by entry; the request
it makes is checked again only where entries meet (its cross-references), then indexed and planned whole, as
a full call would be.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from placement_models import ErrorList, PlacementRequest, Plan, presets
from placement_models.base import MAX_JOBS, MAX_NODES, MAX_RUNNING_JOBS, MAX_RUNNING_PODS_TOTAL
from placement_models.changes import ClusterChange

from placement.api import parse, plan
from placement.budget import collector_paused

#: states kept by default: a few loops, each holding its last state or two
MAX_STATES = 16


class UnknownState(KeyError):
    """A change against a state this store does not hold (never issued, or evicted as least recently used)."""

    field = ("base",)

    def __str__(self) -> str:
        return f"base: unknown or expired state '{self.args[0]}': send the full request again"


class ChangeError(ValueError):
    """A change that does not apply to its base state; `field` is the path of the entry to blame."""

    def __init__(self, field: tuple[str | int, ...], message: str) -> None:
        super().__init__(f"{'.'.join(map(str, field))}: {message}")
        self.field = field


@dataclass(frozen=True)
class Planned:
    """A plan and the id of the state it was planned for (the base of the next change)."""

    state: str
    plan: Plan


class States:
    """A bounded store of request states (thread-safe); see the module docstring."""

    def __init__(self, max_states: int = MAX_STATES) -> None:
        if max_states < 1:
            raise ValueError("max_states must be at least 1")
        self.max_states = max_states
        self._states: OrderedDict[str, PlacementRequest] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    def put(self, request: PlacementRequest | dict[str, Any]) -> str:
        """Keep a (validated) request as a new state; its id."""
        req = parse(request)
        state = uuid.uuid4().hex
        with self._lock:
            self._states[state] = req
            while len(self._states) > self.max_states:
                self._states.popitem(last=False)
        return state

    def request(self, change: ClusterChange | dict[str, Any]) -> PlacementRequest:
        """The full request a change against a kept state stands for, checked as a full request is."""
        change = change if isinstance(change, ClusterChange) else ClusterChange.model_validate(change)
        with self._lock:
            if change.base not in self._states:
                raise UnknownState(change.base)
            self._states.move_to_end(change.base)
            base = self._states[change.base]
        with collector_paused():  # new lists over the base's entries: a full collection would scan them all again
            return apply(base, change)

    def plan(self, request: PlacementRequest | dict[str, Any]) -> Planned:
        """Plan a full request and keep it: the state later changes are against."""
        req = parse(request)
        return Planned(self.put(req), plan(req))

    def plan_change(self, change: ClusterChange | dict[str, Any]) -> Planned:
        """Plan the request a change against a kept state stands for, and keep that request as a new state."""
        req = self.request(change)
        return Planned(self.put(req), plan(req))


def apply(base: PlacementRequest, change: ClusterChange) -> PlacementRequest:
    """The request `change` makes of `base`. Every entry is already validated (the base's, the change's), so
    only what crosses entries is checked again: the lists' bounds and the request's cross-references (names
    unique, pods on nodes that exist, GPUs in range and not double-booked, teams, pools, workloads), by the
    request's own validator, as a full parse runs it."""
    started = {r.job for r in change.running_put}
    nodes = _changed(base.cluster.nodes, "name", change.nodes_removed, change.nodes_put, "nodes_removed")
    running = _changed(base.cluster.running, "job", change.running_removed, change.running_put, "running_removed")
    jobs = _changed([j for j in base.jobs if j.name not in started], "name", change.jobs_removed, change.jobs_put,
                    "jobs_removed")
    errors = ErrorList("PlacementRequest")
    for loc, items, most in ((("cluster", "nodes"), nodes, MAX_NODES),
                             (("cluster", "running"), running, MAX_RUNNING_JOBS), (("jobs",), jobs, MAX_JOBS)):
        if len(items) > most:
            errors.add(loc, f"at most {most} entries, not {len(items)}", len(items))
    if not nodes:
        errors.add(("cluster", "nodes"), "the change leaves no node", 0)
    pods = sum(len(r.pods) for r in running)
    if pods > MAX_RUNNING_PODS_TOTAL:
        errors.add(("cluster", "running"), f"at most {MAX_RUNNING_PODS_TOTAL} running pods in all, not {pods}", pods)
    errors.raise_if_any()
    update: dict[str, Any] = {"cluster": base.cluster.model_copy(update={"nodes": nodes, "running": running}),
                              "jobs": jobs}
    if change.policy is not None:
        update["policy"] = change.policy
    out = presets.fresh(base.model_copy(update=update))  # no answers cached for the base
    return out.check_references()


def _changed(entries: list[Any], key: str, removed: list[str], put: list[Any], field: str) -> list[Any]:
    """Entries without the removed names, each put replacing its namesake in place or appended."""
    names = {getattr(e, key) for e in entries}
    for k, name in enumerate(removed):
        if name not in names:
            raise ChangeError((field, k), f"no '{name}' in the base state")
    gone = set(removed)
    out = [e for e in entries if getattr(e, key) not in gone]
    where = {getattr(e, key): i for i, e in enumerate(out)}
    for item in put:
        name = getattr(item, key)
        if name in where:
            out[where[name]] = item
        else:
            where[name] = len(out)
            out.append(item)
    return out


def diff(old: PlacementRequest | dict[str, Any], new: PlacementRequest | dict[str, Any], base: str) -> ClusterChange:
    """The change that makes `new` of `old` (entries compared as sent): removals, then puts of what is new or
    differs. Applied to `old`, it gives `new` when `new` keeps `old`'s order and appends what it adds."""
    a = parse(old).model_dump(mode="json", exclude_unset=True)
    b = parse(new).model_dump(mode="json", exclude_unset=True)
    fields: dict[str, Any] = {"base": base}
    for (section, key), (gone, put) in {("nodes", "name"): ("nodes_removed", "nodes_put"),
                                         ("running", "job"): ("running_removed", "running_put")}.items():
        before = {e[key]: e for e in a["cluster"].get(section, [])}
        after = {e[key]: e for e in b["cluster"].get(section, [])}
        fields[gone] = [name for name in before if name not in after]
        fields[put] = [e for name, e in after.items() if before.get(name) != e]
    started = {r["job"] for r in fields["running_put"]}
    before = {e["name"]: e for e in a.get("jobs", []) if e["name"] not in started}
    after = {e["name"]: e for e in b.get("jobs", [])}
    fields["jobs_removed"] = [name for name in before if name not in after]
    fields["jobs_put"] = [e for name, e in after.items() if before.get(name) != e]
    if a.get("policy") != b.get("policy"):
        fields["policy"] = b.get("policy", {})
    return ClusterChange.model_validate(fields)
