"""Kueue Workloads -> pending jobs: podSets (minCount: the task's min_replicas), topology requests and
priority classes.

An admitted Workload is running work, read from its pods (placement.kube.running); its queue
and priority still come from here.
"""

from __future__ import annotations

from typing import Any

from placement.kube import jobs as J
from placement.kube.jobs import Draft, Gang, PodInfo
from placement.kube.objects import Obj, View
from placement.kube.pods import read_shape
from placement.kube.state import ImportState, annotations_of


class KueueWorkloads(ImportState):
    """Reader of kueue.x-k8s.io Workloads."""

    def _workload_priority(self, obj: Obj, spec: View) -> int:
        if spec.has("priority"):
            return spec.integer("priority")
        ref = spec.sub("priorityClassRef")
        name = ref.text("name") or spec.text("priorityClassName")
        source = (ref.text("kind") or spec.text("priorityClassSource") or "").lower()
        if not name:
            return self.default_priority
        table = self.workload_classes if "workloadpriorityclass" in source else self.classes
        if name not in table:
            self.warnings.add(obj.where, "spec.priorityClassName", f"priority class '{name}' is not in the input: "
                              f"priority {self.default_priority}")
        return table.get(name, self.default_priority)

    def _workload(self, obj: Obj, bound: dict[J.Group, list[PodInfo]], gangs: dict[J.Group, Gang],
                  covered: set[J.Group]) -> None:
        owners = [("owner", obj.namespace, f"{r.text('kind')}/{r.text('name')}") for r in
                  obj.meta.items("ownerReferences")]
        covered.update(owners)
        root = obj.view()
        spec = root.sub("spec")
        status = root.sub("status")
        admitted = status.has("admission") or any(
            c.text("type") in ("Admitted", "QuotaReserved") and c.text("status") == "True"
            for c in status.items("conditions"))
        if admitted:
            if not any(o in bound for o in owners):
                self.warnings.add(obj.where, "status.admission", "admitted, but none of its pods is in the input: "
                                  "it holds no capacity in the request")
            return
        if spec.get("active", bool, True) is False:
            self.warnings.add(obj.where, "spec.active", "inactive workload: not imported")
            return
        queue = spec.text("queueName")
        draft = Draft(self._job_name(obj.namespace, obj.name, "workload"), "kueue-workload", obj, obj.namespace,
                      obj.name, queue=("local-queue", queue) if queue else None,
                      priority=self._workload_priority(obj, spec),
                      submitted=J.timestamp(obj.meta, "creationTimestamp"))
        requests: list[tuple[View, dict[str, Any]]] = []
        for ps in spec.items("podSets"):
            name = ps.text("name", required=True)
            count = ps.integer("count", 1, minimum=0)
            template = ps.sub("template")
            shape = read_shape(template.sub("spec"), annotations_of(template), template.sub("metadata"), self.warnings)
            if count:
                draft.tasks.append((name, shape, count, []))
                draft.k8s_tasks[name] = name
            min_count = ps.integer("minCount", None, minimum=0)
            if min_count is not None:  # partial admission: this podSet may shrink down to minCount pods
                if min_count > count:
                    ps.fail("minCount", f"{min_count} exceeds count {count}")
                if count and min_count < count:
                    draft.task_mins[name] = min_count
            request = self._topology_request(ps)
            if request:
                requests.append((ps, request))
        if requests:
            draft.topology = requests[0][1]
            for ps, other in requests[1:]:
                if other != draft.topology:
                    self.warnings.add(obj.where, ps.where("topologyRequest"), "one topology per job: the first "
                                      "podSet's request applies to every pod")
            if len(requests) < len(draft.tasks):
                self.warnings.add(obj.where, requests[0][0].where("topologyRequest"), "applies to the whole job, "
                                  "including podSets without a topology request")
        for key in ("maximumExecutionTimeSeconds",):
            if spec.has(key):
                self.warnings.add(obj.where, f"spec.{key}", "a deadline, not an expected runtime: not honoured")
        if draft.tasks:
            self.drafts.append(draft)

    def _topology_request(self, ps: View) -> dict[str, Any] | None:
        req = ps.sub("topologyRequest")
        if not req.value:
            return None
        out: dict[str, Any] = {}
        for key, field_ in (("required", "required"), ("preferred", "preferred")):
            if req.text(key):
                out[field_] = self.level_of(req, key, req.text(key))
        if req.text("podSetSliceRequiredTopology"):
            size = req.integer("podSetSliceSize", required=True, minimum=1)
            out["slice"] = {"size": size, "required": self.level_of(req, "podSetSliceRequiredTopology",
                                                                    req.text("podSetSliceRequiredTopology"))}
        for key in ("podSetGroupName", "podsetSliceRequiredTopologyConstraints", "subGroupCount"):
            if req.has(key):
                self.warnings.add(ps.obj.where, req.where(key), "not honoured by placement/v1")
        return out or None
