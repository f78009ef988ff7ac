"""Volcano Jobs -> pending jobs: tasks, the gang minimum, network topology and partitions.

A running Volcano Job is read from its pods (placement.kube.running); this module imports the
pending ones, and reads the `networkTopology` that Volcano PodGroups share with Jobs.
"""

from __future__ import annotations

from typing import Any

from placement.kube import jobs as J
from placement.kube.jobs import Draft, PodInfo
from placement.kube.objects import Obj, View
from placement.kube.pods import read_shape
from placement.kube.state import ImportState, annotations_of, first_given


def task_name(task: View, index: Any) -> str:
    """A task's name; Volcano's admission webhook names an unnamed task `default<index>`."""
    return task.text("name") or f"default{index}"


class VolcanoJobs(ImportState):
    """Reader of batch.volcano.sh Jobs."""

    def _volcano_job(self, obj: Obj, bound: dict[J.Group, list[PodInfo]], covered: set[J.Group]) -> None:
        group: J.Group = ("volcano-job", obj.namespace, obj.name)
        covered.add(group)
        phase = obj.view().sub("status").sub("state").text("phase", "Pending")
        if group in bound:
            return  # running: its pods say where; _running reads the Job for team and priority
        if phase not in ("Pending", ""):
            self.warnings.add(obj.where, "status.state.phase", f"{phase} but none of its pods is in the input: "
                              "it holds no capacity in the request")
            return
        spec = obj.view().sub("spec")
        draft = Draft(self._job_name(obj.namespace, obj.name, "job"), "volcano-job", obj, obj.namespace, obj.name,
                      queue=("team", spec.text("queue", "default") or "default"),
                      submitted=J.timestamp(obj.meta, "creationTimestamp"))
        draft.priority = first_given(self._class(spec, "priorityClassName"), self.default_priority)
        task_mins: list[tuple[View, int]] = []  # (task, its minimum), every task
        for i, t in enumerate(spec.items("tasks")):
            name = task_name(t, i)
            replicas = t.integer("replicas", 1, minimum=0)
            template = t.sub("template")
            shape = read_shape(template.sub("spec"), annotations_of(template), template.sub("metadata"), self.warnings)
            if template.sub("spec").text("priorityClassName") and not spec.text("priorityClassName"):
                draft.priority = first_given(self._class(template.sub("spec"), "priorityClassName"), draft.priority)
            task_min = t.integer("minAvailable", None, minimum=0)
            if task_min is not None and task_min > replicas:
                t.fail("minAvailable", f"{task_min} exceeds the task's {replicas} replicas")
            task_mins.append((t, replicas if task_min is None else task_min))
            if replicas:
                draft.tasks.append((name, shape, replicas, []))
                draft.k8s_tasks[name] = name
            for key in ("topologyPolicy",):
                if t.has(key):
                    self.warnings.add(obj.where, t.where(key), "NUMA topology policy: not honoured")
            self._partition(draft, t)
        if not draft.tasks:
            self.warnings.add(obj.where, "spec.tasks", "no task has replicas: nothing to place")
            return
        total = sum(n for _, _, n, _ in draft.tasks)
        # Volcano's default minAvailable is the sum of the tasks' minimums (each defaulting to its replicas)
        floor = sum(m for _, m in task_mins)
        wanted = spec.integer("minAvailable", None, minimum=0) or floor
        if wanted > total:
            spec.fail("minAvailable", f"{wanted} exceeds the {total} pods of the job")
        self._volcano_minimums(obj, draft, task_mins, wanted, total)
        if spec.has("networkTopology"):
            self._volcano_topology(draft, spec.sub("networkTopology"))
        self.drafts.append(draft)

    def _volcano_minimums(self, obj: Obj, draft: Draft, task_mins: list[tuple[View, int]], wanted: int,
                          total: int) -> None:
        """The job's and the tasks' minimums as Volcano's gang check reads them: each task's minAvailable
        counts only when the job's minAvailable is at least their sum (else only the job's total does)."""
        floor = sum(m for _, m in task_mins)
        if not 0 < wanted < total:
            draft.min_available = None  # every pod
            return
        if wanted < floor:
            draft.min_available = wanted
            for t, task_min in task_mins:
                if t.has("minAvailable") and task_min < t.integer("replicas", 1):
                    self.warnings.add(obj.where, t.where("minAvailable"), "per-task minimums are not honoured: "
                                      f"the job's minAvailable ({wanted}) is below their sum ({floor}), so Volcano "
                                      "checks only the job's total")
            return
        # min_replicas where a task may shrink; with min_available set, every task's minimum is written out
        draft.min_available = wanted if wanted > floor else None
        for t, task_min in task_mins:
            name, replicas = task_name(t, t.path[-1]), t.integer("replicas", 1, minimum=0)
            if replicas and (task_min < replicas or draft.min_available is not None):
                draft.task_mins[name] = task_min

    def _volcano_topology(self, draft: Draft, view: View) -> None:
        mode = view.text("mode", "hard")
        if mode not in ("hard", "soft"):
            view.fail("mode", f"'{mode}' is not hard or soft")
        tier: Any = view.text("highestTierName") or view.get("highestTierAllowed", int)
        if tier is None:
            return
        level = self.level_of(view, "highestTierName" if view.has("highestTierName") else "highestTierAllowed", tier)
        topology = dict(draft.topology or {})
        topology["required" if mode == "hard" else "preferred"] = level
        draft.topology = topology

    def _partition(self, draft: Draft, task: View) -> None:
        policy = task.sub("partitionPolicy")
        if not policy.value:
            return
        size = policy.integer("partitionSize", required=True, minimum=1)
        net = policy.sub("networkTopology")
        tier = net.text("highestTierName") or net.get("highestTierAllowed", int)
        if tier is None or net.text("mode", "hard") != "hard":
            self.warnings.add(task.obj.where, task.where("partitionPolicy"), "only hard partition topology maps to "
                              "a slice: not honoured")
            return
        level = self.level_of(net, "highestTierName" if net.has("highestTierName") else "highestTierAllowed", tier)
        topology = dict(draft.topology or {})
        if "slice" in topology:
            self.warnings.add(task.obj.where, task.where("partitionPolicy"), "one slice per job: only the first "
                              "task's partitionPolicy is honoured")
            return
        topology["slice"] = {"size": size, "required": level}
        draft.topology = topology
        if policy.has("minPartitions"):
            self.warnings.add(task.obj.where, policy.where("minPartitions"), "not honoured: the job's minimum counts "
                              "pods")
