"""Per-task minimums from Kubernetes: Volcano tasks[].minAvailable, PodGroup minTaskMember, Kueue minCount
become `tasks[].min_replicas`, as each scheduler's gang check reads them."""

from __future__ import annotations

import copy
from typing import Any

from kube_helpers import docs, find, reimport

from placement import plan, verify


def _warned(imported: Any, *words: str) -> bool:
    return any(all(w in str(x) for w in words) for x in imported.warnings)


def _mins(job: Any) -> list[tuple[str, int | None]]:
    return [(t.name, t.min_replicas) for t in job.tasks]


# --------------------------------------------------------------------------------------------
# Volcano Jobs


def _volcano(job_min: int | None, worker_min: int | None) -> list[dict[str, Any]]:
    objects = docs("cluster", "volcano")
    job = find(objects, "Job", "llm-pretrain")
    if job_min is None:
        del job["spec"]["minAvailable"]
    else:
        job["spec"]["minAvailable"] = job_min
    if worker_min is None:
        del job["spec"]["tasks"][0]["minAvailable"]
    else:
        job["spec"]["tasks"][0]["minAvailable"] = worker_min
    return objects


def test_volcano_job_minimum_above_the_task_minimums_keeps_both() -> None:
    # minAvailable 8 ≥ 6 workers + the launcher's default 1: Volcano checks both, and so does the plan.
    imp = reimport(_volcano(8, 6))
    (job,) = imp.request.jobs
    assert job.min_available == 8 and _mins(job) == [("worker", 6), ("launcher", 1)] and job.needed == 8
    assert not _warned(imp, "minAvailable", "not honoured")


def test_volcano_job_minimum_below_the_task_minimums_counts_only_the_total() -> None:
    # minAvailable 5 < 6 + 1: Volcano's gang check skips the per-task minimums; so does the import, and says so.
    imp = reimport(_volcano(5, 6))
    (job,) = imp.request.jobs
    assert job.min_available == 5 and _mins(job) == [("worker", None), ("launcher", None)] and job.needed == 5
    assert _warned(imp, "llm-pretrain", "spec.tasks[0].minAvailable", "per-task minimums are not honoured",
                   "below their sum (7)")


def test_volcano_job_minimum_alone_is_a_total_as_before() -> None:
    # No task minAvailable (each defaults to its replicas, 9 in all) and minAvailable 5: the total only.
    imp = reimport(_volcano(5, None))
    (job,) = imp.request.jobs
    assert job.min_available == 5 and _mins(job) == [("worker", None), ("launcher", None)]
    assert not _warned(imp, "minAvailable", "not honoured")


def test_volcano_elastic_workers_plan_with_their_launcher() -> None:
    # One worker of 8 is needed, with the launcher: the free H100 node takes one worker, and the plan keeps
    # the launcher whatever else it does.
    imp = reimport(_volcano(None, 1))
    (job,) = imp.request.jobs
    assert job.min_available is None and _mins(job) == [("worker", 1), ("launcher", None)] and job.needed == 2
    result = plan(imp.request)
    assert verify(imp.request, result) == []
    tasks = [a.task for a in result.assignments if a.job == job.name]
    assert tasks.count("launcher") == 1 and 1 <= tasks.count("worker") <= 8


# --------------------------------------------------------------------------------------------
# Volcano PodGroups (pending, with their pods)


def _pending_podgroup(min_member: int, min_task_member: dict[str, int] | None) -> list[dict[str, Any]]:
    """old-train as a pending, standalone PodGroup: 3 workers and a launcher, none bound yet."""
    objects = docs("cluster", "volcano")
    group = find(objects, "PodGroup", "old-train-5f1c2a7e-2b44-4d0e-9a51-6c1f0b2d3e4f")
    del group["metadata"]["ownerReferences"]
    group["spec"]["minMember"] = min_member
    if min_task_member is not None:
        group["spec"]["minTaskMember"] = min_task_member
    group["status"] = {"phase": "Pending"}
    workers = [find(objects, "Pod", f"old-train-worker-{i}") for i in (0, 1)]
    extra = copy.deepcopy(workers[1])
    extra["metadata"]["name"] = "old-train-worker-2"
    launcher = copy.deepcopy(workers[0])
    launcher["metadata"]["name"] = "old-train-launcher-0"
    for meta in (launcher["metadata"]["labels"], launcher["metadata"]["annotations"]):
        meta["volcano.sh/task-spec"] = "launcher"
    launcher["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4", "memory": "16Gi"}}
    objects += [extra, launcher]
    for pod in [*workers, extra, launcher]:
        for meta in (pod["metadata"]["labels"], pod["metadata"]["annotations"]):
            meta.pop("volcano.sh/job-name", None)
        pod["spec"].pop("nodeName", None)
        pod["status"] = {"phase": "Pending"}
    return objects


def _podgroup_job(imp: Any) -> Any:
    return next(j for j in imp.request.jobs if "old-train" in j.name)


def test_podgroup_min_task_member_becomes_min_replicas() -> None:
    imp = reimport(_pending_podgroup(3, {"worker": 2, "launcher": 1}))
    job = _podgroup_job(imp)
    assert sorted(_mins(job)) == [("launcher", 1), ("worker", 2)] and job.min_available == 3 and job.pods == 4
    assert not _warned(imp, "minTaskMember")


def test_podgroup_min_task_member_above_min_member_is_not_applied() -> None:
    imp = reimport(_pending_podgroup(2, {"worker": 2, "launcher": 1}))
    job = _podgroup_job(imp)
    assert sorted(_mins(job)) == [("launcher", None), ("worker", None)] and job.min_available == 2
    assert _warned(imp, "spec.minTaskMember", "below the sum of the tasks' minimums (3)")


def test_podgroup_without_min_task_member_is_unchanged() -> None:
    imp = reimport(_pending_podgroup(2, None))
    job = _podgroup_job(imp)
    assert sorted(_mins(job)) == [("launcher", None), ("worker", None)] and job.min_available == 2


# --------------------------------------------------------------------------------------------
# Kueue Workloads


def test_kueue_min_count_is_kept_per_podset() -> None:
    objects = docs("cluster", "kueue")
    workload = find(objects, "Workload", "job-finetune-7b-3c9d1")
    second = copy.deepcopy(workload["spec"]["podSets"][0])
    second.update(name="eval", count=3)
    del second["minCount"]
    workload["spec"]["podSets"].append(second)
    imp = reimport(objects)
    (job,) = imp.request.jobs
    # main may shrink to 1 of 2; eval (no minCount) needs all 3: 4 pods at least, and which podSet shrinks is kept
    assert _mins(job) == [("main", 1), ("eval", None)] and job.min_available is None and job.needed == 4
    assert not _warned(imp, "which podSet shrinks")
