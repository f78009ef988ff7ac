"""What one import knows as it goes, shared by the readers of each kind of object.

`ImportState` holds the options, the objects by kind, the problems and warnings collected so far
and what earlier steps found (nodes, queues, priority classes, topology levels). The readers
(cluster, volcano, podgroups, kueue, running, assembly) are mixins over it; placement.kube.importer
combines them and runs them in order. The helpers here are the ones several readers use: priority
class lookup, unique job names, topology level names, tasks from pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from placement.kube import jobs as J
from placement.kube.jobs import Draft, PodInfo
from placement.kube.ledger import Ledger
from placement.kube.nodes import CLIQUE, HOSTNAME, POOL_LABELS, NodeInfo
from placement.kube.objects import KubeError, Obj, Problem, View, Warnings, check_kind
from placement.kube.origins import Origins
from placement.kube.pods import read_shape
from placement.kube.queues import Queues

DEFAULT_LEVELS = ["nvlink_domain", "rack", "block"]


@dataclass
class ImportOptions:
    """What the objects do not say: which labels mean rack and block, pool prices, solver policy."""

    rack_label: str | None = None
    block_label: str | None = None
    pool_labels: tuple[str, ...] = POOL_LABELS
    #: pool name -> price per GPU-hour (pools are named after node groups or capacity types)
    prices: dict[str, float] = field(default_factory=dict)
    #: unknown kinds become warnings instead of errors (a whole `kubectl get all -A` dump)
    ignore_unknown: bool = False
    #: merged into the request's policy (time_limit_s, workers, seed, preemption, ...)
    policy: dict[str, Any] = field(default_factory=dict)


class ImportState:
    """The state of one import and the helpers every reader of it uses."""

    pools: list[dict[str, Any]]  # set by the node reader

    def __init__(self, objects: list[Obj], options: ImportOptions) -> None:
        self.options = options
        self.warnings = Warnings()
        self.problems: list[Problem] = []
        self.by_kind: dict[tuple[str, str], list[Obj]] = {}
        for obj in objects:
            reason = check_kind(obj)
            if reason is None:
                self.by_kind.setdefault((obj.group, obj.kind), []).append(obj)
                if obj.generated:
                    self.warnings.add(obj.where, "metadata.generateName", f"no name yet: imported as '{obj.name}' "
                                      "(the API server adds 5 random characters when it creates the object)")
            elif options.ignore_unknown:
                self.warnings.add(obj.where, "apiVersion", f"{reason}: ignored")
            else:
                self.problems.append(Problem(obj.where, "kind", reason + " (ignore_unknown skips such objects)"))
        self.origins = Origins()
        self.nodes: list[NodeInfo] = []
        self.queues = Queues()
        self.levels: list[str] = list(DEFAULT_LEVELS)
        self.label_level: dict[str, str] = {}
        self.tiers: dict[int | str, str] = {}  # Volcano HyperNode tier (number or tierName) -> level
        self.classes: dict[str, int] = {}
        self.workload_classes: dict[str, int] = {}
        self.default_priority = 0
        self.drafts: list[Draft] = []
        self.running: list[dict[str, Any]] = []
        self.names: set[str] = set()
        self.ledgers: dict[str, Ledger] = {}
        self.kai_shares: list[Fraction] = []  # the GPU fractions KAI pods ask for (KAI shares any GPU)

    def of(self, group: str, kind: str) -> list[Obj]:
        return self.by_kind.get((group, kind), [])

    def attempt(self, fn: Any, *args: Any) -> Any:
        """Run one object's reader; its errors are collected so one run reports every broken object."""
        try:
            return fn(*args)
        except KubeError as exc:
            self.problems.extend(exc.problems)
            return None

    def _class(self, view: View, key: str) -> int | None:
        name = view.text(key)
        if not name:
            return None
        if name not in self.classes:
            self.warnings.add(view.obj.where, view.where(key), f"PriorityClass '{name}' is not in the input: "
                              f"priority {self.default_priority}")
            return self.default_priority
        return self.classes[name]

    def kai_class(self, view: View, key: str) -> int:
        """A priority class KAI names by label: the cluster's PriorityClass, else KAI's own default classes
        (which its installation creates, so they are often missing from an export of workloads)."""
        name = view.text(key) or ""
        if name in self.classes or name not in J.KAI_CLASSES:
            return first_given(self._class(view, key), self.default_priority)
        self.warnings.add(view.obj.where, view.where(key), f"PriorityClass '{name}' is not in the input: KAI's "
                          f"default value {J.KAI_CLASSES[name]}")
        return J.KAI_CLASSES[name]

    def _job_name(self, namespace: str, name: str, kind: str) -> str:
        base = f"{namespace}/{name}"
        candidate = base if base not in self.names else f"{base}~{kind}"
        k = 2
        while candidate in self.names:
            candidate, k = f"{base}~{kind}-{k}", k + 1
        self.names.add(candidate)
        return candidate

    def level_of(self, view: View, key: str, value: Any) -> str:
        """A topology level named by a request: a level, a level's node label, or a tier number."""
        if value == HOSTNAME or value == "node":
            return "node"
        if isinstance(value, (int, str)) and not isinstance(value, bool) and value in self.tiers:
            return self.tiers[value]
        alias = {"rack": self.options.rack_label, "block": self.options.block_label, "nvlink_domain": CLIQUE}
        if isinstance(value, str) and self.label_level.get(alias.get(value) or "") in self.levels:
            return self.label_level[alias[value] or ""]
        if isinstance(value, str) and value in self.levels:
            return value
        if isinstance(value, str) and self.label_level.get(value) in self.levels:
            return self.label_level[value]
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= len(self.levels):
            self.warnings.add(view.obj.where, view.where(key), f"tier {value} is taken as the {value}. level of "
                              f"{self.levels} (narrowest first; no Volcano HyperNodes in the input)")
            return self.levels[value - 1]
        known = ", ".join(["node", *self.levels])
        view.fail(key, f"'{value}' is not a topology level of this cluster (levels: {known}; a Kueue/KAI "
                  "Topology or the rack/block label options define them)")

    def _add_pod_tasks(self, draft: Draft, pods: list[PodInfo]) -> None:
        for name, shape, members in J.split_tasks(pods):
            first = members[0].obj  # pods were read quietly; say once per task what it cannot honour
            read_shape(first.view().sub("spec"), first.annotations(), first.meta, self.warnings)
            draft.tasks.append((name, shape, len(members), [p.obj.name for p in members]))
            draft.k8s_tasks[name] = members[0].task


def first_given(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def annotations_of(template: View) -> dict[str, str]:
    return template.sub("metadata").string_map("annotations")


def pods_priority(pods: list[PodInfo], importer: ImportState, explicit_only: bool = False) -> int | None:
    """The highest priority of the pods: KAI's `priorityClassName` label (KAI reads it before the spec,
    and admission never copies it into `spec.priority`), else `spec.priority` (set by admission), else
    their PriorityClass."""
    labelled = [importer.kai_class(p.obj.meta.sub("labels"), J.KAI_PRIORITY) for p in pods
                if p.labels.get(J.KAI_PRIORITY)]
    if labelled:
        return max(labelled)
    values = [p.obj.view().sub("spec").integer("priority") for p in pods]
    if any(v is not None for v in values):
        return max(v for v in values if v is not None)
    if explicit_only:
        return None
    classes = [importer._class(p.obj.view().sub("spec"), "priorityClassName") for p in pods]
    return max((c for c in classes if c is not None), default=importer.default_priority)
