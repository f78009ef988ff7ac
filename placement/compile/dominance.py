"""Dominance among interchangeable waiting jobs: only those an optimal plan could need get variables.

A scheduler's queue holds hundreds of jobs of one shape: same tasks, team, class and flags, told
apart only by when they were submitted and how long they should run. In every constraint two
such jobs are interchangeable; in the objective they differ only in their own terms, aging per
pod (compile/fairness.py), turnaround per job (compile/waiting.py) and what their pods pay for
where they run (compile/alignment.py: it depends on the node and the job's runtime). Where pools
are priced, the cost terms charge by runtime too (compute, reclaim risk), so there only jobs of one
runtime are classmates. Say A was
submitted no later than B (so A may preempt whatever B may: `Problem.rule_kind`) and A's own terms,
less the most its pods could pay anywhere (`_own_floor`), are worth at least B's in the model's
integer units. Then a plan that places B and leaves A out is matched or beaten by the same plan
with A in B's place.

A class can run at most `cap` jobs at once: for each task, the pods its candidate nodes could take if
they held nothing else (free capacity plus all that some pending job could preempt), over the pods
one job needs. So once `cap` kept jobs of a class dominate B, some optimal plan leaves B out, and B
gets no variable: its tasks get no candidate node. Repeating the swap argument shows the optimum of
the trimmed model is the optimum of the whole one (tests/test_dominance.py solves both), while a
queue of a thousand one-GPU jobs in front of forty free GPUs compiles about forty. (Only when
extreme weights make the objective divide its coefficients through, `ObjectiveRegistry.expression`,
may the model's own rounding differ from the units compared here.)

Left whole, each its own class: elastic jobs (`min_replicas`, `min_available`; a partial gang
changes the comparison), right-size offers, clusters with MIG or shared GPUs (a pod there is not
a GPU), jobs a reservation names (must start, or hold) and jobs the previous plan named (their
stability term is their own). A hold binds by submission and runtime, so which holds bind a job
joins its class. Jobs the greedy plan places are always kept: its plan stays a feasible hint.

The same argument restores arrival order after the search (`in_arrival_order`): aging rounds to the
model's units, so classmates submitted minutes apart tie, and an earlier one worth at least as much
takes the place of a later one the solver happened to place.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np

from placement import pricing
from placement.compile import alignment, nominal
from placement.compile.context import SCALE
from placement.compile.fairness import waited_days
from placement.compile.priority import pod_value
from placement.compile.terms import AGING, QUOTA, TURNAROUND
from placement.compile.waiting import shortness
from placement.problem import Problem, Slot
from placement.rightsize import gang_minimums, pairs
from placement.solution import Placement
from placement.timeline import reservation_key

#: Job fields that tell interchangeable jobs apart without changing a constraint (tasks are compared
#: by their shape, not their field).
_OWN = frozenset({"name", "namespace", "submitted_at", "expected_runtime_h", "tasks"})


def dominated_tasks(problem: Problem, kept: Placement) -> frozenset[int]:
    """Tasks of the jobs no optimal plan needs (module docstring); `kept`'s placed jobs stay."""
    room = _room(problem)
    keep = kept.placed_jobs(problem)
    out: set[int] = set()
    alone: dict[tuple[int, bytes], int] = {}  # (candidate array, demand) -> pods its nodes take alone
    for members in classes(problem).values():
        cap = _cap(problem, members[0], room, alone)
        if cap is None or len(members) <= cap:
            continue
        ahead: list[int] = []  # `_own_floor` of the kept jobs so far (all submitted no later), ascending
        for j in members:
            value = _own_value(problem, j)
            if j not in keep and len(ahead) - bisect.bisect_left(ahead, value) >= cap:
                out.update(problem.job_tasks[j])
            else:
                bisect.insort(ahead, _own_floor(problem, j))
    return frozenset(out)


def classes(problem: Problem) -> dict[tuple[Hashable, ...], list[int]]:
    """Interchangeable jobs by class (module docstring), each class in reservation order (`reservation_key`):
    only all-or-nothing jobs that nothing names one by one. Kept for the problem's lifetime (its first asker
    owns the cache; a view made with `replace` computes its own)."""
    cache = _owned(problem)
    if cache.classes is not None:
        return cache.classes
    found: dict[tuple[Hashable, ...], list[int]] = {}
    cache.classes = found
    if pairs(problem) or problem.needs_device_ledger():  # right-size offers; MIG, sharing: pods are no GPUs
        return found
    named = _named(problem)
    for j in range(len(problem.jobs)):
        if (problem.jobs[j].name not in named and j not in problem.twins and problem.job_tasks[j]
                and _whole_gang(problem, j)):
            found.setdefault(_class_key(problem, j), []).append(j)
    keys = {j: reservation_key(problem.jobs[j]) for members in found.values() for j in members}
    for members in found.values():
        members.sort(key=keys.__getitem__)
    return found


@dataclass
class _Cache:
    """What this module derives once per problem."""

    #: interchangeable jobs by class (`classes`)
    classes: dict[tuple[Hashable, ...], list[int]] | None = None
    #: per job, its own objective terms if placed (`_own_value`)
    own_values: dict[int, int] = field(default_factory=dict)


#: This module's cache (`_owned`); per view.
_CACHE: Slot[_Cache] = Slot("dominance", per_view=True)


def _owned(problem: Problem) -> _Cache:
    """This module's cache for `problem`: kept in its facts for the first problem that asks; views made with
    `replace(problem, ...)` share the facts but not their schedule or devices, so they get a fresh one."""
    return problem.facts.slot(_CACHE, problem, _Cache)


def in_arrival_order(problem: Problem, placement: Placement, terms: dict[str, float]
                     ) -> tuple[Placement, dict[str, float]]:
    """The plan with arrival order restored among interchangeable jobs, and its terms (`arrival_moves`, then
    `moved_terms`)."""
    out, moves = arrival_moves(problem, placement)
    return out, moved_terms(problem, out, moves, terms)


@dataclass(frozen=True)
class Moves:
    """What `arrival_moves` changed: the swaps (placed job, the earlier job taking its place), and the quota term's
    change (0 where the model has no such term)."""

    swaps: tuple[tuple[int, int], ...] = ()
    quota: float = 0.0


def arrival_moves(problem: Problem, placement: Placement) -> tuple[Placement, Moves]:
    """The plan with arrival order restored among interchangeable jobs, and the moves made. Needs no terms, so a
    call may decode the plan while its terms are still being scored (placement.api).

    The model rounds aging to its units, so jobs of one class submitted minutes apart tie, and the solver
    may place the younger. Where a placed job has an unplaced classmate submitted earlier whose own terms
    are worth at least as much on its nodes (`_worth_as_much`), the earlier one takes its place: the same pods
    on the same nodes, every constraint met as before (the module docstring), the objective no lower. An
    earlier job may come before others of its team in Kueue's admission order and count less within nominal
    (the quota term): then no job moves."""
    placed = placement.placed_jobs(problem)
    swaps: list[tuple[int, int]] = []  # (placed job, earlier job taking its place)
    for members in classes(problem).values():
        if not placed.intersection(members) or placed.issuperset(members):
            continue
        rank = {j: i for i, j in enumerate(members)}  # reservation order
        waiting = [j for j in members if j not in placed]
        for j in reversed([j for j in members if j in placed]):  # the latest placed first
            value = _own_value(problem, j)
            earlier = None
            for w in waiting:
                if rank[w] >= rank[j]:
                    break  # the rest came later
                if _worth_as_much(problem, w, j, value):
                    earlier = w
                    break
            if earlier is None:
                continue
            waiting.remove(earlier)
            swaps.append((j, earlier))  # j waits now; it came after every job still placed before it
    if not swaps:
        return placement, Moves()
    out = Placement(counts={}, evicted=set(placement.evicted))
    task_of = {}
    for j, earlier in swaps:
        task_of.update(zip(problem.job_tasks[j], problem.job_tasks[earlier], strict=True))
    for (t, n), k in placement.counts.items():
        out.add(task_of.get(t, t), n, k)
    quota = nominal.value(problem, out) - nominal.value(problem, placement)  # 0 where the model has no quota term
    if quota < -1e-9:
        return placement, Moves()
    return out, Moves(tuple(swaps), quota)


def moved_terms(problem: Problem, moved: Placement, moves: Moves, terms: dict[str, float]) -> dict[str, float]:
    """`terms` of the plan before `arrival_moves`, changed by the moves' own terms' difference: the terms of
    `moved`, the plan after them."""
    if not moves.swaps:
        return terms
    changed = dict(terms)
    for j, earlier in moves.swaps:
        for name, value in _own_terms(problem, earlier).items():
            changed[name] = changed.get(name, 0.0) + (value - _own_terms(problem, j)[name]) / SCALE
    if alignment.NAME in changed:  # where a job's pods cost differs by node and job: the moved plan's own value
        changed[alignment.NAME] = alignment.value(problem, moved.counts)
    if QUOTA in changed:  # the quota term read again in admission order
        changed[QUOTA] = terms[QUOTA] + moves.quota
    return changed


def _named(problem: Problem) -> set[str]:
    """Jobs a constraint or term names one by one: reservations and the previous plan's entries."""
    schedule = problem.schedule
    names = set(schedule.must_start) | {h.job for h in schedule.holds}
    previous = problem.request.policy.previous_plan
    if previous is not None:
        names |= {a.job for a in previous.assignments} | {r.job for r in previous.reservations}
    return names


def _whole_gang(problem: Problem, j: int) -> bool:
    """All or nothing: every task places all its pods, and the job needs every pod."""
    tasks = problem.job_tasks[j]
    return (problem.jobs[j].needed == sum(problem.tasks[t].replicas for t in tasks)
            and all(len(group) == 1 and minimum == problem.tasks[group[0]].replicas
                    for group, minimum in gang_minimums(problem, j)))


def _class_key(problem: Problem, j: int) -> tuple[Hashable, ...]:
    """Everything of job j a constraint reads: its fields but its own ones, its tasks' shapes (tasks of
    one shape share their candidate arrays: `placement.problem.build`) and the holds that bind it."""
    job = problem.jobs[j]
    fields = _compared(type(job))(job)
    try:
        hash(fields)
    except TypeError:  # lists, dicts, models among them: those by their text
        fields = tuple(_hashable(value) for value in fields)
    tasks = tuple((problem.tasks[t].name, id(problem.tasks[t].candidates), problem.tasks[t].spec.min_replicas)
                  for t in problem.job_tasks[j])
    now = problem.request.planning_time()
    holds = tuple(h.binds(job, now) for h in problem.schedule.holds)
    team = problem.job_team[j] if problem.job_team else -1
    request = problem.request
    priced = request.policy.weights.cost > 0 and pricing.priced(request)
    paced = bool(problem.speeds.pending) and problem.speeds.pending[j] is not None
    # priced pools charge by runtime (compute, reclaim risk); with a speed table turnaround reads it at the speed
    # placed (compile/waiting.py): classmates then need one runtime
    runtime = job.expected_runtime_h if priced or paced else None
    return (fields, tasks, holds, team, runtime)


def _compared(kind: type) -> Callable[[object], tuple[object, ...]]:
    """A getter of the job fields a class key compares (all but `_OWN`), as one tuple in declaration order; made
    once per model type."""
    found = _COMPARED.get(kind)
    if found is None:
        names = [name for name in kind.model_fields if name not in _OWN]  # type: ignore[attr-defined]
        get = operator.attrgetter(*names)
        found = _COMPARED[kind] = get if len(names) > 1 else (lambda job: (get(job),))
    return found


_COMPARED: dict[type, Callable[[object], tuple[object, ...]]] = {}


def _hashable(value: object) -> Hashable:
    try:
        hash(value)
    except TypeError:  # lists, dicts, models: their text
        return repr(value)
    return value


def _room(problem: Problem) -> np.ndarray:
    """Free capacity plus everything some pending job could preempt: no job's room is larger."""
    room = problem.free.copy()
    for r in problem.preemptable():
        room[problem.running[r].nodes] += problem.running[r].use
    return room


def _cap(problem: Problem, j: int, room: np.ndarray, alone: dict[tuple[int, bytes], int]) -> int | None:
    """Most jobs of job j's class that fit at once: per task, the pods its candidate nodes take alone (each
    node filled with that task's pods only) over the pods one job needs there. None: no bound (its tasks
    ask for nothing, so any number fit). `alone` keeps the pods per candidate array and demand: tasks of one
    shape share their candidate arrays (placement.problem.build), so classes of one shape count them once."""
    most = []
    for t in problem.job_tasks[j]:
        task = problem.tasks[t]
        asked = np.flatnonzero(task.demand > 0).tolist()
        if not asked:
            continue
        key = (id(task.candidates), task.demand.tobytes())
        if key not in alone:
            alone[key] = int(np.min(room[task.candidates][:, asked] // task.demand[asked], axis=1).sum())
        most.append(alone[key] // task.replicas)
    return min(most) if most else None


def _own_value(problem: Problem, j: int) -> int:
    """Job j's own objective terms if placed, in the model's integer units (rounded as the model rounds)."""
    values = _owned(problem).own_values
    if j not in values:
        values[j] = sum(_own_terms(problem, j).values())
    return values[j]


def _own_floor(problem: Problem, j: int) -> int:
    """The least job j's own terms can be worth wherever it is placed: its own value less the most its pods can
    pay for where they run (compile/alignment.py; 0 without it), in the model's integer units."""
    return _own_value(problem, j) - round(alignment.max_cost(problem, j) * SCALE + 0.5)


def _worth_as_much(problem: Problem, w: int, j: int, value: int) -> bool:
    """Are classmate w's own terms worth at least j's (`value`) on whichever nodes j's pods hold? With equal
    runtimes their pods pay alike everywhere (compile/alignment.py), so their own values compare; else w's
    floor must reach j's value."""
    if problem.jobs[w].expected_runtime_h == problem.jobs[j].expected_runtime_h:
        return _own_value(problem, w) >= value
    return _own_floor(problem, w) >= value


def _own_terms(problem: Problem, j: int) -> dict[str, int]:
    """Job j's aging and turnaround terms if placed, in the model's integer units."""
    weights = problem.request.policy.weights
    out = {}
    if weights.aging:
        days = waited_days(problem, j)
        out[AGING] = sum(problem.tasks[t].replicas * round(pod_value(problem.gpu_value(t)) * days * weights.aging
                                                             * SCALE) for t in problem.job_tasks[j])
    if weights.turnaround:
        out[TURNAROUND] = round(shortness(problem, j) * weights.turnaround * SCALE)
    return out
