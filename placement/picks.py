"""Which GPUs, instances and shares a placement's pods take: the exact, cheap step from counts to devices.

A placement says how many pods of a task sit on a node, and which GPUs it re-partitions or
shares; MIG pods then fill free instances of their profile in GPU, then start order, past the
instances the plan makes shared. Pods sharing a MIG instance name theirs in the placement. The greedy
ledger replays a plan with it, the compiler reads a solution back with it, decode names the GPUs.
"""

from __future__ import annotations

from placement.devices.layouts import Instance, Layout
from placement.devices.pods import profile_for
from placement.devices.view import is_instance_share, is_shared, uses_devices
from placement.problem import Problem
from placement.solution import Placement


def final_layouts(problem: Problem, placement: Placement) -> dict[tuple[int, int], Layout | None]:
    """(node, gpu) -> layout after the plan (None: whole), for every GPU partitioned before or after."""
    view = problem.device_view()
    out: dict[tuple[int, int], Layout | None] = {}
    for n, gpus in enumerate(view.mig):
        for g in gpus:
            out[n, g.gpu] = g.layout
    out.update(placement.mig_layouts)
    return out


def pod_picks(problem: Problem, placement: Placement) -> dict[tuple[int, int], list[tuple[int, Instance | None]]]:
    """(task, node) -> per pod (gpu, instance) for MIG pods and pods sharing a MIG instance, (gpu, None) for
    shared ones.

    MIG pods fill free instances of their profile in GPU, then start order: exact, because the
    plan never offers a node fewer free instances of a profile than pods that want it, beside the
    ones it makes shared.
    """
    view = problem.device_view()
    layouts = final_layouts(problem, placement)
    busy = {(n, g.gpu, s) for n, gpus in enumerate(view.mig) for g in gpus for _, s in g.occupied}
    busy |= placement.shared_instances
    by_node: dict[int, list[tuple[int, Layout]]] = {}  # node -> its partitioned GPUs, in GPU order
    for (nn, gpu), layout in sorted(layouts.items()):
        if layout is not None:
            by_node.setdefault(nn, []).append((gpu, layout))
    out: dict[tuple[int, int], list[tuple[int, Instance | None]]] = {}
    for (t, n), k in sorted(placement.counts.items()):
        spec = problem.tasks[t].spec
        if not k or not uses_devices(spec):
            continue
        if is_shared(spec):
            out[t, n] = [(g, None) for g in placement.shares.get((t, n), [])]
            continue
        if is_instance_share(spec):
            out[t, n] = [(g, (_profile_at(layouts.get((n, g)), s), s))
                         for g, s in placement.instance_shares.get((t, n), [])]
            continue
        p = profile_for(spec, view.geometry(n))
        assert p is not None
        picks: list[tuple[int, Instance | None]] = []
        for gpu, layout in by_node.get(n, []):  # (every GPU of the plan per pod took 0.4 s of a mig-XL decode)
            for name, s in layout:
                if len(picks) < k and name == p.name and (n, gpu, s) not in busy:
                    busy.add((n, gpu, s))
                    picks.append((gpu, (name, s)))
        out[t, n] = picks
    return out


def _profile_at(layout: Layout | None, start: int) -> str:
    found = next((name for name, s in layout or () if s == start), None)
    assert found is not None, "a shared instance is in its GPU's layout after the plan"
    return found


def shareable_instances(problem: Problem, placement: Placement, n: int, profile: str) -> list[tuple[int, int]]:
    """Instances of `profile` node n's re-partitioned GPUs offer a new share (GPU, start), in GPU then start
    order: in their new layout, held by no running pod, not shared already by the plan."""
    view = problem.device_view()
    busy = {(g.gpu, s) for g in view.mig[n] for _, s in g.occupied}
    return [(gpu, s) for (nn, gpu), layout in sorted(placement.mig_layouts.items()) if nn == n
            for name, s in layout or () if name == profile and (gpu, s) not in busy
            and (n, gpu, s) not in placement.shared_instances]


def whole_gpu_ids(problem: Problem, placement: Placement) -> list[list[int]]:
    """Per node, the GPU indices whole-GPU pods may take after the plan's MIG and sharing changes, ascending."""
    view = problem.device_view()
    ids = [set(p) for p in view.plain]
    for (n, gpu), layout in placement.mig_layouts.items():
        if layout is None:
            ids[n].add(gpu)
        else:
            ids[n].discard(gpu)
    for n, gpu in placement.sharing_changes:
        ids[n].discard(gpu)
    return [sorted(s) for s in ids]


def shareable_gpus(problem: Problem, placement: Placement, n: int) -> list[int]:
    """Plain GPUs of node n the plan may still share, highest first (whole-GPU pods keep the low ones):
    neither partitioned by its MIG changes nor shared already."""
    view = problem.device_view()
    return [g for g in reversed(view.plain[n])
            if (n, g) not in placement.mig_layouts and (n, g) not in placement.sharing_changes]
