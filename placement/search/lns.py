"""Large neighbourhood search: improve the plan window by window when one model is too big.

Measured (docs/solver.md §2 and §6): above a few tens of thousands of variables CP-SAT's
presolve eats the scheduler cycle and one whole-cluster model only ties greedy, while small
windows (a few racks, ~150 jobs, about a second each, the current plan as hint) improve on it
at every scale. A window frees the pods of a few jobs on a few node groups; every other
placement variable is fixed to its current value, so each step solves the *same* compiled model
(every module's rules and terms included) with most of it decided, and presolve strips the fixed
part in milliseconds. A step's result is kept only when the recomputed objective improves.

Random windows rarely meet where a plan can gain on a big cluster: a valuable gang that waits because
small jobs hold a few GPUs on each node it could use (measured at 4,096 nodes: the whole model's gain over
the greedy plan was 12 more 8-GPU gangs, moving 16 of 6,015 placed jobs; at 12,500 nodes four random windows
of 64 nodes found nothing). So windows are also repairs, one per waiting job, most valuable first: the
nodes the model offers it, the jobs placed there and the nodes the model offers those jobs to move to. The
first window is a repair and the second a random one; after that the kind that gained more per window runs
next (on the mig-XL library instance random windows gain everywhere and repairs little; at 12,500 generated
nodes the reverse).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model
from placement_models import Policy

from placement.compile.context import ModelContext
from placement.solution import Placement

#: Above this many variables, plan() searches by windows instead of one model.
LNS_ABOVE = 30_000
#: Models up to this size get the whole budget; larger ones get WHOLE_MODEL_SHARE of it, and
#: windows take the rest if CP-SAT found nothing (presolve can eat a whole cycle: docs/solver.md §2).
WHOLE_MODEL_SURE = 10_000
WHOLE_MODEL_SHARE = 0.6
#: Nodes per window (whole groups: racks where the request names them).
WINDOW_NODES = 64
#: Pending jobs freed per window.
WINDOW_JOBS = 150
#: Nodes a repair window holds at most (the waiting job's own nodes first, then where their jobs may move).
REPAIR_WINDOW_NODES = 4 * WINDOW_NODES
#: Seconds per window; deterministic mode runs budget/STEP_S windows of DETERMINISTIC_STEP
#: deterministic-time units each (one unit measured ~3-4 s of wall time here in interleaved mode).
STEP_S = 1.0
DETERMINISTIC_STEP = 0.25


@dataclass
class LnsResult:
    placement: Placement
    score: float
    steps: int
    improved: int
    wall_s: float
    #: the windows ended because the plan came within `policy.relative_gap_limit` of the caller's bound
    gap_stop: bool = False


def node_groups(ctx: ModelContext) -> list[np.ndarray]:
    """Racks when nodes carry them (neighbours in the network), else runs of 16 nodes."""
    nodes = ctx.problem.nodes
    by_rack: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        rack = getattr(getattr(node, "topology", None), "rack", None)
        by_rack.setdefault(rack if rack else f"#{i // 16}", []).append(i)
    return [np.array(v, dtype=np.int64) for _, v in sorted(by_rack.items())]


def improve(ctx: ModelContext, start: Placement, policy: Policy, budget_s: float,
            read: Callable[[dict[int, int]], Placement], *, stop: threading.Event | None = None,
            log: Callable[[str], None] | None = None, bound: float | None = None,
            accept: Callable[[Placement, dict[int, int]], bool] | None = None) -> LnsResult:
    """Run windows until the budget ends, or until the plan is within `policy.relative_gap_limit` of `bound`
    (a bound on every valid plan; checked between windows, on recomputed scores, so deterministic mode
    stops at the same window every run); return the best placement found (at worst `start`). A window's plan
    is kept only when it scores higher and `accept` (when given) takes it: the caller's rules on what a plan
    may trade (strict classes: no higher class given up for lower ones)."""
    began = time.perf_counter()
    rng = np.random.default_rng(policy.seed)
    problem = ctx.problem
    groups = node_groups(ctx)
    per_window = max(1, round(WINDOW_NODES / max(1.0, np.mean([g.size for g in groups]))))
    job_of_task = np.array([t.job for t in problem.tasks], dtype=np.int64)
    cand_nodes = [np.asarray(c, dtype=np.int64) for c in ctx.candidates]
    current = start
    values = ctx.assignment_of(current)
    score = _score(ctx, values)
    steps = improved = 0
    # deterministic mode: a fixed number of steps, each bounded by deterministic time
    max_steps = max(1, int(budget_s / STEP_S)) if policy.deterministic else None
    gap_stop = False
    targets = _targets(ctx, current, job_of_task, cand_nodes)  # repairs first, most valuable waiting job first
    pinned: _Pinned | None = None  # made at the first window
    pairs = _pairs(cand_nodes)
    gains = {"repair": 0.0, "random": 0.0}  # what each kind of window gained so far, and how often it ran
    tries = {"repair": 0, "random": 0}
    while not (stop is not None and stop.is_set()):
        if bound is not None and policy.relative_gap_limit > 0 and \
                bound - score <= policy.relative_gap_limit * max(1.0, abs(bound)):
            gap_stop = True
            break
        left = budget_s - (time.perf_counter() - began)
        if max_steps is not None and steps >= max_steps:
            break
        if max_steps is None and left < 0.2:
            break
        placed_now = current.placed_jobs(problem) if targets else set()
        while targets and targets[0] in placed_now:
            targets.pop(0)  # placed by an earlier window
        repairing = bool(targets) and _repair_next(gains, tries, steps)
        kind = "repair" if repairing else "random"
        tries[kind] += 1
        if repairing:
            target = targets.pop(0)
            window = _repair_window(ctx, current, target, job_of_task, cand_nodes)
            jobs = _window_jobs(ctx, current, window, job_of_task, cand_nodes, rng, pairs) | {target}
        else:
            window = np.zeros(problem.n_nodes, dtype=bool)
            for g in rng.choice(len(groups), size=min(per_window, len(groups)), replace=False):
                window[groups[g]] = True
            jobs = _window_jobs(ctx, current, window, job_of_task, cand_nodes, rng, pairs)
        steps += 1
        if not jobs:
            continue
        pinned = pinned or _Pinned(ctx, values)
        freed = _freed(ctx, window, jobs, cand_nodes)
        model = pinned.free(freed, values)
        solver = cp_model.CpSolver()
        p = solver.parameters
        p.num_workers = policy.workers
        p.random_seed = int(rng.integers(0, 2**31 - 1))
        if policy.deterministic:
            p.interleave_search = True
            p.max_deterministic_time = DETERMINISTIC_STEP
            p.max_time_in_seconds = 10 * STEP_S
        else:
            p.max_time_in_seconds = max(0.05, min(STEP_S, left))
        code = solver.solve(model)
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            candidate = read(dict(enumerate(solver.response_proto.solution)))
            cand_values = ctx.assignment_of(candidate)
            cand_score = _score(ctx, cand_values)
            if cand_score > score + 1e-9 and (accept is None or accept(candidate, cand_values)):
                gains[kind] += cand_score - score
                current, values, score = candidate, cand_values, cand_score
                improved += 1
                if log is not None:
                    log(f"lns step {steps}: {len(jobs)} jobs, {int(window.sum())} nodes -> objective {score:.3f}")
        pinned.pin(freed, values)  # the window's decisions, to the plan kept
    return LnsResult(current, score, steps, improved, time.perf_counter() - began, gap_stop)


def _repair_next(gains: dict[str, float], tries: dict[str, int], steps: int) -> bool:
    """Is the next window a repair? The first one is, then one random window; after that the kind that gained
    more per window so far (no clock: deterministic mode picks the same), alternating while they tie."""
    if tries["repair"] == 0:
        return True
    if tries["random"] == 0:
        return False
    repair, random = gains["repair"] / tries["repair"], gains["random"] / tries["random"]
    return repair > random if repair != random else steps % 2 == 0


def _score(ctx: ModelContext, values: dict[int, int]) -> float:
    return sum(ctx.objective.values(lambda v: values[v.index]).values())


def _targets(ctx: ModelContext, current: Placement, job_of_task: np.ndarray, cand_nodes: list[np.ndarray]
             ) -> list[int]:
    """Waiting jobs the model offers a node, most valuable first: highest priority, then most GPUs, then the
    request's order. Interchangeable jobs (the same shape, class and team) are tried once: a window that cannot
    place one cannot place its classmate."""
    problem = ctx.problem
    placed = current.placed_jobs(problem)
    offered = {int(job_of_task[t]) for t, c in enumerate(cand_nodes) if c.size}
    seen: set[tuple[object, ...]] = set()
    out = []
    for j in sorted(offered - placed, key=lambda j: (-problem.jobs[j].priority, -problem.job_gpus(j), j)):
        shape = (problem.jobs[j].priority, problem.job_team[j] if problem.job_team else -1,
                 tuple((id(cand_nodes[t]), problem.tasks[t].demand.tobytes(), problem.tasks[t].replicas)
                       for t in problem.job_tasks[j]))
        if shape not in seen:
            seen.add(shape)
            out.append(j)
    return out


def _repair_window(ctx: ModelContext, current: Placement, j: int, job_of_task: np.ndarray,
                   cand_nodes: list[np.ndarray]) -> np.ndarray:
    """The nodes a repair of waiting job j frees: the ones the model offers it, then the ones it offers the jobs
    placed there to move to, up to REPAIR_WINDOW_NODES in that order."""
    problem = ctx.problem
    own = np.unique(np.concatenate([cand_nodes[t] for t in problem.job_tasks[j]]))
    window = np.zeros(problem.n_nodes, dtype=bool)
    window[own[:REPAIR_WINDOW_NODES]] = True
    holders = sorted({int(job_of_task[t]) for (t, n), k in current.counts.items() if k and window[n]})
    room = REPAIR_WINDOW_NODES - int(window.sum())
    for h in holders:
        if room <= 0:
            break
        for t in problem.job_tasks[h]:
            exits = cand_nodes[t][~window[cand_nodes[t]]][:room]
            window[exits] = True
            room -= exits.size
    return window


def _pairs(cand_nodes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(task, node) of every pair the model holds, as two arrays: which tasks a window touches is one mask."""
    sizes = [c.size for c in cand_nodes]
    tasks = np.repeat(np.arange(len(cand_nodes), dtype=np.int64), sizes)
    nodes = np.concatenate(cand_nodes).astype(np.int64) if sum(sizes) else np.zeros(0, dtype=np.int64)
    return tasks, nodes


def _window_jobs(ctx: ModelContext, current: Placement, window: np.ndarray, job_of_task: np.ndarray,
                 cand_nodes: list[np.ndarray], rng: np.random.Generator,
                 pairs: tuple[np.ndarray, np.ndarray] | None = None) -> set[int]:
    """Jobs that may move: placed wholly inside the window, or pending with a candidate in it. `pairs`: the
    model's pairs (`_pairs`), made once per search."""
    outside: set[int] = set()
    placed: set[int] = set()
    for (t, n), k in current.counts.items():
        if k:
            j = int(job_of_task[t])
            placed.add(j)
            if not window[n]:
                outside.add(j)
    tasks, nodes = pairs if pairs is not None else _pairs(cand_nodes)
    touching = set(job_of_task[np.unique(tasks[window[nodes]])].tolist())
    movable = sorted(touching - outside)
    # every job placed in the window may move (they hold its capacity); of the waiting ones, half
    # the highest priorities (they gain most from a swap) and half at random (so nothing is never tried)
    inside = [j for j in movable if j in placed]
    waiting = [j for j in movable if j not in placed]
    if len(waiting) > WINDOW_JOBS:
        jobs = ctx.problem.jobs
        top = sorted(waiting, key=lambda j: (-jobs[j].priority, j))[: WINDOW_JOBS // 2]
        rest = sorted(set(waiting) - set(top))
        pick = rng.choice(len(rest), size=min(WINDOW_JOBS - len(top), len(rest)), replace=False)
        waiting = top + [rest[i] for i in sorted(pick)]
    return set(inside) | set(waiting)


class _Pinned:
    """One copy of the compiled model with every placement decision pinned to the current plan. A window frees
    its own decisions for one solve and pins them back after, so each step's model is the one a fresh copy
    pinned outside the window would be (the same proto), at the cost of the window alone: a fresh copy per
    window, pinning all 47,000 variables, took 0.12 s of a 0.3 s step at 12,500 nodes."""

    def __init__(self, ctx: ModelContext, values: dict[int, int]) -> None:
        self.model = ctx.model.clone()
        self._vars = self.model.proto.variables
        self._original = ctx.model.proto.variables
        for xs in ctx.x:
            for var in xs:
                self._pin(var.index, values[var.index])
        for var in ctx.placed:
            self._pin(var.index, values[var.index])

    def _pin(self, index: int, value: int) -> None:
        dom = self._vars[index].domain
        dom.clear()
        dom.extend([value, value])

    def free(self, indices: list[int], values: dict[int, int]) -> cp_model.CpModel:
        """The model with `indices` back to their own domains and the current plan as the hint."""
        for index in indices:
            dom = self._vars[index].domain
            dom.clear()
            dom.extend(list(self._original[index].domain))
        hint = self.model.proto.solution_hint
        hint.vars.clear()
        hint.values.clear()
        hint.vars.extend(list(values.keys()))
        hint.values.extend(list(values.values()))
        return self.model

    def pin(self, indices: list[int], values: dict[int, int]) -> None:
        """Pin `indices` again, to the current plan's values (the window's result, when it was kept)."""
        for index in indices:
            self._pin(index, values[index])


def _freed(ctx: ModelContext, window: np.ndarray, jobs: set[int], cand_nodes: list[np.ndarray]) -> list[int]:
    """The decisions a window frees: the pods of its jobs on its nodes, and whether each of its jobs runs."""
    problem = ctx.problem
    out: list[int] = []
    for j in sorted(jobs):
        for t in problem.job_tasks[j]:
            inside = window[cand_nodes[t]]
            out.extend(var.index for var, free in zip(ctx.x[t], inside.tolist(), strict=True) if free)
        out.append(ctx.placed[j].index)
    return out


__all__ = ["LNS_ABOVE", "LnsResult", "improve", "node_groups"]
