"""Preemption: which running jobs the plan evicts, chosen in the same model as the placements.

A running job is kept or evicted whole (`ctx.evicted[r]`, one boolean; the context creates it
only for jobs that may be preempted at all: `preemptible`, past `policy.min_runtime_s`, and some
pending job a rule could let preempt them). An eviction must be justified by a job the plan places
*in its stead*, with a pod on one of the victim's nodes, under one of the rules of
`policy.preemption` (placement_models.PreemptionRules, `Problem.eviction_rules`; Kueue's
ClusterQueue `preemption`, Volcano's preempt and reclaim actions):

* `within_team`: the job is of the victim's team (or no teams are declared) and outranks it (or, with
  `lower_or_newer_equal_priority`, has its priority and was submitted before the victim started);
* `reclaim_within_cohort`: the job is of another team that ends the plan within its nominal quota in
  a scope containing that node, while the victim's team held more than its nominal there before the
  plan (it was borrowing); `lower_priority` also asks the job to outrank the victim;
* `borrow_within_cohort`: as reclaim, but the job's team may end above its nominal; the job outranks
  the victim, whose priority is at most `max_priority_threshold` when set.

As constraints: evicted_r ≤ Σ x[t][n] over tasks t whose job may take r's place by `within_team` or
`borrow_within_cohort` on the victim's nodes n (in a scope where the victim's team borrows, for borrow), plus
Σ reclaim_{r,T,s}, where reclaim_{r,T,s} ≤ within_{T,s} (team T ends within nominal in scope s) and
reclaim_{r,T,s} ≤ Σ x of T's reclaiming tasks on the victim's nodes in s. Because victims are chosen
with the placements, the capacity they free is exactly where the new gang lands (same NVLink domain,
same rack).

Term `preemption` (`eviction_costs`): among the victim sets a job may choose, lexicographically

1. the lowest priorities: one victim of a priority level costs more than every victim of lower
   levels that share a node with it (level weights W_0 = 1, W_k = 1 + Σ_{l<k} W_l·c_l, c_l the most
   that level's victims on one node weigh together in tier 2's sizes), so a set of lower-priority
   victims always wins;
2. the fewest victims, each weighing its size s_r = 1 + `weights.victim_gpus` × the whole GPUs its
   gang holds on every node (so a victim costs W_level·s_r). At 0 (default) every victim weighs 1,
   kube-scheduler's fewest victims; above it a wide gang weighs more than a small job: evicting one
   64-GPU gang to start a notebook frees 63 GPUs nobody asked for, and the gang restarts only when 64
   GPUs are free at once;
3. the least work lost since the last checkpoint (else since the start), in GPU-hours;
4. the newest (latest `started_at`), a tiny term.

Tiers 3 and 4 add δ_r < min(1, victim_gpus or 1)/(m+1) (m: the most victims on one node), so they never
outweigh a victim or a GPU of tier 2.

The bound. The costs are scaled by one factor S so that, on every node n, the victims there cost at
most B_n = weights.preemption × weights.priority × w_n, where w_n is the smallest class weight
(compile/priority.py, per GPU-equivalent) of a pending job that may preempt a victim on n: one GPU
of value of the least valuable class that could use them. A job j that fits by evicting allowed
victims lands its pods on some nodes and evicts only victims there, so its evictions cost at most
Σ over those nodes B_n ≤ weights.preemption × (its class's value per GPU) × (its pods, at least one
GPU-equivalent each) ≤ weights.preemption × the value of placing it. With weights.preemption < 1
(default 0.5) placing a job of strictly higher priority by evicting allowed victims therefore
always scores more than keeping them, by the priority and preemption terms alone: work a victim
would lose never keeps a job that may preempt it waiting. (A job whose pods are worth less than a
GPU each, MIG or shares, has that guarantee only while its pods outweigh the victims on their nodes.)
Costs are integers at the objective's SCALE (1/1000 GPU-equivalent), at least one unit each, so an
eviction is never free; when a node holds many victims and the cheapest class is worth one GPU,
the lower tiers may round away (the order then falls back to priority and count).
"""

from __future__ import annotations

from collections import Counter

from ortools.sat.python import cp_model

from placement.compile import terms
from placement.compile.context import SCALE, ModelContext
from placement.compile.priority import class_weights
from placement.compile.quota import team_gpus
from placement.holdings import held_after
from placement.problem import Problem
from placement.solution import Placement

NAME = terms.PREEMPTION
#: Share of the lower tiers (δ) that lost work gets; the rest orders by recency.
LOST_SHARE = 0.99


def eviction_costs(problem: Problem, running: list[int]) -> dict[int, float]:
    """GPU-equivalents each eviction costs (weights applied), lexicographic and bounded (module docstring)."""
    if not running:
        return {}
    infos = [problem.running[r] for r in running]
    on_node: dict[int, list[int]] = {}
    for info in infos:
        for n in info.nodes.tolist():
            on_node.setdefault(n, []).append(info.index)
    per_gpu = problem.request.policy.weights.victim_gpus
    size = {info.index: info.size(per_gpu) for info in infos}
    levels = sorted({info.priority for info in infos})
    most = {p: 0.0 for p in levels}
    for rs in on_node.values():
        weigh: Counter[int] = Counter()
        for r in rs:
            weigh[problem.running[r].priority] += size[r]
        for p, w in weigh.items():
            most[p] = max(most[p], w)
    ladder: dict[int, float] = {}
    below = 0.0
    for p in levels:
        ladder[p] = 1.0 + below
        below += ladder[p] * most[p]
    crowd = max(len(rs) for rs in on_node.values())
    lost_max = max(info.lost_gpu_h for info in infos)
    now = problem.request.planning_time()
    age = {info.index: (now - info.spec.started_at).total_seconds() if info.spec.started_at else None
           for info in infos}
    age_max = max([a for a in age.values() if a is not None] + [0.0])
    tie = min(1.0, per_gpu) if per_gpu > 0 else 1.0  # tiers 3-4 stay below one GPU of tier 2
    rho: dict[int, float] = {}
    for info in infos:
        lost = info.lost_gpu_h / lost_max if lost_max > 0 else 0.0
        a = age[info.index]
        old = 1.0 if a is None or age_max <= 0 else max(0.0, a) / age_max
        rho[info.index] = (ladder[info.priority] * size[info.index]
                           + tie * (LOST_SHARE * lost + (1 - LOST_SHARE) * old) / (crowd + 1))
    policy = problem.request.policy
    unit = _cheapest_class(problem, running)
    scale = min(policy.weights.preemption * policy.weights.priority * min(unit[r] for r in rs)
                / sum(rho[r] for r in rs) for rs in on_node.values())
    return {r: max(1, int(scale * rho[r] * SCALE)) / SCALE for r in running}


def _cheapest_class(problem: Problem, running: list[int]) -> dict[int, float]:
    """Per victim, the smallest class weight (per GPU-equivalent) of a pending job that may preempt it."""
    weights = class_weights(problem)
    kinds: dict[object, int] = {}
    for j in range(len(problem.jobs)):
        kinds.setdefault(problem.rule_kind(j), j)
    out: dict[int, float] = {}
    for r in running:
        found = [weights.get(problem.jobs[j].priority, 1.0) for j in kinds.values() if problem.may_evict(j, r)]
        out[r] = min(found, default=1.0)
    return out


def apply(ctx: ModelContext) -> None:
    if not ctx.evicted:
        return
    problem = ctx.problem
    index = problem.teams
    node_terms = ctx.node_terms()
    within: dict[tuple[int, int], cp_model.IntVar] = {}
    reclaims: list[tuple[cp_model.IntVar, int, int, list[tuple[int, int]]]] = []
    held_cache: dict[int, list[tuple[list[cp_model.IntVar], list[int], int]]] = {}

    def within_nominal(team: int, s: int) -> cp_model.IntVar:
        if (team, s) not in within:
            scope = index.scopes[s]
            if s not in held_cache:
                held_cache[s] = team_gpus(ctx, scope.mask)
            variables, coefs, const = held_cache[s][team]
            var = ctx.model.new_bool_var(f"within_nominal[{team},{s}]")
            ctx.model.add(cp_model.LinearExpr.weighted_sum(variables, coefs) + const
                          <= int(scope.nominal[team])).only_enforce_if(var)
            within[team, s] = var
        return within[team, s]

    twin_of = {r: j for j, r in problem.twins.items()}
    for r, evicted in ctx.evicted.items():
        victim = problem.running[r]
        nodes = victim.nodes.tolist()
        rules: dict[int, tuple[str, ...]] = {}

        def allowed(t: int, r: int = r, rules: dict[int, tuple[str, ...]] = rules) -> tuple[str, ...]:
            j = problem.tasks[t].job
            if j not in rules:
                rules[j] = problem.eviction_rules(j, r)
            return rules[j]

        stead = [var for n in nodes for var, t, _ in node_terms[n] if "within_team" in allowed(t)]
        if victim.over_nominal and index is not None:
            for s, scope in enumerate(index.scopes):
                if scope.before[victim.team] <= scope.nominal[victim.team]:
                    continue
                by_team: dict[int, list[cp_model.IntVar]] = {}
                pairs: dict[int, list[tuple[int, int]]] = {}
                for n in nodes:
                    if not scope.mask[n]:
                        continue
                    for var, t, _ in node_terms[n]:
                        kinds = allowed(t)
                        if "borrow_within_cohort" in kinds:
                            stead.append(var)  # the job's team may end above nominal: no condition on it
                        elif "reclaim_within_cohort" in kinds:
                            team = problem.job_team[problem.tasks[t].job]
                            by_team.setdefault(team, []).append(var)
                            pairs.setdefault(team, []).append((t, n))
                for team, variables in by_team.items():
                    z = ctx.model.new_bool_var(f"reclaim[{r},{team},{s}]")
                    ctx.model.add(z <= within_nominal(team, s))
                    ctx.model.add(cp_model.LinearExpr.sum(variables) >= z)
                    stead.append(z)
                    reclaims.append((z, team, s, pairs[team]))
        if r in twin_of:
            stead.append(ctx.placed[twin_of[r]])  # a move: the job itself placed again (compile/migration.py)
        if not stead:
            ctx.model.add(evicted == 0)
            continue
        ctx.model.add(evicted <= cp_model.LinearExpr.sum(stead))

    # a move is no preemption: its cost is compile/migration.py's; the victims' costs are those of the jobs some
    # pending job may preempt, as without migration
    victims = ctx.victims
    if victims:
        costs = eviction_costs(problem, victims)
        moves = [r for r in victims if r in twin_of]
        ctx.objective.add(NAME, [ctx.evicted[r] for r in victims] + [ctx.placed[twin_of[r]] for r in moves],
                          [-costs[r] for r in victims] + [costs[r] for r in moves])

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        inside: dict[tuple[int, int], int] = {}
        for (team, s), var in within.items():
            alloc = held_after(ctx.problem, placement, index.scopes[s].mask)
            inside[team, s] = int(alloc[team] <= index.scopes[s].nominal[team])
            values[var.index] = inside[team, s]
        for z, team, s, pairs in reclaims:
            touches = any(placement.counts.get(pair, 0) for pair in pairs)
            values[z.index] = int(inside[team, s] and touches)

    if within or reclaims:
        ctx.on_hint(hint)
