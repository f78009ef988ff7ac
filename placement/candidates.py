"""Which (task, node) pairs get a variable: all of them on small clusters, the promising ones on big.

At 1,024 nodes every pending task can go to most nodes: ~900k integer variables, which CP-SAT
cannot even presolve within a scheduler cycle (docs/solver.md §2-4). Above a pair budget each
task keeps its best-fit nodes, a spread sample of the rest (so the solver can still trade), and
every node the greedy plan used for it (so the greedy hint stays a feasible solution and the
returned plan is never worse than greedy). This restricts the search, not the rules: every
kept pair is exact, and the plan is still verified against the whole cluster.
"""

from __future__ import annotations

import math

import numpy as np

from placement.baseline.topology import domain_free_gpus, job_gpus_needed
from placement.problem import Problem
from placement.solution import Placement

#: Total (task, node) pairs above which candidate lists are trimmed.
MAX_PAIRS = 20_000
#: Nodes every task keeps at least, beyond what its gang needs.
MIN_PER_TASK = 12
#: The candidate list of a task that gets no variable.
_NONE = np.zeros(0, dtype=np.int64)
#: Share of the pairs kept for repairs (`_repairs`) when each task's share is below MIN_PER_TASK.
REPAIR_SHARE = 0.25


def select(problem: Problem, baseline: Placement, max_pairs: int = MAX_PAIRS,
           min_per_task: int = MIN_PER_TASK, skip: frozenset[int] = frozenset(), *,
           each_task_seen: bool = False) -> list[np.ndarray]:
    """Candidate nodes per task: all of them within `max_pairs`, else each task's best-fit share.

    `min_per_task` is the floor of that share; a caller short of time lowers it (1 still shows every
    term's value for every task, which the whole-problem bound needs, and with fewer pairs than tasks spends
    them on waiting jobs and repairs rather than on the placed tasks; 0 keeps only the nodes the greedy
    plan used, so the model scores that plan and nothing more, and with `each_task_seen` a task the greedy
    plan left out keeps the best-fit nodes its gang needs, so the bound can still read every task's terms).
    Tasks in `skip` get no node (jobs no optimal plan needs: placement.compile.dominance) and no share of
    the pairs.
    """
    full = [_NONE if t in skip else task.candidates for t, task in enumerate(problem.tasks)]
    total = sum(c.size for c in full)
    if total <= max_pairs:
        return full
    used: dict[int, set[int]] = {}
    for (t, n), k in baseline.counts.items():
        if k:
            used.setdefault(t, set()).add(n)
    # beyond the greedy plan's own pairs, each task's best fits, with a share kept for repairs when tight
    shared = max_pairs - sum(len(nodes) for nodes in used.values())
    live = max(1, len(problem.tasks) - len(skip))
    share = max(0, shared) // live
    # fewer pairs than tasks beyond the greedy plan's, and a floor of one (a caller short of time): one pair more
    # for each placed task buys little, so placed tasks keep their greedy nodes, waiting ones the nodes their
    # gang needs, and repairs get the rest (the greedy plan's own pairs are counted apart)
    tight = share == 0 and min_per_task == 1 and not each_task_seen
    aimed = share < MIN_PER_TASK  # a short share per task: repairs must aim (`_repairs`)
    if share < MIN_PER_TASK:
        share = int((1 - REPAIR_SHARE) * max(0, shared)) // live
    share = max(min_per_task, share)
    # the ranking is unread where every task keeps only the greedy plan's nodes
    ranking = _best_fit_ranking(problem) if share or max_pairs or each_task_seen else np.zeros(0)
    ordered: dict[int, np.ndarray] = {}  # tasks sharing one candidate array rank its nodes alike
    out = []
    for t, task in enumerate(problem.tasks):
        cand = full[t]
        if (not share or tight) and cand.size and (t in used or not (each_task_seen or tight)):  # greedy's nodes
            out.append(np.array(sorted(used.get(t, ())), dtype=np.int64))
            continue
        if cand.size == 0 or task.replicas == 1:
            nodes_needed = int(cand.size > 0)
        else:
            nodes_needed = math.ceil(task.replicas / max(1, int(np.median(task.max_per_node))))
        if (not share or tight) and cand.size:  # left out by the greedy plan: the best-fit nodes its gang needs
            out.append(np.sort(_ordered(problem, cand, ranking, ordered)[:nodes_needed]))
            continue
        keep = (max(share, 2 * nodes_needed) if share >= MIN_PER_TASK else max(share, nodes_needed)) if share else 0
        if cand.size <= keep:
            out.append(cand)
            continue
        chosen = set(used.get(t, set()))
        if not keep:
            out.append(np.array(sorted(chosen), dtype=np.int64))
            continue
        order = _ordered(problem, cand, ranking, ordered)
        best = order[: keep * 3 // 4]
        rest = order[keep * 3 // 4:]
        spread = rest[np.linspace(0, rest.size - 1, num=min(rest.size, keep - best.size)).astype(int)]
        chosen |= set(best.tolist()) | set(spread.tolist())
        out.append(np.array(sorted(chosen), dtype=np.int64))
    spare = max_pairs - sum(c.size for t, c in enumerate(out) if not (tight and t in used))
    if spare > 0:
        out = _repairs(problem, baseline, out, spare, ranking, ordered, skip, aimed)
    out = coherent_candidates(problem, baseline.counts, out)  # gangs with topology: whole domains
    return [_NONE if t in skip else c for t, c in enumerate(out)]


#: Nodes a waiting job is offered for a repair, beyond the ones its gang needs; nodes offered to each
#: pod the greedy plan put there, to move out to.
REPAIR_NODES = 2
REPAIR_EXITS = 6
#: Waiting jobs offered repairs at most (each costs a pass over its candidate nodes).
REPAIR_JOBS = 256


def _repairs(problem: Problem, baseline: Placement, out: list[np.ndarray], spare: int, ranking: np.ndarray,
             ordered: dict[int, np.ndarray], skip: frozenset[int], aimed: bool = False) -> list[np.ndarray]:
    """Spend `spare` pairs where the greedy plan is weakest: the most valuable waiting jobs (priority,
    then GPUs) get their best-fit nodes, and the pods the greedy plan put on those nodes get nodes with
    room left after it, to move out to. A share of nodes per task rarely holds such a swap: the
    waiting gang's nodes are full, and the pods there only see their own best fits, full too.

    `aimed` (each task's share of the pairs below MIN_PER_TASK, so a placed task sees few nodes beyond its
    own): then each waiting job is offered the nodes it fits once the greedy plan's pods there move out, fewest
    GPUs to move first and none offered to an earlier waiting job, and each blocker's exits hold the room its
    pods would take, so that waiting gangs of one shape are not all offered the same few nodes and blockers the
    same few exits (measured at 12,500 nodes: every blocked 8-GPU gang was offered the same three nodes; at
    4,096 the gap to the bound went from 0.08-0.56 % to < 0.0001 %). With pairs to spare the best-fit nodes do
    (more repair pairs there only slowed the whole model's search: gangs-L, 256 nodes)."""
    placed = baseline.placed_jobs(problem)
    waiting = [j for j in range(len(problem.jobs)) if j not in placed
               and all(problem.tasks[t].candidates.size and t not in skip for t in problem.job_tasks[j])]
    if not waiting:
        return out
    waiting = sorted(waiting, key=lambda j: (-problem.jobs[j].priority, -problem.job_gpus(j), j))[:REPAIR_JOBS]
    held = baseline.usage(problem)
    room = problem.free - held  # what the greedy plan leaves
    exits_of: dict[int, list[int]] = {}
    claimed = np.zeros(problem.n_nodes, dtype=bool)
    on_node: dict[int, list[int]] = {}
    pods_of: dict[int, int] = {}
    for (t, n), k in sorted(baseline.counts.items()):
        if k:
            on_node.setdefault(n, []).append(t)
            pods_of[t] = pods_of.get(t, 0) + k
    extra = [set(c.tolist()) for c in out]
    for j in waiting:
        for t in problem.job_tasks[j]:
            task = problem.tasks[t]
            needed = math.ceil(task.replicas / max(1, int(task.max_per_node.max())))
            if aimed:
                clearable = _repair_nodes(problem, task.candidates, task.demand, held, ranking, ordered)
                nodes = clearable[~claimed[clearable]][: needed + REPAIR_NODES]
                claimed[nodes] = True  # the next waiting job of this shape is offered other nodes to clear
            else:
                nodes = _ordered(problem, task.candidates, ranking, ordered)[: needed + REPAIR_NODES]
            for n in nodes.tolist():
                if n not in extra[t]:
                    extra[t].add(n)
                    spare -= 1
                for other in on_node.get(n, []):
                    if other not in exits_of:
                        exits_of[other] = _exits(problem, other, room, pods_of.get(other, 0) if aimed else 0)
                    for e in exits_of[other]:
                        if e not in extra[other]:
                            extra[other].add(e)
                            spare -= 1
        if spare <= 0:
            break
    return [np.array(sorted(c), dtype=np.int64) for c in extra]


def _exits(problem: Problem, t: int, room: np.ndarray, pods: int) -> list[int]:
    """Nodes task t's pods may move out to, best fit first, REPAIR_EXITS of them; the room its `pods` (the ones
    the greedy plan placed) would take there is then held (`room` changes), so the pods of the next task
    cleared move elsewhere."""
    spec = problem.tasks[t]
    exits = spec.candidates[np.all(room[spec.candidates] >= spec.demand, axis=1)]
    exits = exits[np.argsort(room[exits, 0], kind="stable")][:REPAIR_EXITS]
    for n in exits.tolist():
        if pods <= 0:
            break
        take = min(pods, int(np.min(room[n][spec.demand > 0] // spec.demand[spec.demand > 0]))
                   if (spec.demand > 0).any() else pods)
        room[n] -= spec.demand * take
        pods -= take
    return exits.tolist()


def _repair_nodes(problem: Problem, cand: np.ndarray, demand: np.ndarray, held: np.ndarray, ranking: np.ndarray,
                  cache: dict[int, np.ndarray]) -> np.ndarray:
    """A waiting task's candidates where one pod fits once the greedy plan's pods there move out, fewest GPUs
    to move first (then best fit): the nodes a repair can clear for it."""
    order = _ordered(problem, cand, ranking, cache)
    clearable = order[np.all(problem.free[order] >= demand, axis=1)]
    return clearable[np.argsort(held[clearable, 0], kind="stable")]


def _ordered(problem: Problem, cand: np.ndarray, ranking: np.ndarray, cache: dict[int, np.ndarray]) -> np.ndarray:
    """`cand`'s nodes in `ranking`'s order, once per candidate array (tasks of one shape share theirs)."""
    if id(cand) not in cache:
        inside = np.zeros(problem.n_nodes, dtype=bool)
        inside[cand] = True
        cache[id(cand)] = ranking[inside[ranking]]
    return cache[id(cand)]


def _best_fit_ranking(problem: Problem) -> np.ndarray:
    """Every node, best fit first: fewest free GPUs (then CPUs) left after one pod, the same order for
    every task because its demand shifts all nodes alike (CPU-only pods also prefer the fewest GPUs,
    GPU-less nodes first); ties by node index."""
    free = problem.free
    return np.lexsort((np.arange(problem.n_nodes), free[:, 1], free[:, 0]))


#: Domains each topology gang keeps when candidate lists are trimmed (docs/solver.md §4: offering
#: every rack to every gang made 1.9M variables at 4,096 nodes; about 8 was enough).
MAX_DOMAINS = 8


def coherent_candidates(problem: Problem, counts: dict[tuple[int, int], int],
                        trimmed: list[np.ndarray]) -> list[np.ndarray]:
    """Trimmed candidate lists, redone for gangs with topology so that they hold whole domains.

    Node-by-node trimming keeps a few best-fit nodes in many domains, none of which may then hold
    the gang. Instead, at the gang's most binding level (required, else its slice level, else
    preferred) it keeps the domains its greedy placement used, then the best-fitting others
    (fewest free GPUs that still hold the gang, then the roomiest), up to MAX_DOMAINS (more for
    slices: twice the groups), and every task of the gang keeps all its candidates inside them.
    """
    view = problem.topology()
    out = list(trimmed)
    for j, job in enumerate(problem.jobs):
        spec = job.topology
        if spec is None:
            continue
        level = spec.required or (spec.slice.required if spec.slice else None) or spec.preferred
        if level is None:
            continue
        lvl = view.level(level)
        limit, need = MAX_DOMAINS, job_gpus_needed(problem, j)
        if spec.required is None and spec.slice is not None:
            gpu_pods = [(problem.tasks[t].replicas, int(problem.tasks[t].demand[0])) for t in problem.job_tasks[j]]
            limit = max(limit, 2 * sum(r for r, g in gpu_pods if g) // spec.slice.size)
            need = spec.slice.size * max(g for _, g in gpu_pods)
        used = [int(lvl.of_node[n]) for (t, n), k in sorted(counts.items()) if k and problem.tasks[t].job == j]
        room = domain_free_gpus(problem, view, j, level, problem.free)
        touched = np.zeros(lvl.count, dtype=bool)
        for t in problem.job_tasks[j]:
            touched[lvl.of_node[problem.tasks[t].candidates]] = True
        fits = [int(d) for d in np.argsort(room, kind="stable") if touched[d] and room[d] >= need]
        rest = [int(d) for d in np.argsort(-room, kind="stable") if touched[d] and room[d] < need]
        keep = list(dict.fromkeys(used))
        keep += [d for d in fits + rest if d not in keep][: max(0, limit - len(keep))]
        inside = np.isin(lvl.of_node, keep)
        for t in problem.job_tasks[j]:
            cand = problem.tasks[t].candidates
            out[t] = cand[inside[cand]]
    return out
