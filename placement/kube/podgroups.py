"""PodGroups of Volcano and KAI -> gangs, and pending gangs -> jobs built from their pods.

A PodGroup says which pods form a gang, its queue, priority, minimum and topology, but not the
pods' shape (minResources is a total): a pending PodGroup is imported only with its pods.
"""

from __future__ import annotations

from placement.kube import jobs as J
from placement.kube.jobs import Draft, Gang, PodInfo
from placement.kube.objects import Obj, View
from placement.kube.state import first_given, pods_priority
from placement.kube.volcano import VolcanoJobs


class PodGroups(VolcanoJobs):
    """Readers of scheduling.volcano.sh and scheduling.run.ai (KAI) PodGroups."""

    def _podgroup_gang(self, obj: Obj) -> tuple[J.Group, Gang]:
        spec = obj.view().sub("spec")
        kai = obj.group == "scheduling.run.ai"
        queue = spec.text("queue")
        preempt = spec.text("preemptibility") if kai else None
        if preempt not in (None, "", "preemptible", "non-preemptible"):
            spec.fail("preemptibility", f"'{preempt}' is not preemptible or non-preemptible")
        owner = next((r for r in obj.meta.items("ownerReferences") if r.text("kind") == "Job"
                      and (r.text("apiVersion") or "").startswith("batch.volcano.sh")), None)
        group: J.Group = ("podgroup", obj.namespace, obj.name)
        if owner is not None:  # Volcano's own PodGroup of a Volcano Job: pods name the Job
            group = ("volcano-job", obj.namespace, owner.text("name", required=True))
        topology = spec.sub("topologyConstraint") if kai else spec.sub("networkTopology")
        self._podgroup_warnings(obj, spec, kai)
        preemptible = None if not preempt else preempt == "preemptible"
        members = spec.sub("minTaskMember") if not kai else None
        task_mins = {} if members is None or not members.value else {
            name: members.integer(name, required=True, minimum=0) for name, _ in members.mapping_items()}
        priority = self.kai_class(spec, "priorityClassName") if kai and spec.text("priorityClassName") else \
            self._class(spec, "priorityClassName")
        return group, Gang(obj, ("team", queue) if queue else None, priority, preemptible,
                           spec.integer("minMember", None, minimum=0), topology if topology.value else None, task_mins)

    def _podgroup_warnings(self, obj: Obj, spec: View, kai: bool) -> None:
        keys = ("minSubGroup", "subGroups", "preemptionDelay", "stalenessGracePeriod") if kai else \
            ("subGroupPolicy",)
        for key in keys:
            if spec.has(key):
                self.warnings.add(obj.where, f"spec.{key}", "sub-group minimums and timing are not honoured: only the "
                                  "gang's minMember")

    def _podgroup(self, gang: Gang, pods: list[PodInfo]) -> None:
        obj = gang.obj
        phase = obj.view().sub("status").text("phase", "Pending")
        if not pods:
            if phase not in ("Running", "Completed"):
                self.warnings.add(obj.where, "", "none of its pods is in the input: how the gang splits into pods is "
                                  "unknown (minResources is a total), so it is not imported")
            return
        draft = Draft(self._job_name(obj.namespace, obj.name, "podgroup"), "podgroup", obj, obj.namespace, obj.name,
                      queue=gang.queue or J.pod_queue(pods[0]),
                      priority=first_given(gang.priority, pods_priority(pods, self)),
                      submitted=J.timestamp(obj.meta, "creationTimestamp"))
        self._add_pod_tasks(draft, pods)
        total = sum(n for _, _, n, _ in draft.tasks)
        if gang.min_member and gang.min_member > total:
            self.warnings.add(obj.where, "spec.minMember", f"{gang.min_member} exceeds the {total} pods in the input: "
                              "the job needs them all")
        draft.min_available = gang.min_member if gang.min_member and gang.min_member < total else None
        if draft.min_available is not None and gang.min_task_member:
            self._min_task_member(draft, gang)
        if gang.topology is not None:
            self._gang_topology(draft, gang)
        self.drafts.append(draft)

    def _min_task_member(self, draft: Draft, gang: Gang) -> None:
        """`minTaskMember` -> min_replicas, as Volcano's gang check reads it: only when minMember is at least
        the sum of the tasks' minimums; a task missing from it has none of its own."""
        where, wanted = gang.obj.where, draft.min_available or 0
        floor = sum(gang.min_task_member.values())
        if floor > wanted:
            self.warnings.add(where, "spec.minTaskMember", f"not honoured: minMember ({wanted}) is below the "
                              f"sum of the tasks' minimums ({floor}), so Volcano checks only the job's total")
            return
        pods = {name: n for name, _, n, _ in draft.tasks}
        for task, least in gang.min_task_member.items():
            ours = [name for name, k8s in draft.k8s_tasks.items() if k8s == task]
            if not ours:
                continue  # no pod of that task in the input: nothing to place
            if len(ours) > 1:
                self.warnings.add(where, f"spec.minTaskMember.{task}", f"not honoured: the task's pods come in "
                                  f"{len(ours)} shapes ({', '.join(ours)}), imported as separate tasks")
                continue
            if least > pods[ours[0]]:
                self.warnings.add(where, f"spec.minTaskMember.{task}", f"{least} exceeds the task's {pods[ours[0]]} "
                                  "pods in the input: it needs them all")
            draft.task_mins[ours[0]] = min(least, pods[ours[0]])

    def _gang_topology(self, draft: Draft, gang: Gang) -> None:
        view = gang.topology
        assert view is not None
        if gang.obj.group == "scheduling.run.ai":
            out = {}
            for key, field_ in (("requiredTopologyLevel", "required"), ("preferredTopologyLevel", "preferred")):
                if view.text(key):
                    out[field_] = self.level_of(view, key, view.text(key))
            draft.topology = out or None
        else:
            self._volcano_topology(draft, view)
