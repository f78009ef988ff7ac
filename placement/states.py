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

What scales with the change today: reading and checking it (and what the caller sends). The merged request
is validated, indexed and planned whole, as a full call would be.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from placement_models import PlacementRequest, Plan
from placement_models.changes import ClusterChange

from placement.api import parse, plan

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
        self._states: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    def put(self, request: PlacementRequest | dict[str, Any]) -> str:
        """Keep a (validated) request as a new state; its id."""
        data = parse(request).model_dump(mode="json", exclude_unset=True)  # unset fields stay unset: presets
        state = uuid.uuid4().hex
        with self._lock:
            self._states[state] = data
            while len(self._states) > self.max_states:
                self._states.popitem(last=False)
        return state

    def request(self, change: ClusterChange | dict[str, Any]) -> PlacementRequest:
        """The full request a change against a kept state stands for (validated)."""
        change = change if isinstance(change, ClusterChange) else ClusterChange.model_validate(change)
        with self._lock:
            if change.base not in self._states:
                raise UnknownState(change.base)
            self._states.move_to_end(change.base)
            base = self._states[change.base]
        return PlacementRequest.model_validate(apply(base, change))

    def plan(self, request: PlacementRequest | dict[str, Any]) -> Planned:
        """Plan a full request and keep it: the state later changes are against."""
        req = parse(request)
        return Planned(self.put(req), plan(req))

    def plan_change(self, change: ClusterChange | dict[str, Any]) -> Planned:
        """Plan the request a change against a kept state stands for, and keep that request as a new state."""
        req = self.request(change)
        return Planned(self.put(req), plan(req))


def apply(base: dict[str, Any], change: ClusterChange) -> dict[str, Any]:
    """The request data `change` makes of `base` (JSON data with unset fields left out)."""
    out = dict(base)
    cluster = dict(base["cluster"])
    cluster["nodes"] = _changed(cluster.get("nodes", []), "name", change.nodes_removed, change.nodes_put,
                                "nodes_removed")
    started = {r.job for r in change.running_put}
    cluster["running"] = _changed(cluster.get("running", []), "job", change.running_removed, change.running_put,
                                  "running_removed")
    jobs = [j for j in base.get("jobs", []) if j["name"] not in started]  # a job that started leaves the queue
    out["jobs"] = _changed(jobs, "name", change.jobs_removed, change.jobs_put, "jobs_removed")
    out["cluster"] = cluster
    if change.policy is not None:
        out["policy"] = change.policy.model_dump(mode="json", exclude_unset=True)
    return out


def _changed(entries: list[dict[str, Any]], key: str, removed: list[str], put: list[Any],
             field: str) -> list[dict[str, Any]]:
    """Entries without the removed names, each put replacing its namesake in place or appended."""
    index = {e[key]: i for i, e in enumerate(entries)}
    for k, name in enumerate(removed):
        if name not in index:
            raise ChangeError((field, k), f"no '{name}' in the base state")
    gone = set(removed)
    out = [e for e in entries if e[key] not in gone]
    where = {e[key]: i for i, e in enumerate(out)}
    for item in put:
        data = item.model_dump(mode="json", exclude_unset=True)
        if data[key] in where:
            out[where[data[key]]] = data
        else:
            where[data[key]] = len(out)
            out.append(data)
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
