"""The cluster side of an import: PriorityClasses, Nodes, the topology levels and the queues.

Read first, because workloads refer to them: a pod's priority class, the node it is bound to,
the level a topology request names, the queue a job waits in. Queue objects of Volcano, Kueue
(ClusterQueue, ResourceFlavor, LocalQueue, Cohort) and KAI become teams through placement.kube.queues.
"""

from __future__ import annotations

from placement.kube.flavors import flavor_labels, flavor_tolerations, split_pools
from placement.kube.hypernodes import read_hypernodes
from placement.kube.nodes import CLIQUE, HOSTNAME, assign_pools, read_node
from placement.kube.objects import KubeError, Problem
from placement.kube.queues import (
    CLUSTER,
    CohortSpec,
    Scope,
    TeamSpec,
    cluster_queue,
    flavor_scope,
    kai_queues,
    kai_unassigned,
    kueue_cohort,
    resource_flavors,
    resource_scope,
    volcano_queue,
)
from placement.kube.state import ImportState


class ClusterObjects(ImportState):
    """Readers of the objects that describe the cluster rather than its work."""

    def _priority_classes(self) -> None:
        for obj in self.of("scheduling.k8s.io", "PriorityClass"):
            root = obj.view()
            self.classes[obj.name] = root.integer("value", required=True)
            if root.get("globalDefault", bool, False):
                self.default_priority = self.classes[obj.name]
        for obj in self.of("kueue.x-k8s.io", "WorkloadPriorityClass"):
            self.workload_classes[obj.name] = obj.view().integer("value", required=True)

    def _nodes(self) -> None:
        seen: set[str] = set()
        for obj in self.of("", "Node"):
            info = self.attempt(read_node, obj, self.options.pool_labels, self.warnings)
            if info is None:
                continue
            if info.name in seen:
                self.problems.append(Problem(obj.where, "metadata.name", f"node '{info.name}' is listed twice"))
            seen.add(info.name)
            self.nodes.append(info)
            self.origins.hostnames[info.name] = info.hostname
        if not self.nodes and not self.problems:
            raise KubeError([Problem("input", "", "no Node objects: the request needs the cluster's nodes "
                                     "(kubectl get nodes -o json)")])
        self.pools = assign_pools(self.nodes, self.options.prices)
        names = {p["name"] for p in self.pools}
        for pool in sorted(set(self.options.prices) - names):
            self.problems.append(Problem("option prices", pool, f"no such pool (pools: {', '.join(sorted(names))})"))
        self.pools = split_pools(self.of("kueue.x-k8s.io", "ResourceFlavor"), self.nodes, self.options.prices,
                                 resource_flavors(self.of("kueue.x-k8s.io", "ClusterQueue")
                                                  + self.of("kueue.x-k8s.io", "Cohort")))

    def _topology(self) -> None:
        """Levels from a Kueue or KAI Topology (label keys, widest first), else nvlink_domain/rack/block."""
        topologies = self.of("kueue.x-k8s.io", "Topology") + self.of("kai.scheduler", "Topology")
        for label, level in ((CLIQUE, "nvlink_domain"), (self.options.rack_label, "rack"),
                             (self.options.block_label, "block")):
            if label:
                self.label_level[label] = level
        hypernodes = self.of("topology.volcano.sh", "HyperNode")
        if hypernodes and topologies:
            self.warnings.add(hypernodes[0].where, "", "a Kueue/KAI Topology defines the levels: HyperNodes are not "
                              "read")
        elif hypernodes:
            tiers = read_hypernodes(hypernodes, self.nodes, self.warnings)
            self.levels = list(tiers.levels)
            self.tiers = tiers.names
            self.label_level.update({level: level for level in tiers.levels})
        if not topologies:
            return
        chosen = topologies[0]
        labels = [v.text("nodeLabel", required=True) for v in chosen.view().sub("spec").items("levels")]
        if not labels:
            chosen.view().sub("spec").fail("levels", "required: at least one level")
        if HOSTNAME in labels[:-1]:
            chosen.view().sub("spec").fail("levels", f"{HOSTNAME} may only be the lowest level")
        for other in topologies[1:]:
            other_labels = [v.text("nodeLabel") for v in other.view().sub("spec").items("levels")]
            if other_labels != labels:
                self.warnings.add(other.where, "spec.levels", f"only one topology is used: {chosen.ref}'s levels")
        self.origins.topology_labels = labels
        self.levels = []
        for label in reversed(labels):
            if label == HOSTNAME:
                continue
            level = "nvlink_domain" if label == CLIQUE else label
            self.label_level[label] = level
            self.levels.append(level)
        if not self.levels:  # hostname only: each node its own domain, the level `node` names
            self.levels = [HOSTNAME]
            self.label_level[HOSTNAME] = HOSTNAME
        if self.options.rack_label or self.options.block_label:
            self.warnings.add(chosen.where, "spec.levels", "the Topology's levels are used; rack/block labels "
                              "only fill node.topology")

    def _queues(self) -> None:
        flavors: dict[str, Scope | None] = {}
        others: dict[str, Scope | None] = {}  # the scope of each flavor's CPU and memory quotas
        for obj in self.of("kueue.x-k8s.io", "ResourceFlavor"):
            self.queues.flavor_nodes[obj.name], flavors[obj.name] = flavor_scope(obj, self.nodes)
            others[obj.name] = resource_scope(obj, self.nodes)
            self.queues.flavor_rules[obj.name] = (flavor_labels(obj), flavor_tolerations(obj))
        self.origins.flavor_nodes = self.queues.flavor_nodes
        for obj in self.of("scheduling.volcano.sh", "Queue"):
            team = self.attempt(volcano_queue, obj, self.warnings)
            if team is not None:
                self.attempt(self.queues.add, team, obj)
        kai = self.of("scheduling.run.ai", "Queue")
        kai_teams = self.attempt(kai_queues, kai, self.warnings) or []
        for team in kai_teams:
            obj = next(o for o in kai if o.name == team.name)
            self.attempt(self.queues.add, team, obj)
        unassigned = kai_unassigned(kai_teams, self.nodes)
        if unassigned is not None:
            if unassigned.name in self.queues.teams:
                self.problems.append(Problem(self.queues.teams[unassigned.name].where, "metadata.name",
                                             f"'{unassigned.name}' is reserved for the GPUs no KAI quota covers"))
            else:
                self.queues.teams[unassigned.name] = unassigned
                free = unassigned.quotas[CLUSTER]["nominal"]
                self.warnings.add("KAI queues", "spec.resources.gpu.quota", f"the {free} GPUs no queue's quota "
                                  f"covers are imported as team '{unassigned.name}', which runs nothing and lends them "
                                  "all (KAI lets queues use them over quota, by weight)")
        cqs: list[TeamSpec] = []
        for obj in self.of("kueue.x-k8s.io", "ClusterQueue"):
            self.origins.kueue_version = obj.version
            team = self.attempt(cluster_queue, obj, flavors, self.warnings, others)
            if team is not None:
                self.attempt(self.queues.add, team, obj)
                self.origins.team_flavors[team.name] = list(team.flavors)
                cqs.append(team)
        self._cohorts(cqs, flavors, others)
        for obj in self.of("kueue.x-k8s.io", "LocalQueue"):
            cq = self.attempt(lambda o: o.view().sub("spec").text("clusterQueue", required=True), obj)
            if cq is not None:
                self.queues.local_queues[obj.namespace, obj.name] = cq

    def _cohorts(self, cqs: list[TeamSpec], flavors: dict[str, Scope | None], others: dict[str, Scope | None]) -> None:
        """Kueue Cohort objects and every cohort a ClusterQueue or Cohort names -> the request's cohorts; when no
        ClusterQueue names one, none (one implicit cohort) and the queues neither borrow nor lend (limits 0)."""
        objs = self.of("kueue.x-k8s.io", "Cohort")
        if not any(t.cohort for t in cqs):
            for team in cqs:
                team.isolate()
            for obj in objs:
                self.warnings.add(obj.where, "", "no ClusterQueue is in a cohort: the Cohort is not imported")
            return
        cohorts = self.queues.cohorts
        for obj in objs:
            spec = self.attempt(kueue_cohort, obj, flavors, self.warnings, others)
            if spec is None:
                continue
            if spec.name in cohorts:
                self.problems.append(Problem(obj.where, "metadata.name", f"cohort '{spec.name}' is declared twice"))
            cohorts[spec.name] = spec
        named = [t.cohort for t in cqs] + [c.parent for c in list(cohorts.values())]
        for name in named:
            if name and name not in cohorts:
                cohorts[name] = CohortSpec(name, f"cohort {name} (named, no Cohort object)")
