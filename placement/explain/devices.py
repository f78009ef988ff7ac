"""Pending reasons for MIG and shared pods (and pods sharing a MIG instance): which device filter emptied a
task's nodes, and whether sharing idle GPUs would have helped."""

from __future__ import annotations

import numpy as np

from placement import catalog
from placement.baseline.devices import GreedyDevices, Placer
from placement.baseline.topology import fill_gang
from placement.devices.pods import fresh_room, profile_for
from placement.devices.view import is_shared, uses_devices
from placement.problem import Problem, Slot, TaskInfo
from placement.rightsize import gang_minimums
from placement.solution import Placement

#: Before any plan, the memo `placement.memo` is afterwards: idle plain GPUs, loaded ledgers, fit answers.
_MEMO: Slot[dict[str, object]] = Slot("device_memo")


def _memo(problem: Problem, placement: Placement | None) -> dict[str, object]:
    """Where this module keeps what it derives: on the placement once there is one, else on the problem."""
    return placement.memo if placement is not None else problem.facts.slot(_MEMO, problem, dict)


def filter_reason(problem: Problem, task: TaskInfo, stage: str) -> str:
    """Why no node can take one MIG/shared pod of the task, for the filter stage that emptied its list."""
    spec = task.spec
    view = problem.device_view()
    if stage == "mig_profile":
        if spec.mig_auto:
            return (f"no MIG profile of a matching node's GPU model has {spec.gpu_memory_gib:g} GiB for task "
                    f"'{spec.name}' (mig_profile auto)")
        models = sorted({m for m in view.models if m and catalog.mig_geometry(m) is not None})
        small = [m for m in models if (g := catalog.mig_geometry(m)) and (q := g.profile(spec.mig_profile or ""))
                 and spec.gpu_memory_gib is not None and q.memory_gib < spec.gpu_memory_gib]
        if small:
            return (f"MIG profile {spec.mig_profile} has less than the {spec.gpu_memory_gib:g} GiB task "
                    f"'{spec.name}' asks (gpu_memory_gib)")
        return (f"no matching node's GPU model offers MIG profile {spec.mig_profile} for task '{spec.name}'"
                + (f" (MIG models here: {', '.join(models)})" if models else " (no MIG-capable GPUs here)"))
    if stage == "mig_room":
        names = sorted({p.name for n in range(problem.n_nodes)
                        if (p := profile_for(spec, view.geometry(n))) is not None})
        wanted = "/".join(names) or str(spec.mig_profile)
        if not view.changes:
            return f"no free {wanted} instance and re-partitioning disabled (policy.allow_mig_changes)"
        models = sorted({view.models[n] or "" for n in range(problem.n_nodes) if view.mig[n]})
        return (f"every {'/'.join(models) or 'MIG GPU'} with room has running instances at the memory slices a "
                f"{wanted} needs, and no idle GPU is left to partition")
    if stage == "instance_share_room":
        memory = f" and {spec.gpu_memory_gib:g} GiB" if spec.gpu_memory_gib is not None else ""
        text = (f"no shared MIG {spec.mig_profile} instance has {spec.gpu_share:g} of the instance{memory} and a "
                f"replica free for task '{spec.name}'")
        if view.changes:
            return text + ", nor could a re-partition make one"
        return text + ("; re-partitioning is off (policy.allow_mig_changes), so no free instance is shared and no "
                       "new one made")
    if stage == "shared_gpus":
        return (f"no matching node has a shared (time-slicing/MPS) GPU for task '{spec.name}'"
                + (" nor an idle GPU to share" if view.sharing_changes else "") + sharing_hint(problem, task))
    return (f"no shared GPU has {spec.gpu_share:g} of a GPU"
            + (f" and {spec.gpu_memory_gib:g} GiB" if spec.gpu_memory_gib is not None else "")
            + f" and a replica free for task '{spec.name}'"
            + (", nor would an idle GPU once shared" if view.sharing_changes else "") + sharing_hint(problem, task))


def sharing_hint(problem: Problem, task: TaskInfo, placement: Placement | None = None,
                 usage: np.ndarray | None = None) -> str:
    """"; 3 idle GPUs on matching nodes could be shared if policy.allow_sharing_changes were on" (or the cap
    that stops it) when that is why a share pod waits; "" otherwise. With a placement, GPUs it uses, partitions
    or shares are not idle, and `usage` (what it takes per node) must leave the pod's CPU and memory."""
    if not is_shared(task.spec) or task.eligible is None:
        return ""
    view = problem.device_view()
    policy = problem.request.policy
    cap = policy.max_sharing_changes
    capped = cap is not None and placement is not None and len(placement.sharing_changes) >= cap
    if view.sharing_changes and not capped:
        return ""
    nodes = task.eligible
    left = problem.free[nodes, 1:] - (usage[nodes, 1:] if usage is not None else 0)
    nodes = nodes[np.all(left >= task.demand[1:], axis=1)]
    nodes = nodes[_idle_plain(problem, placement, usage)[nodes] > 0]
    idle = int((_idle_plain(problem, placement, usage)[nodes] * (fresh_room(task.spec, view, nodes) > 0)).sum())
    if not idle:
        return ""
    gpus = f"{idle} idle GPU{'s' if idle != 1 else ''} on matching nodes could be shared"
    if not policy.allow_sharing_changes:
        return f"; {gpus} if policy.allow_sharing_changes were on"
    return f"; {gpus}, but policy.max_sharing_changes ({cap}) is reached"


def _idle_plain(problem: Problem, placement: Placement | None, usage: np.ndarray | None) -> np.ndarray:
    """Per node, plain GPUs nobody uses: before any plan, or after `placement` (which takes `usage`, the same on
    every call for one placement: built once, since every pending share job asks)."""
    memo = _memo(problem, placement)
    if "idle_plain" not in memo:
        view = problem.device_view()
        counts = np.array([len(p) for p in view.plain], dtype=np.int64)
        if placement is not None:
            for (n, gpu), layout in placement.mig_layouts.items():
                counts[n] -= int(layout is not None and gpu in view.plain[n])  # plain GPUs partitioned
            for n, _ in placement.sharing_changes:
                counts[n] -= 1
            if usage is not None:
                counts -= usage[:, 0]  # whole-GPU pods (a GPU made whole again may be one: a hint, not a proof)
        memo["idle_plain"] = np.maximum(counts, 0)
    return memo["idle_plain"]  # type: ignore[return-value]


def _loaded(problem: Problem, free: np.ndarray, placement: Placement | None) -> tuple[GreedyDevices, np.ndarray]:
    """The device ledger with `placement` loaded and the room it leaves in `free`, built once per
    (problem, placement, free): every pending job of a plan asks `job_fits` against the same ones,
    and loading a plan of thousands of pods for each of them took 300 s of a 10 s plan at 1,024
    nodes (mig-XL, 1,287 pending jobs). Callers work on `trial()` copies, which copy a node's state
    on first write, so the cached ledger is never changed."""
    memo = _memo(problem, placement)
    cache: dict[bytes, tuple[GreedyDevices, np.ndarray]] = memo.setdefault("loaded_ledgers", {})  # type: ignore[assignment]
    key = free.tobytes()
    hit = cache.get(key)
    if hit is None or hit[0].problem is not problem:  # replace(problem, ...) views share their facts
        ledger, room = GreedyDevices(problem), free.copy()
        if placement is not None:
            ledger.apply(placement, room)
        hit = cache[key] = (ledger, room)
    return hit


def job_fits(problem: Problem, j: int, free: np.ndarray, placement: Placement | None, place_whole: Placer) -> bool:
    """Would job j fit, alone, in `free` (and, given a placement, beside its pods and MIG changes)?

    Answered once per job shape: pending jobs that differ only in names get the same answer against the
    same (problem, placement, free), and re-running the MIG greedy for each of 1,287 pending jobs cost 8 s
    of a plan at 1,024 nodes (mig-XL). The key holds everything the fit reads: per task (in the order it
    places them) the spec but its name, demand, candidates, pods per node cap and replicas; the job's
    `needed` and per-task minimums; `free`; and `place_whole` (the value keeps the problem, compared by
    identity, as _loaded does).
    """
    memo = _memo(problem, placement)
    cache: dict[tuple[object, ...], tuple[Problem, bool]] = memo.setdefault("job_fits", {})  # type: ignore[assignment]
    order = sorted(problem.job_tasks[j], key=lambda t: -int(problem.tasks[t].demand[0]))
    shape = tuple((repr(sorted(problem.tasks[t].spec.model_dump(exclude={"name"}).items())),
                   problem.tasks[t].demand.tobytes(), problem.tasks[t].candidates.tobytes(),
                   problem.tasks[t].max_per_node.tobytes(), problem.tasks[t].replicas) for t in order)
    minimums = tuple((tuple(map(order.index, members)), least) for members, least in gang_minimums(problem, j))
    key = (shape, problem.jobs[j].needed, minimums, free.tobytes(), place_whole)
    hit = cache.get(key)
    if hit is not None and hit[0] is problem:
        return hit[1]
    fits = _job_fits(problem, j, free, placement, place_whole)
    cache[key] = (problem, fits)
    return fits


def _job_fits(problem: Problem, j: int, free: np.ndarray, placement: Placement | None, place_whole: Placer) -> bool:
    """The greedy's gang rule (`fill_gang`: each task's minimum first, then the extra pods), MIG and shared pods
    through the device ledger: the job fits when every task's minimum and its `needed` are placed."""
    loaded, room = _loaded(problem, free, placement)
    ledger, trial = loaded.trial(), room.copy()
    counts: dict[tuple[int, int], int] = {}

    def place(t: int, most: int) -> int:
        if uses_devices(problem.tasks[t].spec):
            return ledger.place_task(t, trial, counts, None, most)
        return place_whole(problem, t, trial, counts, None, most)

    return fill_gang(problem, j, place) > 0 and ledger.settle(counts)
