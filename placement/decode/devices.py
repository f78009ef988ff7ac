"""The plan's device part in the wire format: new MIG layouts, GPUs it shares, each pod's instance."""

from __future__ import annotations

from placement_models import (
    Assignment,
    MigChange,
    MigInstance,
    MigSlot,
    SharingChange,
)

from placement.devices.view import uses_devices
from placement.picks import pod_picks
from placement.problem import Problem
from placement.solution import Placement


def sharing_changes(problem: Problem, placement: Placement) -> list[SharingChange]:
    spec = problem.device_view().sharing_default
    return [SharingChange(node=problem.nodes[n].name, gpu=gpu, mode=spec.mode, replicas=spec.replicas)
            for n, gpu in sorted(placement.sharing_changes)]


def mig_changes(problem: Problem, placement: Placement) -> list[MigChange]:
    out = []
    for (n, gpu), layout in sorted(placement.mig_layouts.items()):
        node = problem.nodes[n]
        # a shared instance is never moved (the device view counts it occupied): it keeps its sharing
        shared = {(i.profile.lower(), i.start): i.sharing for i in node.mig.get(gpu, ()) if i.sharing is not None}
        out.append(MigChange(node=node.name, gpu=gpu, mig_enabled=layout is not None,
                             layout=[MigInstance(profile=name, start=s, sharing=shared.get((name.lower(), s)))
                                     for name, s in layout or ()]))
    return out


def attach(problem: Problem, placement: Placement, assignments: list[Assignment]) -> list[Assignment]:
    """Fill in the MIG instance or shared GPU of every MIG/shared pod among decoded assignments."""
    if problem.devices is None or not any(uses_devices(t.spec) for t in problem.tasks):
        return assignments
    picks = pod_picks(problem, placement)
    task_of = {(problem.jobs[task.job].name, task.name): t for t, task in enumerate(problem.tasks)}
    index = {problem.nodes[n].name: n for n in range(problem.n_nodes)}
    for a in assignments:
        t = task_of[a.job, a.task]
        spec = problem.tasks[t].spec
        if not uses_devices(spec):
            continue
        gpu, inst = picks[t, index[a.node]].pop(0)
        if inst is None:
            a.gpus, a.gpu_share = [gpu], spec.gpu_share
        else:
            a.gpus, a.mig = [], MigSlot(gpu=gpu, profile=inst[0], start=inst[1])
    return assignments
