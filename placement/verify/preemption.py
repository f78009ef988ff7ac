"""Preemption: only preemptible running jobs past policy.min_runtime_s are evicted, whole, each for a placed
job with a pod on its nodes (`for_job`) under a rule of policy.preemption (`rule`) that allows it:

* `within_team`: the same team (every job, when no teams are declared) and a lower priority, or with
  `lower_or_newer_equal_priority` an equal one and a start after `for_job` was submitted;
* `reclaim_within_cohort`: another team that held more than its nominal before the plan in a quota scope
  where `for_job` lands on the victim's nodes, `for_job`'s team within its nominal there after the plan,
  and for `lower_priority` a lower priority;
* `borrow_within_cohort`: as reclaim without the nominal condition on `for_job`'s team, a lower priority,
  at most `max_priority_threshold`.

A job that ran past its max_runtime_h may instead be evicted with rule `max_runtime` (policy.overdue `evict`),
for no job in particular; a job moving to faster GPUs has rule `migrate` (placement.verify.migration).
"""

from __future__ import annotations

from placement_models import Job, RunningJob

from placement.verify.context import EPS, SCALE, Context, Expected, Tally, max_runtime
from placement.verify.priority import Tiers, tiers
from placement.verify.quota import Scope, quota_scopes, team_gpus

RULES = ("within_team", "reclaim_within_cohort", "borrow_within_cohort")


def check_preemption(ctx: Context) -> list[str]:
    """Preempted whole, only preemptible jobs past min runtime, each allowed by a rule against a job placed in its
    stead."""
    out: list[str] = []
    running = {rj.job: rj for rj in ctx.request.cluster.running}
    policy = ctx.request.policy
    now = ctx.request.planning_time()
    seen: set[str] = set()
    placed = {a.job for a in ctx.plan.assignments}
    scopes = quota_scopes(ctx) if ctx.plan.preemptions else []
    team_after = {id(s): team_gpus(ctx, s) for s in scopes}
    for i, p in enumerate(ctx.plan.preemptions):
        where = f"entry {i} (job {p.job})"
        rj = running.get(p.job)
        if rj is None:
            kind = "pending" if p.job in ctx.pending_jobs else "unknown"
            out.append(f"preemption: {where} names {kind} job {p.job}, not a running one")
            continue
        if p.job in seen:
            out.append(f"preemption: {where} preempts job {p.job} twice")
        seen.add(p.job)
        if not p.reason.strip():
            out.append(f"preemption: {where} has an empty reason")
        if p.rule == "migrate":
            continue  # a move: placed again as itself (placement.verify.migration)
        if p.job in placed:
            out.append(f"preemption: job {p.job} is preempted and placed again in the same plan")
        if p.rule == "max_runtime":
            out += _overdue(ctx, rj)
            continue
        team = _team_of(ctx, p.for_job)
        if ctx.request.preemption_rules_for(team) is None:
            whose = f"team {team}'s preemption" if any(t.name == team and t.preemption is not None
                                                       for t in ctx.request.teams) else "policy.preemption"
            out.append(f"preemption: job {p.job} is preempted but {whose} is off")
        if not rj.preemptible:
            out.append(f"preemption: job {p.job} is preempted but not preemptible")
        if policy.min_runtime_s > 0:
            ran = None if rj.started_at is None else (now - rj.started_at).total_seconds()
            if ran is None or ran < policy.min_runtime_s:
                shown = "an unknown time" if ran is None else f"{ran:g} s"
                out.append(f"preemption: job {p.job} has run {shown}, less than min_runtime_s "
                           f"{policy.min_runtime_s:g}")
        out += _for_job(ctx, p.job, p.for_job, p.rule, rj, scopes, team_after)
    return out


def _team_of(ctx: Context, job: str) -> str | None:
    found = ctx.pending_jobs.get(job)
    return found.team if found is not None else None


def _overdue(ctx: Context, rj: RunningJob) -> list[str]:
    """An eviction for running past max_runtime_h: policy.overdue is `evict` and the job has run longer than its
    own limit, else its team's."""
    if ctx.request.policy.overdue != "evict":
        return [f"preemption: job {rj.job} is evicted for its runtime but policy.overdue is not 'evict'"]
    limit = max_runtime(ctx.request, rj)
    if limit is None or rj.started_at is None:
        return [f"preemption: job {rj.job} is evicted for its runtime but has no max_runtime_h or start"]
    ran_h = (ctx.request.planning_time() - rj.started_at).total_seconds() / 3600.0
    if ran_h <= limit:
        return [f"preemption: job {rj.job} is evicted for its runtime after {ran_h:.4g} h, within its "
                f"max_runtime_h {limit:g}"]
    return []


def _for_job(ctx: Context, victim: str, for_job: str, rule: str | None, rj: RunningJob, scopes: list[Scope],
             team_after: dict[int, tuple[dict[str, float], dict[str, float]]]) -> list[str]:
    """`for_job` is placed with a pod on the victim's nodes, and `rule` of the policy allows it to take its place."""
    if not for_job:
        return [f"preemption: job {victim} names no for_job (the placed job it makes room for)"]
    job = ctx.pending_jobs.get(for_job)
    if job is None:
        return [f"preemption: job {victim} is preempted for {for_job}, which is not a pending job"]
    nodes = {pod.node for pod in rj.pods}
    landed = {r.node.name for r in ctx.job_nodes().get(for_job, []) if r.node.name in nodes}
    if not landed:
        return [f"preemption: job {victim} is preempted for {for_job}, which has no pod on its nodes "
                f"({', '.join(sorted(nodes))})"]
    if rule not in RULES:
        return [f"preemption: job {victim} names no rule of policy.preemption ({', '.join(RULES)})"]
    if ctx.request.preemption_rules_for(job.team) is None:
        return []  # reported above: preemption is off
    why = _disallowed(ctx, rule, job, rj, landed, scopes, team_after)
    if why is None:
        return []
    return [f"preemption: job {victim} (priority {rj.priority}, team {rj.team}) may not be preempted for {for_job} "
            f"(priority {job.priority}, team {job.team}) by {rule}: {why}"]


def _disallowed(ctx: Context, rule: str, job: Job, rj: RunningJob, landed: set[str], scopes: list[Scope],
                team_after: dict[int, tuple[dict[str, float], dict[str, float]]]) -> str | None:
    """Why `rule` does not allow `job` to take running job rj's place on nodes `landed`, or None."""
    rules = ctx.request.preemption_rules_for(job.team)  # the preemptor's team's rules, as Kueue reads its queue's
    assert rules is not None
    same = not ctx.request.teams or job.team == rj.team  # without teams, one team: cluster-wide
    lower = job.priority > rj.priority
    if rule == "within_team":
        policy = rules.within_team
        if not same:
            return "they are of different teams"
        if policy == "never":
            return "within_team is never"
        newer = (policy == "lower_or_newer_equal_priority" and job.priority == rj.priority
                 and job.submitted_at is not None and rj.started_at is not None and job.submitted_at < rj.started_at)
        if lower or newer:
            return None
        return (f"within_team {policy} needs a lower priority" + (", or an equal one started after the job was "
                                                                   "submitted" if policy != "lower_priority" else ""))
    if same:
        return f"{rule} needs jobs of different teams"
    if not ctx.request.share_cohort(job.team, rj.team):
        return f"{rule} needs teams of one cohort (teams[].cohort, cohorts[].parent)"
    if rule == "reclaim_within_cohort":
        policy = rules.reclaim_within_cohort
        if policy == "never" or (policy == "lower_priority" and not lower):
            return f"reclaim_within_cohort is {policy}"
    else:
        borrow = rules.borrow_within_cohort
        if borrow.policy == "never":
            return "borrow_within_cohort is never"
        if not lower:
            return "borrow_within_cohort needs a lower priority"
        if borrow.max_priority_threshold is not None and rj.priority > borrow.max_priority_threshold:
            return f"priority above max_priority_threshold {borrow.max_priority_threshold}"
    held_above = False
    for scope in scopes:
        if not landed & scope.nodes:
            continue
        before, after = team_after[id(scope)]
        # lenient by a milli-GPU per running MIG or shared pod of the team here: the planner counts them in
        # milli-GPU, rounded up, so it may see a team at its nominal as just above it
        parts = sum(1 for other in ctx.request.cluster.running if other.team == rj.team for pod in other.pods
                    if pod.node in scope.nodes and (pod.gpu_share is not None or pod.mig is not None))
        if before.get(rj.team or "", 0.0) <= scope.nominal.get(rj.team or "", 0.0) - 1e-3 * parts + EPS:
            continue
        held_above = True
        within = after.get(job.team or "", 0.0) <= scope.nominal.get(job.team or "", 0.0) + EPS
        if rule == "borrow_within_cohort" or within:
            return None
    if not held_above:
        return f"team {rj.team} held no more than its nominal where {job.name} lands on its nodes"
    return f"team {job.team} ends above its nominal where it lands on the victim's nodes"


def check_preemption_term(ctx: Context) -> list[Expected] | None:
    """`preemption`: −Σ over the victims the plan chooses (not one stopped for `max_runtime_h`, which costs
    nothing) of its eviction cost, derived as the planner does (placement.compile.preemption's ladder) over the
    running jobs some weighed pending job may preempt (`preemptable`), each cost in whole model units (at least
    one). Once per job set the class weights may have been derived over (placement.verify.priority)."""
    victims = {p.job for p in ctx.plan.preemptions if p.rule not in ("max_runtime", "migrate")} & ctx.running_jobs
    if not victims:
        return [Expected.exact(0.0)]
    found = tiers(ctx)
    if found is None:
        return None
    out = []
    for tier in found:
        costs = eviction_costs(ctx, tier)
        if not victims <= costs.keys():
            continue  # a victim no weighed job may preempt: not this job set (the preemption rule reports it)
        total = Tally()
        for name in victims:
            total.add(-costs[name])
        out.append(total.expected())
    return out or None


#: Share of the lower tiers (δ) that lost work gets; the rest orders by recency.
LOST_SHARE = 0.99


def eviction_costs(ctx: Context, tier: Tiers) -> dict[str, float]:
    """Running job -> what evicting it costs (weights applied), for each job some pending job of `tier.jobs` may
    preempt: level weights W_0 = 1, W_k = 1 + Σ_{l<k} W_l·c_l (c_l: the most level l's victims weigh on one
    node), each victim W·(1 + victim_gpus × its GPUs) plus, below one GPU, its lost work and age over the most
    victims on one node + 1; scaled so the victims on a node cost at most weights.preemption ×
    weights.priority × the cheapest class that may preempt them; whole model units, at least one."""
    policy = ctx.request.policy
    running = [rj for rj in _kept(ctx) if _may_go(ctx, rj)]
    cheapest: dict[str, float] = {}
    for rj in running:
        found = [tier.weights.get(job.priority, 1.0) for job in tier.jobs if _rules(ctx, job, rj)]
        if found:
            cheapest[rj.job] = min(found)
    infos = [rj for rj in running if rj.job in cheapest]
    if not infos:
        return {}
    on_node: dict[str, list[RunningJob]] = {}
    for rj in infos:
        for node in sorted({pod.node for pod in rj.pods}):
            on_node.setdefault(node, []).append(rj)
    per_gpu = policy.weights.victim_gpus
    gpus = {rj.job: _gpus(ctx, rj) for rj in infos}
    size = {rj.job: 1.0 + per_gpu * gpus[rj.job] for rj in infos}
    levels = sorted({rj.priority for rj in infos})
    most = dict.fromkeys(levels, 0.0)
    for rs in on_node.values():
        weigh: dict[int, float] = {}
        for rj in rs:
            weigh[rj.priority] = weigh.get(rj.priority, 0.0) + size[rj.job]
        for level, w in weigh.items():
            most[level] = max(most[level], w)
    ladder: dict[int, float] = {}
    below = 0.0
    for level in levels:
        ladder[level] = 1.0 + below
        below += ladder[level] * most[level]
    crowd = max(len(rs) for rs in on_node.values())
    now = ctx.request.planning_time()
    lost = {rj.job: _lost_gpu_h(ctx, rj, gpus[rj.job]) for rj in infos}
    lost_max = max(lost.values())
    age = {rj.job: (now - rj.started_at).total_seconds() if rj.started_at else None for rj in infos}
    age_max = max([a for a in age.values() if a is not None] + [0.0])
    tie = min(1.0, per_gpu) if per_gpu > 0 else 1.0
    rho: dict[str, float] = {}
    for rj in infos:
        share = lost[rj.job] / lost_max if lost_max > 0 else 0.0
        a = age[rj.job]
        old = 1.0 if a is None or age_max <= 0 else max(0.0, a) / age_max
        rho[rj.job] = (ladder[rj.priority] * size[rj.job]
                       + tie * (LOST_SHARE * share + (1 - LOST_SHARE) * old) / (crowd + 1))
    scale = min(policy.weights.preemption * policy.weights.priority * min(cheapest[rj.job] for rj in rs)
                / sum(rho[rj.job] for rj in rs) for rs in on_node.values())
    return {rj.job: max(1, int(scale * rho[rj.job] * SCALE)) / SCALE for rj in infos}


def _kept(ctx: Context) -> list[RunningJob]:
    """The running jobs the planner weighs: all but those the plan stops for running past their limit."""
    return [rj for rj in ctx.request.cluster.running if rj.job not in ctx.stopped]


def _may_go(ctx: Context, rj: RunningJob) -> bool:
    """May the job be preempted at all: preemption on somewhere, preemptible, past min_runtime_s?"""
    policy = ctx.request.policy
    if not ctx.request.may_preempt or not rj.preemptible:
        return False
    if policy.min_runtime_s == 0:
        return True
    return rj.started_at is not None and (ctx.request.planning_time() - rj.started_at).total_seconds() \
        >= policy.min_runtime_s


def _declared(ctx: Context, team: str | None) -> str | None:
    return team if team is not None and any(t.name == team for t in ctx.request.teams) else None


def _rules(ctx: Context, job: Job, rj: RunningJob) -> bool:
    """May `job` preempt `rj` under some rule of its team's preemption policy, before the conditions only the plan
    decides (the planner's test: placement.problem's `allowed_rules`)?"""
    rules = ctx.request.preemption_rules_for(job.team)
    if rules is None:
        return False
    lower = job.priority > rj.priority
    mine, theirs = _declared(ctx, job.team), _declared(ctx, rj.team)
    if mine == theirs:  # also when no teams are declared: one team, cluster-wide
        newer = (rules.within_team == "lower_or_newer_equal_priority" and job.priority == rj.priority
                 and job.submitted_at is not None and rj.started_at is not None and job.submitted_at < rj.started_at)
        return rules.within_team != "never" and (lower or newer)
    if mine is None or theirs is None or not _over_nominal(ctx, rj) or not ctx.request.share_cohort(job.team,
                                                                                                    rj.team):
        return False
    if rules.reclaim_within_cohort == "any" or (rules.reclaim_within_cohort == "lower_priority" and lower):
        return True
    borrow = rules.borrow_within_cohort
    return borrow.policy == "lower_priority" and lower and (
        borrow.max_priority_threshold is None or rj.priority <= borrow.max_priority_threshold)


def _over_nominal(ctx: Context, rj: RunningJob) -> bool:
    """Did the job's team hold more than its nominal before the plan in a GPU scope holding one of its nodes (in
    milli-GPU, as the planner counts)?"""
    key = ("over_nominal", rj.team)
    if key not in ctx.memo:
        ctx.memo[key] = [(scope.nodes, round(team_gpus(ctx, scope)[0].get(rj.team or "", 0.0) * 1000)
                          > round(scope.nominal.get(rj.team or "", 0.0) * 1000)) for scope in quota_scopes(ctx)]
    nodes = {pod.node for pod in rj.pods}
    return any(over and nodes & where for where, over in ctx.memo[key])


def _gpus(ctx: Context, rj: RunningJob) -> int:
    """Healthy whole GPUs the job holds (a share of a GPU holds none)."""
    total = 0
    for pod in rj.pods:
        node = ctx.nodes.get(pod.node)
        if pod.gpu_share is None and node is not None:
            total += sum(1 for g in pod.gpus if g not in node.unhealthy_gpus)
    return total


def _lost_gpu_h(ctx: Context, rj: RunningJob, gpus: int) -> float:
    """GPU-hours an eviction now loses: since the last checkpoint, else since the start (never before it)."""
    since = rj.checkpointed_at or rj.started_at
    if rj.started_at is not None and since is not None and since < rj.started_at:
        since = rj.started_at
    if since is None:
        return 0.0
    return gpus * max(0.0, (ctx.request.planning_time() - since).total_seconds()) / 3600.0
