"""The request from what the readers found: jobs, running work, teams and policy, validated.

Queue references become teams (a Kueue LocalQueue resolves to its ClusterQueue), jobs without a
queue get a team of their own outside every quota, and the result is checked by the wire models
so a broken import fails here, naming the imported request, rather than in the solver.
"""

from __future__ import annotations

import math
from typing import Any

from placement_models import PlacementRequest, format_errors
from pydantic import ValidationError

from placement.kube.demand import resolve
from placement.kube.flavors import admitted_shape
from placement.kube.jobs import Draft
from placement.kube.nodes import CLIQUE
from placement.kube.objects import KubeError, Problem
from placement.kube.origins import JobOrigin, TaskOrigin
from placement.kube.pods import Shape
from placement.kube.queues import CLUSTER, TeamSpec
from placement.kube.state import ImportState

#: The team of jobs that name no queue while others do: outside every quota (see _unqueued).
UNQUEUED = "unqueued"


class RequestAssembly(ImportState):
    """Turns the drafts and running entries into a validated PlacementRequest."""

    def _team(self, queue: tuple[str, str] | None, where: str, namespace: str, pending: bool) -> str | None:
        """The team a queue reference names; a Kueue LocalQueue is resolved to its ClusterQueue.

        A LocalQueue missing from the input is an error for pending work when ClusterQueues are given
        (its quota would be guessed); otherwise the work is imported without a team, with a warning.
        """
        if queue is None:
            return None
        kind, name = queue
        if kind != "local-queue":
            return name
        cq = self.queues.local_queues.get((namespace, name))
        if cq is not None:
            return cq
        reason = f"LocalQueue {namespace}/{name} is not in the input, so its ClusterQueue (the team) is unknown"
        if pending and self.of("kueue.x-k8s.io", "ClusterQueue"):
            raise KubeError([Problem(where, "queueName", reason)])
        self.warnings.add(where, "queueName", reason + ": imported without a team")
        return None

    def _flavored(self, shape: Shape, team: str | None, where: str) -> Shape:
        """Kueue injects the admitting flavor's nodeLabels and tolerations into the pods (placement.kube.flavors)."""
        spec = self.queues.teams.get(team) if team else None
        if spec is None or not spec.kueue:
            return shape
        rules = [self.queues.flavor_rules[f] for f in spec.flavors if f in self.queues.flavor_rules]
        return admitted_shape(shape, rules) if rules else shape

    def _request(self) -> PlacementRequest:
        jobs = []
        for d in self.drafts:
            where = d.obj.where if d.obj else f"Pods {d.namespace}/{d.k8s_name}"
            team = self.attempt(self._team, d.queue, where, d.namespace, True)
            jobs.append(self._job(d, team))
            self.origins.jobs[d.name] = self._origin(d, team)
        for r in self.running:
            r["team"] = self.attempt(self._team, r.pop("_queue"), f"running job {r['job']}", r.pop("_namespace"),
                                     False)
            spec = self.queues.teams.get(r["team"]) if r["team"] else None
            if spec is not None and spec.preemptible(list(self.queues.teams.values()), self.queues.root):
                r["preemptible"] = True
        if self.problems:
            raise KubeError(self.problems)
        teams = self._teams(jobs)
        policy = dict(self.options.policy)
        if any(r["preemptible"] for r in self.running):
            policy.setdefault("preemption", True)
        if self.kai_shares and "allow_sharing_changes" not in policy:
            # KAI splits any whole GPU for gpu-fraction pods (it reserves the GPU itself): the plan may too,
            # with enough replicas for the smallest fraction asked
            policy["allow_sharing_changes"] = True
            slots = min(128, max(2, math.ceil(1 / min(self.kai_shares))))
            policy.setdefault("sharing_default", {"mode": "time-slicing", "replicas": slots})
        running = [{k: v for k, v in r.items() if v is not None} for r in self.running]
        self._check_levels(jobs)
        data = {
            "cluster": {"pools": self.pools, "nodes": [n.wire(self.options.rack_label, self.options.block_label)
                                                       for n in self.nodes],
                        "running": running, "topology_levels": self.levels},
            "jobs": [{k: v for k, v in j.items() if v is not None} for j in jobs],
            "teams": [t.wire() for t in teams], "policy": policy,
        }
        if self.queues.cohorts:
            data["cohorts"] = [c.wire() for c in self.queues.cohorts.values()]
        try:
            return PlacementRequest.model_validate(data)
        except ValidationError as exc:
            lines = format_errors(exc)
            raise KubeError([Problem(self._culprit(err["loc"], data), "", f"imported as {line}")
                             for err, line in zip(exc.errors(), lines, strict=True)]) from None

    def _culprit(self, loc: tuple[Any, ...], data: dict[str, Any]) -> str:
        """The object behind a field of the imported request that the wire format refused."""
        path = [p for p in loc if isinstance(p, (str, int))]
        if path[:2] == ["cluster", "topology_levels"]:
            found = self.of("kueue.x-k8s.io", "Topology") + self.of("kai.scheduler", "Topology") + self.of(
                "topology.volcano.sh", "HyperNode")
            return found[0].where if found else "topology levels (rack/block label options)"
        if path[:2] == ["cluster", "nodes"] and len(path) > 2 and isinstance(path[2], int):
            return self.nodes[path[2]].obj.where
        if path[:1] == ["jobs"] and len(path) > 1 and isinstance(path[1], int) and path[1] < len(self.drafts):
            d = self.drafts[path[1]]
            return d.obj.where if d.obj else f"Pods {d.namespace}/{d.k8s_name}"
        if path[:1] == ["teams"] and len(path) > 1 and isinstance(path[1], int):
            name = data["teams"][path[1]]["name"]
            spec = self.queues.teams.get(name)
            return spec.where if spec else f"team {name}"
        if path[:1] == ["cohorts"] and len(path) > 1 and isinstance(path[1], int):
            return list(self.queues.cohorts.values())[path[1]].where
        return "imported request"

    def _job(self, d: Draft, team: str | None) -> dict[str, Any]:
        where = d.obj.where if d.obj else f"Pods {d.namespace}/{d.k8s_name}"
        tasks = []
        for name, shape, n, pods in d.tasks:
            shape = self._flavored(shape, team, where)
            resolved = resolve(shape, self.nodes, where, self.warnings)
            if resolved.gpu_share is not None and not resolved.mig_profile and (shape.gpu_share is not None
                                                                             or shape.gpu_memory is not None):
                self.kai_shares.append(resolved.gpu_share)  # KAI shares any GPU: see _request
            task = resolved.task(name, n) | ({"min_replicas": d.task_mins[name]} if name in d.task_mins else {})
            if pods:  # the real pods, so `kube export` from the request alone binds them
                task["pod_names"] = list(pods)
            tasks.append(task)
        return {
            "name": d.name, "namespace": d.namespace, "team": team, "priority": d.priority,
            "submitted_at": d.submitted.isoformat() if d.submitted else None,
            "min_available": d.min_available, "spot_ok": True, "topology": d.topology, "tasks": tasks,
        }

    def _origin(self, d: Draft, team: str | None) -> JobOrigin:
        obj = d.obj
        tasks = {name: TaskOrigin(d.k8s_tasks.get(name, name), tuple(pods)) for name, _, _, pods in d.tasks}
        kueue = d.kind == "kueue-workload" or (d.queue is not None and d.queue[0] == "local-queue")
        return JobOrigin(d.kind, obj.api_version if obj else "v1", obj.kind if obj else "Pod", d.namespace,
                         d.k8s_name, tasks, team if kueue else None)

    def _teams(self, jobs: list[dict[str, Any]]) -> list[TeamSpec]:
        teams = dict(self.queues.teams)
        named = [j["team"] for j in jobs] + [r["team"] for r in self.running]
        for name in named:
            if name and name not in teams:
                teams[name] = TeamSpec(name, f"queue {name}")
                self.warnings.add(f"queue {name}", "", "named by jobs but declared by no Queue/ClusterQueue in the "
                                  "input: a team without quota")
        if not teams:
            return []
        if any(n is None for n in named):
            teams[UNQUEUED] = self._unqueued(teams, jobs)
            for j in jobs:
                j["team"] = j["team"] or UNQUEUED
            for r in self.running:
                r["team"] = r["team"] or UNQUEUED
        self._kueue_exclusions(teams)
        return list(teams.values())

    def _unqueued(self, teams: dict[str, TeamSpec], jobs: list[dict[str, Any]]) -> TeamSpec:
        """Jobs in no queue: in Kubernetes they run outside every quota. Their team owns exactly what
        they hold and ask for in every quota scope, and neither lends nor borrows, so quotas of the
        real teams are untouched."""
        if UNQUEUED in teams:
            raise KubeError([Problem(teams[UNQUEUED].where, "metadata.name", f"'{UNQUEUED}' is reserved for jobs "
                                     "that name no queue")])
        gpus = sum(len(p.get("gpus", [])) for r in self.running if r["team"] is None for p in r["pods"])
        gpus += sum(t.get("gpus", 0) * t["replicas"] for j in jobs if j["team"] is None for t in j["tasks"])
        scopes = {s for t in self._quota_holders(teams) for s in t.quotas}
        spec = TeamSpec(UNQUEUED, "jobs without a queue")
        spec.quotas = {s: {"nominal": gpus, "borrowing_limit": 0, "lending_limit": 0} for s in scopes}
        for resource, key in (("cpu", "cpu"), ("memory", "memory_gib")):
            if any(resource in t.other for t in self._quota_holders(teams)):
                held = sum(p.get(key, 0) for r in self.running if r["team"] is None for p in r["pods"])
                held += sum(t.get(key, 0) * t["replicas"] for j in jobs if j["team"] is None for t in j["tasks"])
                spec.other[resource] = {"nominal": math.ceil(held * 1000) / 1000 + 0.001, "borrowing_limit": 0,
                                        "lending_limit": 0}
        for resource, key in (("cpu", "cpu"), ("memory", "memory_gib")):
            held = sum(p.get(key, 0) for r in self.running if r["team"] is None for p in r["pods"])
            held += sum(t.get(key, 0) * t["replicas"] for j in jobs if j["team"] is None for t in j["tasks"])
            for s in {s for t in self._quota_holders(teams) for (r, s) in t.flavor_other if r == resource}:
                spec.flavor_other[resource, s] = {"nominal": math.ceil(held * 1000) / 1000 + 0.001,
                                                  "borrowing_limit": 0, "lending_limit": 0}
        self.warnings.add("jobs without a queue", "", f"imported as team '{UNQUEUED}', outside the other teams' "
                          "quotas")
        return spec

    def _quota_holders(self, teams: dict[str, TeamSpec]) -> list[TeamSpec]:
        """The teams and the cohorts' own quotas: every quota scope of the request is one of theirs."""
        return [*teams.values(), *(c.quota for c in self.queues.cohorts.values() if c.quota is not None)]

    def _kueue_exclusions(self, teams: dict[str, TeamSpec]) -> None:
        """A ClusterQueue cannot use a flavor it does not list: quota 0, no borrowing, in other CQs' and the
        cohorts' scopes."""
        holders = [t for t in self._quota_holders(teams) if t.kueue]
        scopes = {s for t in holders for s in t.quotas if s != CLUSTER}
        others = {k for t in holders for k in t.flavor_other}
        for t in teams.values():
            if t.kueue:
                for s in scopes - set(t.quotas):
                    t.quotas[s] = {"nominal": 0, "borrowing_limit": 0, "lending_limit": 0}
                for k in others - set(t.flavor_other):
                    t.flavor_other[k] = {"nominal": 0, "borrowing_limit": 0, "lending_limit": 0}

    def _check_levels(self, jobs: list[dict[str, Any]]) -> None:
        """Warn when a job's level has no labelled node: every node would be its own domain."""
        used = {lv for j in jobs if j.get("topology") for lv in (j["topology"].get("required"),
                j["topology"].get("preferred"), (j["topology"].get("slice") or {}).get("required")) if lv}
        wire = [n.wire(self.options.rack_label, self.options.block_label) for n in self.nodes]
        for level in sorted(used - {"node"}):
            if level in ("nvlink_domain", "rack", "block"):
                labelled = any(n["topology"].get(level) for n in wire) or (
                    level == "nvlink_domain" and any(CLIQUE in n["labels"] for n in wire))
            else:
                labelled = any(level in n["labels"] for n in wire)
            if not labelled:
                self.warnings.add(f"topology level {level}", "", "no node carries this level's label: every node "
                                  "is its own domain (set the rack/block label options or add a Topology)")
