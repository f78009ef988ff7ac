"""The request from what the readers found: jobs, running work, teams and policy, validated.

Queue references become teams (a Kueue LocalQueue resolves to its ClusterQueue), jobs without a
queue get a team of their own outside every quota, and the result is checked by the wire models
so a broken import fails here, naming the imported request, rather than in the solver.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from placement_models import PlacementRequest, format_errors
from pydantic import ValidationError

from placement.kube.jobs import Draft
from placement.kube.nodes import CLIQUE
from placement.kube.objects import KubeError, Problem
from placement.kube.origins import JobOrigin, TaskOrigin
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
            if spec is not None and spec.preemptible(list(self.queues.teams.values())):
                r["preemptible"] = True
        if self.problems:
            raise KubeError(self.problems)
        teams = self._teams(jobs)
        policy = dict(self.options.policy)
        if any(r["preemptible"] for r in self.running):
            policy.setdefault("preemption", True)
        running = [{k: v for k, v in r.items() if v is not None} for r in self.running]
        self._check_levels(jobs)
        data = {
            "cluster": {"pools": self.pools, "nodes": [n.wire(self.options.rack_label, self.options.block_label)
                                                       for n in self.nodes],
                        "running": running, "topology_levels": self.levels},
            "jobs": [{k: v for k, v in j.items() if v is not None} for j in jobs],
            "teams": [t.wire() for t in teams], "policy": policy,
        }
        try:
            return PlacementRequest.model_validate(data)
        except ValidationError as exc:
            lines = format_errors(exc)
            raise KubeError([Problem("imported request", "", line) for line in lines]) from None

    def _job(self, d: Draft, team: str | None) -> dict[str, Any]:
        share = self._shared_share(d) if any(s.shared_replicas for _, s, _, _ in d.tasks) else None
        return {
            "name": d.name, "team": team, "priority": d.priority,
            "submitted_at": d.submitted.isoformat() if d.submitted else None,
            "min_available": d.min_available, "spot_ok": True, "topology": d.topology,
            "tasks": [shape.task(name, n, share if shape.shared_replicas else None)
                      | ({"min_replicas": d.task_mins[name]} if name in d.task_mins else {})
                      for name, shape, n, _ in d.tasks],
        }

    def _shared_share(self, d: Draft) -> Fraction:
        replicas = {n.sharing[1] for n in self.nodes if n.sharing}
        if len(replicas) != 1:
            where = d.obj.where if d.obj else f"Pods {d.namespace}/{d.k8s_name}"
            found = ", ".join(map(str, sorted(replicas))) or "no shared node"
            raise KubeError([Problem(where, "resources", f"nvidia.com/gpu.shared is one replica, a share that depends "
                                     f"on the node's replicas ({found}); placement/v1 needs one share per task")])
        return Fraction(1, replicas.pop())

    def _origin(self, d: Draft, team: str | None) -> JobOrigin:
        obj = d.obj
        tasks = {name: TaskOrigin(d.k8s_tasks.get(name, name), tuple(pods)) for name, _, _, pods in d.tasks}
        return JobOrigin(d.kind, obj.api_version if obj else "v1", obj.kind if obj else "Pod", d.namespace,
                         d.k8s_name, tasks, team if d.kind == "kueue-workload" else None)

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
        scopes = {s for t in teams.values() for s in t.quotas}
        spec = TeamSpec(UNQUEUED, "jobs without a queue")
        spec.quotas = {s: {"nominal": gpus, "borrowing_limit": 0, "lending_limit": 0} for s in scopes}
        self.warnings.add("jobs without a queue", "", f"imported as team '{UNQUEUED}', outside the other teams' "
                          "quotas")
        return spec

    def _kueue_exclusions(self, teams: dict[str, TeamSpec]) -> None:
        """A ClusterQueue cannot use a flavor it does not list: quota 0, no borrowing, in other CQs' scopes."""
        scopes = {s for t in teams.values() if t.kueue for s in t.quotas if s != CLUSTER}
        for t in teams.values():
            if t.kueue:
                for s in scopes - set(t.quotas):
                    t.quotas[s] = {"nominal": 0, "borrowing_limit": 0, "lending_limit": 0}

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
