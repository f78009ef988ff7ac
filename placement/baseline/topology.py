"""The topology-aware greedy: a gang with a topology goes to whole domains first, best fit (as
Kueue's BestFit): the fullest domain that still holds it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from placement.problem import Problem
from placement.rightsize import gang_minimums
from placement.topology import NODE_LEVEL, ClusterTopology

# --------------------------------------------------------------------------------------------
# Topology-aware greedy (the baseline): whole domains first, Kueue's BestFit
# --------------------------------------------------------------------------------------------

#: baseline.gangs.place_task: (problem, task, free, counts, allowed node mask, pod limit) -> pods placed.
PlaceTask = Callable[["Problem", int, np.ndarray, dict[tuple[int, int], int], "np.ndarray | None", "int | None"], int]
#: One task's placer inside a gang's trial: (task, pods at most) -> pods placed.
PlaceSome = Callable[[int, int], int]


def fill_gang(problem: Problem, j: int, place: PlaceSome) -> int:
    """Place gang j, minimums first (the greedy's gang rule, with or without a topology).

    Tasks go by GPUs per pod, descending: first each task up to its minimum (`min_replicas`; a task
    and its right-size alternative together), then each task's extra pods up to its replicas, so an
    elastic task's extras never take the room another task's minimum needs. Returns the pods placed,
    or 0 when a task's minimum or the job's `needed` is short (the caller drops its trial). A job
    whose every pod is required makes the same calls as a one-pass fill; one with only
    `min_available` skips the first pass.
    """
    groups = gang_minimums(problem, j)
    if len(groups) == 1 and len(groups[0][0]) == 1:  # one task (most gangs): the same two passes, without the books
        (t,), minimum = groups[0]
        got = place(t, minimum) if minimum > 0 else 0
        if got < minimum:
            return 0
        more = problem.tasks[t].replicas - got
        if more > 0:
            got += place(t, more)
        return got if got >= problem.jobs[j].needed else 0
    order = sorted(problem.job_tasks[j], key=lambda t: -int(problem.tasks[t].demand[0]))
    rank = {t: i for i, t in enumerate(order)}
    group_of = {t: g for g in groups for t in g[0]}
    last = {t: max(members, key=rank.__getitem__) for members, _ in groups for t in members}
    got = dict.fromkeys(order, 0)
    for t in order:
        members, minimum = group_of[t]
        short = minimum - sum(got[u] for u in members)
        if short > 0:
            got[t] += place(t, short)
        if last[t] == t and sum(got[u] for u in members) < minimum:
            return 0
    for t in order:
        more = problem.tasks[t].replicas - got[t]
        if more > 0:
            got[t] += place(t, more)
    placed = sum(got.values())
    return placed if placed >= problem.jobs[j].needed else 0


def place_job(problem: Problem, j: int, free: np.ndarray, counts: dict[tuple[int, int], int],
              place_task: PlaceTask) -> int:
    """Place gang j honouring its `job.topology`; on success update `free` and `counts` and return
    the pods placed, else return 0 and leave both untouched.

    Scopes are tried in order, the whole gang inside one: with `required`, each domain of that
    level; with only `preferred`, each domain of that level, then of every wider level, then the
    whole cluster (Kueue's podset-preferred-topology). Within a level, BestFit: the domain with the
    fewest free GPUs that still holds the gang's GPUs, so big empty domains stay whole. Slices go
    group by group, each into the fullest slice-level domain of the scope that fits it.
    """
    job = problem.jobs[j]
    view = problem.topology()
    for scope in _scopes(problem, view, j, free):
        trial, got = free.copy(), {}
        placed = _fill(problem, view, j, scope, trial, got, place_task)
        if placed >= job.needed and placed > 0:
            free[:] = trial
            for key, k in got.items():
                counts[key] = counts.get(key, 0) + k
            return placed
    return 0


def job_gpus_needed(problem: Problem, j: int) -> int:
    """GPUs the gang must have to run: all of its tasks, or for an elastic gang each task's minimum and
    then its smallest other pods up to `needed` (a lower bound: a domain with less cannot hold it)."""
    job = problem.jobs[j]
    if job.needed == job.pods:
        return sum(int(problem.tasks[t].demand[0]) * problem.tasks[t].replicas for t in problem.job_tasks[j])
    must, rest, count = 0, [], 0
    for members, minimum in gang_minimums(problem, j):
        per_pod = min(int(problem.tasks[t].demand[0]) for t in members)
        must += per_pod * minimum
        count += minimum
        rest += [per_pod] * (problem.tasks[members[0]].replicas - minimum)
    return must + sum(sorted(rest)[: max(0, job.needed - count)])


def domain_free_gpus(problem: Problem, view: ClusterTopology, j: int, level: str, free: np.ndarray) -> np.ndarray:
    """Per domain of `level`: free GPUs on nodes where some GPU task of job j may run."""
    lvl = view.level(level)
    nodes = _gpu_candidates(problem, j)
    return np.bincount(lvl.of_node[nodes], weights=free[nodes, 0], minlength=lvl.count).astype(np.int64)


def _gpu_candidates(problem: Problem, j: int) -> np.ndarray:
    cands = [problem.tasks[t].candidates for t in problem.job_tasks[j] if problem.tasks[t].demand[0] > 0]
    if not cands:
        cands = [problem.tasks[t].candidates for t in problem.job_tasks[j]]
    return np.unique(np.concatenate(cands)) if cands else np.zeros(0, dtype=np.intp)


def best_fit(problem: Problem, view: ClusterTopology, j: int, level: str, free: np.ndarray) -> list[int]:
    """Domains of `level` that have the gang's GPUs free on its candidate nodes, fullest first."""
    room = domain_free_gpus(problem, view, j, level, free)
    touched = np.zeros(view.level(level).count, dtype=bool)
    for t in problem.job_tasks[j]:
        touched[view.level(level).of_node[problem.tasks[t].candidates]] = True
    ok = np.flatnonzero(touched & (room >= job_gpus_needed(problem, j)))
    return [int(d) for d in ok[np.argsort(room[ok], kind="stable")]]


def _scopes(problem: Problem, view: ClusterTopology, j: int, free: np.ndarray) -> Iterator[np.ndarray | None]:
    spec = problem.jobs[j].topology
    if spec is None:
        yield None
        return
    if spec.required is not None:
        # A narrower preferred level first: each of its domains lies inside one required domain, so
        # a gang whole in it meets both; then the required domains themselves.
        inner = spec.preferred if spec.preferred and view.height(spec.preferred) < view.height(spec.required) else None
        for level in ([inner] if inner else []) + [spec.required]:
            lvl = view.level(level)
            for d in best_fit(problem, view, j, level, free):
                yield lvl.of_node == d
        return
    if spec.preferred is not None:
        levels = [lv for lv in (NODE_LEVEL, *view.levels) if view.height(lv) >= view.height(spec.preferred)]
    else:
        levels = []
    for level in levels:
        lvl = view.level(level)
        for d in best_fit(problem, view, j, level, free):
            yield lvl.of_node == d
    yield None


def _fill(problem: Problem, view: ClusterTopology, j: int, scope: np.ndarray | None, free: np.ndarray,
          counts: dict[tuple[int, int], int], place_task: PlaceTask) -> int:
    spec = problem.jobs[j].topology
    sliced = spec is not None and spec.slice is not None

    def place(t: int, most: int) -> int:
        if sliced and problem.tasks[t].demand[0] > 0:
            return _fill_slices(problem, view, t, scope, free, counts, place_task, most)
        return place_task(problem, t, free, counts, scope, most)

    return fill_gang(problem, j, place)


def _fill_slices(problem: Problem, view: ClusterTopology, t: int, scope: np.ndarray | None, free: np.ndarray,
                 counts: dict[tuple[int, int], int], place_task: PlaceTask, most: int | None = None) -> int:
    """Whole groups of `slice.size` pods, each inside one domain of the slice level (BestFit); at most
    `most` pods rounded up to whole groups (a minimum of 5 in groups of 4 takes two groups)."""
    task = problem.tasks[t]
    spec = problem.jobs[task.job].topology
    assert spec is not None and spec.slice is not None
    size, lvl = spec.slice.size, view.level(spec.slice.required)
    cand = task.candidates if scope is None else task.candidates[scope[task.candidates]]
    need = size * int(task.demand[0])
    want = task.replicas if most is None else min(task.replicas, -(-most // size) * size)
    got = 0
    while got + size <= want:
        room = np.bincount(lvl.of_node[cand], weights=free[cand, 0], minlength=lvl.count)
        touched = np.zeros(lvl.count, dtype=bool)
        touched[lvl.of_node[cand]] = True
        order = [int(d) for d in np.argsort(room, kind="stable") if touched[d] and room[d] >= need]
        for d in order:
            allowed = lvl.of_node == d if scope is None else (lvl.of_node == d) & scope
            trial, group = free.copy(), {}
            if place_task(problem, t, trial, group, allowed, size) == size:
                free[:] = trial
                for key, k in group.items():
                    counts[key] = counts.get(key, 0) + k
                got += size
                break
        else:
            break
    return got
