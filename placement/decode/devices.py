"""The plan's device part in the wire format: new MIG layouts (with the instances it shares), GPUs it shares,
each pod's instance, GPU or share of a MIG instance."""

from __future__ import annotations

from placement_models import (
    Assignment,
    MigChange,
    MigInstance,
    MigSlot,
    SharingChange,
)

from placement.catalog import MigGeometry
from placement.devices.view import is_instance_share, uses_devices
from placement.picks import pod_picks
from placement.problem import Problem
from placement.solution import Placement


def sharing_changes(problem: Problem, placement: Placement) -> list[SharingChange]:
    spec = problem.device_view().sharing_default
    return [SharingChange(node=problem.nodes[n].name, gpu=gpu, mode=spec.mode, replicas=spec.replicas)
            for n, gpu in sorted(placement.sharing_changes)]


def mig_changes(problem: Problem, placement: Placement) -> list[MigChange]:
    """Every GPU whose layout the plan changes, with its whole new layout: a declared shared instance keeps its
    setting (it never moves: the device view counts it occupied), one the plan shares gets
    policy.sharing_default's."""
    default = problem.device_view().sharing_default
    out = []
    for (n, gpu), layout in sorted(placement.mig_layouts.items()):
        node = problem.nodes[n]
        geo = problem.device_view().geometry(n)
        shared = {(_canonical(geo, i.profile), i.start): i.sharing for i in node.mig.get(gpu, ())
                  if i.sharing is not None}
        shared.update({(name, s): default for name, s in layout or () if (n, gpu, s) in placement.shared_instances})
        out.append(MigChange(node=node.name, gpu=gpu, mig_enabled=layout is not None,
                             layout=[MigInstance(profile=name, start=s, sharing=shared.get((name, s)))
                                     for name, s in layout or ()]))
    return out


def _canonical(geo: MigGeometry | None, name: str) -> str:
    """The catalog's name of a profile as a node's layout spells it (layouts of the plan use the catalog's)."""
    found = geo.profile(name) if geo is not None else None
    return found.name if found is not None else name


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
            if is_instance_share(spec):
                a.gpu_share = spec.gpu_share
    return assignments
