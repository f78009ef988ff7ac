"""Where imported names came from: v1 job, task and node names -> the Kubernetes objects behind them.

The importer fills these while it reads; the exporter needs them (besides the request and the
plan) to write bindings, patches or Kueue admissions back onto the right objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TaskOrigin:
    name: str  # the Kubernetes task / podSet / sub-group name
    pods: tuple[str, ...]  # existing pod names in pod-index order; empty: a controller creates them


@dataclass(frozen=True)
class JobOrigin:
    kind: str  # volcano-job | kueue-workload | podgroup | pods (from the import), generic (from v1 names)
    api_version: str
    k8s_kind: str
    namespace: str
    name: str
    tasks: dict[str, TaskOrigin]
    cluster_queue: str | None = None


@dataclass
class Origins:
    """v1 names -> Kubernetes names: what an exporter needs besides the request and the plan."""

    jobs: dict[str, JobOrigin] = field(default_factory=dict)
    running_pods: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # job -> (namespace, pod)
    hostnames: dict[str, str] = field(default_factory=dict)
    topology_labels: list[str] = field(default_factory=list)  # a Kueue/KAI Topology's node labels, widest first
    flavor_nodes: dict[str, list[str]] = field(default_factory=dict)
    team_flavors: dict[str, list[str]] = field(default_factory=dict)  # ClusterQueue -> its flavor names
    kueue_version: str = "v1beta1"  # the API version of the input's Kueue queue objects
