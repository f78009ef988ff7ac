"""Why a job waits: the constraint that binds, named (`Pending.constraint`) and told with its numbers.

Causes are tried from the most basic to the most contextual; the first that binds is the one named:

1. `filter`, `mig`, `sharing`: no node passes one of a task's filters (`filters`: which one, what nodes have);
2. `gang_size`: the gang does not fit even if no other pending job were placed, beside running work and
   what it may preempt; `preemption` when preempting running work would make room but preemption is off;
3. `topology`: it fits the free cluster, but no domain of its required level (or slice level) holds it;
4. `quota`: its team's quota refuses the whole gang (cluster-wide scopes);
5. in what this plan leaves: when it fits there, `quota` (where it would go), else `objective` (the plan
   is proved better without it) or `time_limit`; when it fits without its topology only, `topology`;
   else who took the room (`rivals`): `quota` (work within a team's nominal ranks first), `priority`
   (a higher class), and within its own class `fairness`, `cost` (deferral) or `capacity`.

`placement.compile.cost.refine_pending` then names `cost` where spot, the peak reserve or the price
kept it out. tests/test_pending_reasons.py relaxes each named constraint and plans again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np
from placement_models.policy import PreemptionRules

from placement import devices
from placement.baseline import place_task
from placement.baseline.devices import GreedyDevices
from placement.baseline.topology import job_gpus_needed, place_job
from placement.explain import devices as device_reasons
from placement.explain import filters
from placement.explain import rivals as rival_reasons
from placement.explain import topology as topology_reasons
from placement.explain.rivals import Reason, held_text
from placement.holdings import held_in, job_use, use_of
from placement.problem import Problem, Slot, allowed_rules
from placement.rightsize import gang_minimums
from placement.solution import Placement
from placement.teams import QuotaLedger, amount

#: Fit answers per placement (kept alive by the entry) and per job shape, room and topology; per view.
_FITS: Slot[dict[int, tuple[Placement | None, dict[tuple[object, ...], bool]]]] = Slot("fits", per_view=True)
#: What a fit check reads of each job (`_shape`).
_SHAPES: Slot[dict[int, tuple[object, ...]]] = Slot("fit_shapes")
#: Free capacity plus what a kind of job may preempt (`_alone_room`).
_ALONE_ROOM: Slot[dict[object, np.ndarray]] = Slot("alone_room")


def gang_text(problem: Problem, j: int) -> str:
    """"1×launcher (8 CPU) + 4..16×worker (8 GPUs)": with per-task minimums (`min_replicas`) an elastic task
    shows minimum..replicas, and a `min_available` above their sum is added; an all-or-nothing gang, or one
    with only `min_available`, reads as its tasks' replicas. MIG and shared pods read as their instance or
    share ("MIG 1g.10gb", "0.25 of a shared GPU"), never as GPUs."""
    job = problem.jobs[j]
    minimums = {members[0]: minimum for members, minimum in gang_minimums(problem, j)}
    per_task = any(0 < m < problem.tasks[t].replicas for t, m in minimums.items()) or (
        job.min_available is not None and any(minimums.values()))
    parts = []
    for t in problem.job_tasks[j]:
        task = problem.tasks[t]
        least = minimums.get(t, task.replicas) if per_task else task.replicas
        count = f"{least}..{task.replicas}" if least < task.replicas else f"{task.replicas}"
        parts.append(f"{count}×{task.name} ({filters.demand_text(task)})")
    text = " + ".join(parts)
    if per_task and job.needed > sum(minimums.values()):
        pods = sum(problem.tasks[t].replicas for t in minimums)  # a right-size alternative is no pod of its own
        text += f", at least {job.needed} of its {pods} pods"
    return text


# --------------------------------------------------------------------------------------------
# Fit checks (the greedy's own rules: gang minimums, devices, topology)


def _fits(problem: Problem, j: int, free: np.ndarray, placement: Placement | None = None,
          topology: bool = False) -> bool:
    """Would job j fit, alone, in `free` (beside `placement`'s devices)? With `topology`, honouring its
    required level and slices (`placement.baseline.topology.place_job`).

    A queue holds hundreds of jobs of a few shapes, each asked the same few questions, so answers are kept
    per shape (`_shape`), room and placement for the problem's lifetime (the cache holds the placement, so
    its id is never reused while its answers are). Only the first problem that asks owns the cache: views
    made with `replace(problem, ...)` share the facts but not their devices or candidates: the slot is per view,
    and they get an empty cache each call, so they compute."""
    cache = problem.facts.slot(_FITS, problem, dict)
    held, answers = cache.setdefault(id(placement), (placement, {}))
    if held is not placement:  # pragma: no cover - the entry keeps its placement alive
        raise RuntimeError("fit cache entry of another placement")
    key = (_shape(problem, j), free.tobytes(), topology)
    found = answers.get(key)
    if found is None:
        found = answers[key] = _fits_now(problem, j, free, placement, topology)
    return found


def _shape(problem: Problem, j: int) -> tuple[object, ...]:
    """What a fit check reads of job j: its tasks' shapes (tasks of one shape share their candidate arrays,
    placement.problem.build), their pods and minimums, and its topology."""
    shapes = problem.facts.slot(_SHAPES, problem, dict)
    if j not in shapes:
        tasks = problem.job_tasks[j]
        groups = tuple((tuple(tasks.index(t) for t in members), minimum)
                       for members, minimum in gang_minimums(problem, j))
        job = problem.jobs[j]
        shapes[j] = (tuple(id(problem.tasks[t].candidates) for t in tasks), groups, job.needed,
                     None if job.topology is None else job.topology.model_dump_json())
    return shapes[j]


def _fits_now(problem: Problem, j: int, free: np.ndarray, placement: Placement | None, topology: bool) -> bool:
    """`_fits`, computed."""
    if topology and _hard_topology(problem, j):
        trial: np.ndarray = free.copy()
        counts: dict[tuple[int, int], int] = {}
        if not problem.needs_device_ledger():
            return place_job(problem, j, trial, counts, place_task) > 0
        ledger = GreedyDevices(problem)
        if placement is not None:
            ledger.apply(placement, trial)
        return place_job(problem, j, trial, counts, ledger.placer(place_task)) > 0 and ledger.settle(counts)
    # Which GPU, which instance, which layout changes: the device ledger knows, but not GPUs preemption frees
    # (it holds running pods' GPUs for good), so whole-GPU gangs count those as the greedy does, by numbers.
    evicting = bool((free > problem.free).any())
    if problem.needs_device_ledger() and not (evicting and not any(
            devices.uses_devices(problem.tasks[t].spec) for t in problem.job_tasks[j])):
        return device_reasons.job_fits(problem, j, free, placement, place_task)
    tasks = problem.job_tasks[j]
    if _pack(problem, j, free, sorted(tasks, key=lambda t: -int(problem.tasks[t].demand[0]))):  # the greedy's order
        return True
    tight = sorted(tasks, key=lambda t: (problem.tasks[t].candidates.size, -int(problem.tasks[t].demand[0])))
    return len(tasks) > 1 and _pack(problem, j, free, tight)  # the task with fewest nodes first


def _pack(problem: Problem, j: int, free: np.ndarray, order: list[int]) -> bool:
    """The greedy's gang rule in a given task order: each task's minimum first (a task and its right-size
    alternative together), then the extra pods; fits when every minimum and `needed` are placed."""
    trial = free.copy()
    counts: dict[tuple[int, int], int] = {}
    got = dict.fromkeys(order, 0)
    groups = sorted(gang_minimums(problem, j), key=lambda g: min(order.index(t) for t in g[0]))
    for members, minimum in groups:
        for t in sorted(members, key=order.index):
            short = minimum - sum(got[u] for u in members)
            if short > 0:
                got[t] += place_task(problem, t, trial, counts, None, short)
        if sum(got[u] for u in members) < minimum:
            return False
    for t in order:
        more = problem.tasks[t].replicas - got[t]
        if more > 0:
            got[t] += place_task(problem, t, trial, counts, None, more)
    return sum(got.values()) >= problem.jobs[j].needed


def _hard_topology(problem: Problem, j: int) -> bool:
    spec = problem.jobs[j].topology
    return spec is not None and (spec.required is not None or spec.slice is not None)


def _alone_room(problem: Problem, j: int) -> np.ndarray:
    """Free capacity plus what running jobs job j may preempt hold (its candidates were filtered on this); once
    per kind of job the preemption rules tell apart (`Problem.rule_kind`)."""
    cache = problem.facts.slot(_ALONE_ROOM, problem, dict)
    kind = (problem.rule_kind(j), _may_reclaim(problem, j))
    if kind not in cache:
        room = problem.free
        for r in problem.running:
            if r.evictable and _rules(problem, j, problem.eviction_rules(j, r.index)):  # no rule takes the others
                room = room.copy() if room is problem.free else room
                room[r.nodes] += r.use
        cache[kind] = room
    return cache[kind]


def _may_reclaim(problem: Problem, j: int) -> bool:
    """Could job j's team end within its nominal with the job placed (what `reclaim_within_cohort` needs of the
    preemptor's team), in some GPU scope, counting what the team runs now?"""
    index, team = problem.teams, problem.job_team[j] if problem.job_team else -1
    need = int(job_use(problem, j)[0])
    return index is not None and team >= 0 and any(s.before[team] + need <= s.nominal[team] for s in index.scopes)


def _rules(problem: Problem, j: int, rules: tuple[str, ...]) -> tuple[str, ...]:
    """The rules that may really let job j preempt: `reclaim_within_cohort` only if its team may end within
    its nominal (`_may_reclaim`)."""
    if "reclaim_within_cohort" in rules and not _may_reclaim(problem, j):
        return tuple(rule for rule in rules if rule != "reclaim_within_cohort")
    return rules


def _nodes(problem: Problem, j: int) -> list[int]:
    return rival_reasons.job_nodes(problem, j)


# --------------------------------------------------------------------------------------------
# The reason of one pending job


def pending_reason(problem: Problem, j: int, placement: Placement, usage: np.ndarray,
                   ledger: QuotaLedger | None = None, optimal: bool = False, detail: bool = True) -> Reason:
    """(constraint, text) of pending job j. `usage`: what the plan takes net of what its preemptions free;
    `ledger`: quotas after the plan; `optimal`: the plan is proved optimal, so a job that would fit was left
    out by the objective; `detail`: name who holds the room it needs (the costly part, policy.explain_top)."""
    ledger = ledger if ledger is not None else quota_after(problem, placement)
    for t in problem.job_tasks[j]:
        task = problem.tasks[t]
        if task.candidates.size == 0:
            emptied = next((stage for stage, left in task.funnel if left == 0), "free_capacity")
            if emptied != "free_capacity":
                return filters.filter_reason(problem, task)
    gang = gang_text(problem, j)
    if not _fits(problem, j, _alone_room(problem, j)):  # physics before policy
        return _short(problem, j, gang, placement, usage, quota_reason(problem, j, ledger))
    view = problem.topology()
    hard = _hard_topology(problem, j)
    if hard and not _fits(problem, j, problem.free, topology=True) and _fits(problem, j, problem.free):
        return Reason("topology", topology_reasons.domain_reason(problem, j, problem.free, gang, view, after=False))
    blocked = quota_reason(problem, j, ledger)
    if blocked:
        return Reason("quota", blocked)
    left = problem.free - usage
    if _fits(problem, j, left, placement, topology=True):
        blocked = quota_reason(problem, j, ledger, _where(problem, j, left))
        if blocked:
            return Reason("quota", blocked)
        if optimal:
            return Reason("objective", f"left pending by the objective: the plan scores higher without it (placing "
                                       f"it would cost more in other terms, such as breaking a whole node, than its "
                                       f"value): gang of {gang}")
        return Reason("time_limit", f"fits in the capacity this plan leaves free, but the solver did not reach a "
                                    f"plan placing it within its time limit: gang of {gang}")
    if hard and _fits(problem, j, left, placement):  # fits what the plan leaves, but in no single domain
        return Reason("topology", topology_reasons.domain_reason(problem, j, left, gang, view, after=True))
    if not detail:
        return Reason("capacity", f"the room it needs goes to other work in this plan: gang of {gang} (who holds "
                                  f"it is named for the first {problem.request.policy.explain_top} pending jobs, "
                                  f"policy.explain_top)")
    found = rival_reasons.who_took(problem, j, placement, usage, gang, _fits)
    hint = _sharing_hint(problem, j, placement, usage)
    preempt = preemption_hint(problem, j, placement, usage)
    if found is not None:
        return Reason("sharing" if hint else found.constraint, found.text + hint + preempt)
    if _alone_room(problem, j) is problem.free:  # no group alone explains it: the plan's jobs together do
        return Reason("sharing" if hint else "capacity", rival_reasons.crowded(problem, j, placement, usage, gang)
                      + hint + preempt)
    # Nothing the plan placed holds the room it needs: running work it may preempt does, and the plan keeps it.
    text = (f"fits only if running work were preempted, which the rules allow, but the plan keeps it: gang of "
            f"{gang}" + hint + preempt)
    return Reason("objective" if optimal else "time_limit", text)


def _short(problem: Problem, j: int, gang: str, placement: Placement, usage: np.ndarray,
           quota: str | None) -> Reason:
    """The gang does not fit even if no other pending job were placed: the numbers that show it, and whether
    preempting running work (preemption off) or sharing idle GPUs would make room; what its team's quota says
    (`quota`) comes last, as context: without room, no quota would place it."""
    head = "does not fit even if no other job were placed: "
    empty = next((problem.tasks[t] for t in problem.job_tasks[j] if problem.tasks[t].candidates.size == 0), None)
    if empty is not None:
        text = filters.room_text(problem, empty)
        if problem.jobs[j].pods > 1 or len(problem.job_tasks[j]) > 1:
            text += f" (gang of {gang})"
    else:
        text = head + _short_detail(problem, j, gang)
    hint = _sharing_hint(problem, j)
    preempt = preemption_hint(problem, j, placement, usage) or preemption_hint(
        problem, j, Placement(), np.zeros_like(problem.free))
    after = f"; {quota}" if quota else ""
    if hint:
        return Reason("sharing", text + hint + preempt + after)
    capped = _capped(problem, j)
    if capped is not None:
        return Reason(capped[0], text + capped[1] + preempt + after)
    off = problem.request.preemption_rules_for(problem.jobs[j].team) is None
    return Reason("preemption" if preempt and off else "gang_size", text + preempt + after)


def _capped(problem: Problem, j: int) -> tuple[str, str] | None:
    """("mig", "; fits if policy.max_mig_changes (0) allowed more ...") when a cap on device changes is what
    keeps job j from fitting alone (making an idle MIG GPU whole is a change too), or the same for sharing; for
    pods sharing a MIG instance, also re-partitioning itself (it alone makes new shared instances)."""
    view = problem.devices
    if view is None or not problem.needs_device_ledger():
        return None
    policy = problem.request.policy
    if not view.changes and any(devices.is_instance_share(problem.tasks[t].spec) for t in problem.job_tasks[j]) \
            and _fits(replace(problem, devices=replace(view, changes=True)), j, _alone_room(problem, j)):
        return "mig", ("; fits if policy.allow_mig_changes were on (free MIG instances shared, or new ones made, "
                       "with policy.sharing_default)")
    for name, field, uncapped in (("mig", "max_mig_changes", {"max_changes": None}),
                                  ("sharing", "max_sharing_changes", {"max_sharing_changes": None})):
        if getattr(policy, field) is not None and _fits(replace(problem, devices=replace(view, **uncapped)), j,
                                                        _alone_room(problem, j)):
            what = "re-partitioning (making an idle MIG GPU whole counts)" if name == "mig" else "shared GPUs"
            return name, f"; fits if policy.{field} ({getattr(policy, field)}) allowed more {what}"
    return None


def _short_detail(problem: Problem, j: int, gang: str) -> str:
    nodes = _nodes(problem, j)
    room = _alone_room(problem, j)
    free = int(room[nodes, 0].sum()) if nodes else 0
    more = " (counting running work it may preempt)" if room is not problem.free else ""
    need = job_gpus_needed(problem, j)
    if need > free:
        eligible = sorted(set().union(*(problem.tasks[t].eligible.tolist() for t in problem.job_tasks[j]
                                        if problem.tasks[t].eligible is not None)))
        pieces = int(room[eligible, 0].sum()) if eligible else 0
        if pieces > free:
            more += f" ({pieces} on all nodes it may use, in pieces too small for its pods)"
        return f"gang of {gang} needs {need} GPUs; matching nodes have {free} free{more}"
    for members, minimum in gang_minimums(problem, j):
        most = sum(min(problem.tasks[t].replicas, int(problem.tasks[t].max_per_node.sum())) for t in members)
        if most < minimum:
            task = problem.tasks[members[0]]
            return (f"gang of {gang}: task '{task.name}' needs {minimum} pods ({filters.demand_text(task)} each) "
                    f"and its matching nodes can take at most {most}{more}")
    gpus = f" ({free} GPUs free there{more})" if need else ""
    return f"no packing of gang of {gang} onto its matching nodes' free room was found{gpus}"


def _sharing_hint(problem: Problem, j: int, placement: Placement | None = None, usage: np.ndarray | None = None) -> str:
    """Idle GPUs that could take the job's share pods, were sharing changes allowed (placement/devices.py)."""
    return next((hint for t in problem.job_tasks[j]
                 if (hint := device_reasons.sharing_hint(problem, problem.tasks[t], placement, usage))), "")


# --------------------------------------------------------------------------------------------
# Teams and quotas: quota reasons, who outranked a job, preemption reasons and one-change hints

#: Above this many (pending jobs × nodes) the "fits if ... were preempted" hint is skipped (it
#: re-runs the greedy fit a few times per pending job).
HINT_BUDGET = 400_000
#: Running jobs tried, lowest priority first, when looking for a set whose preemption would make room.
HINT_VICTIMS = 8


def quota_after(problem: Problem, placement: Placement) -> QuotaLedger | None:
    """What each team holds per quota scope (GPU-equivalents, CPU, memory) once the plan is applied
    (None without quota scopes)."""
    if problem.teams is None or not problem.teams.all_scopes:
        return None
    ledger = QuotaLedger(problem.teams)
    for s, scope in enumerate(problem.teams.all_scopes):
        ledger.alloc[s] = held_in(problem, placement, scope)
    return ledger


def _where(problem: Problem, j: int, free: np.ndarray) -> np.ndarray:
    """(N, 3) what the greedy fit would give job j in `free`, per node: milli-GPU, milli-CPU, MiB."""
    trial = free.copy()
    counts: dict[tuple[int, int], int] = {}
    for t in problem.job_tasks[j]:
        place_task(problem, t, trial, counts)
    return use_of(problem, counts)


def quota_reason(problem: Problem, j: int, ledger: QuotaLedger | None, use: np.ndarray | None = None) -> str | None:
    """"quota: research at 96/96 GPUs ..." when adding job j breaks its team's quota (GPU-equivalents: MIG
    and shared pods count their part of a GPU; CPU and memory quotas too).

    Without `use` (where the job would go, per node) only cluster-wide scopes can be judged.
    """
    team = problem.job_team[j] if problem.job_team else -1
    if ledger is None or team < 0:
        return None
    index = ledger.index
    if use is None:
        total = job_use(problem, j)
        add = np.array([total[s.resource] if s.mask.all() else 0 for s in index.all_scopes], dtype=np.int64)
    else:
        add = index.scope_use(use)
    if not add.any():
        return None
    return ledger.blocker(team, add)


class Justification(NamedTuple):
    """Why a running job is preempted: the placed job it makes room for, the rule of policy.preemption that
    allows it (placement_models.PreemptionRule; None only if no placed job explains it), and a sentence."""

    for_job: str
    rule: str | None
    reason: str


def preemption_reason(problem: Problem, r: int, placement: Placement, ledger: QuotaLedger | None) -> Justification:
    """Why running job r is preempted: a placed job with a pod on its nodes that a rule allows to take its place
    (`Problem.eviction_rules`, and for reclaim its team within nominal after the plan), `within_team` first,
    then `reclaim_within_cohort`, then `borrow_within_cohort`; the highest priority, then the name, first."""
    victim = problem.running[r]
    nodes = set(victim.nodes.tolist())
    stead: dict[int, set[int]] = {}
    for (t, n), k in placement.counts.items():
        if k and n in nodes:
            stead.setdefault(problem.tasks[t].job, set()).add(n)
    order = sorted(stead, key=lambda j: (-problem.jobs[j].priority, problem.jobs[j].name))
    rules = {j: problem.eviction_rules(j, r) for j in order}
    for j in order:
        if "within_team" in rules[j]:
            job = problem.jobs[j]
            if job.priority > victim.priority:
                return Justification(job.name, "within_team",
                                     f"priority {victim.priority} < {job.priority} ({job.name})")
            return Justification(job.name, "within_team",
                                 f"priority {victim.priority} = {job.priority} ({job.name}), started after it "
                                 "was submitted (lower_or_newer_equal_priority)")
    index = problem.teams
    for rule in ("reclaim_within_cohort", "borrow_within_cohort"):
        for s, scope in enumerate(index.scopes if index is not None and victim.team >= 0 else ()):
            if scope.before[victim.team] <= scope.nominal[victim.team]:
                continue
            held, nominal = amount(scope.before[victim.team]), amount(scope.nominal[victim.team])
            borrowing = f"team {index.names[victim.team]} borrowing above nominal ({held}/{nominal} GPUs{scope.label})"
            for j in order:
                team = problem.job_team[j]
                if rule not in rules[j] or not any(scope.mask[n] for n in stead[j]):
                    continue
                name = problem.jobs[j].name
                if rule == "borrow_within_cohort":
                    own = problem.request.preemption_rules_for(problem.jobs[j].team)
                    cap = own.borrow_within_cohort.max_priority_threshold if own is not None else None
                    limit = f", at most {cap}" if cap is not None else ""
                    return Justification(name, rule, f"{borrowing} and priority {victim.priority} < "
                                         f"{problem.jobs[j].priority}{limit}: preempted for {name}, which borrows "
                                         "(borrow_within_cohort)")
                if ledger is not None and ledger.alloc[s, team] <= scope.nominal[team]:
                    return Justification(name, rule, f"{borrowing} while {index.names[team]} below "
                                         f"({amount(ledger.alloc[s, team])}/{amount(scope.nominal[team])} after "
                                         f"this plan): reclaimed for {name}")
    return Justification("", None, "preempted to make room (no job placed in its stead is allowed to preempt it)")


#: The rules `policy.preemption: true` stands for: what the hints assume when preemption is off.
_DEFAULT_RULES = PreemptionRules()


def _hint_rules(problem: Problem, j: int, r: int) -> tuple[str, ...]:
    """The rules under which job j may preempt r; with preemption off, those `policy.preemption: true` would give
    (reclaim only if the job's team may end within its nominal)."""
    if problem.request.preemption_rules_for(problem.jobs[j].team) is not None:
        return _rules(problem, j, problem.eviction_rules(j, r))
    job, victim = problem.jobs[j], problem.running[r]
    if not victim.ripe:  # not preemptible, or too young: no rule allows it
        return ()
    return _rules(problem, j, allowed_rules(_DEFAULT_RULES, job.priority, job.submitted_at,
                                            problem.job_team[j] if problem.job_team else -1,
                                            replace(victim, evictable=victim.ripe),
                                            problem.request.share_cohort(job.team, victim.spec.team)))


def _why_kept(problem: Problem, j: int, r: int) -> str:
    if problem.request.preemption_rules_for(problem.jobs[j].team) is None:
        team = next((t for t in problem.request.teams if t.name == problem.jobs[j].team), None)
        return (f"preemption is off for team {team.name}: its preemption" if team is not None
                and team.preemption is not None else "preemption is off: policy.preemption")
    rule = _hint_rules(problem, j, r)[0]
    return f"{problem.running[r].spec.job} may be preempted for it ({rule}), but the plan keeps it"


def preemption_hint(problem: Problem, j: int, placement: Placement, usage: np.ndarray) -> str:
    """"; fits if 8 GPUs of team vision were preempted (preemption is off: policy.preemption)", or "" (none or too
    costly). Only victims a rule allows for job j are named (with preemption off: the rules `true` would give),
    in the model's order of preference (lowest priority, smallest by `weights.victim_gpus`, least work lost,
    newest); never a job that is not preemptible or has not run policy.min_runtime_s."""
    if not problem.running or len(problem.jobs) * problem.n_nodes > HINT_BUDGET:
        return ""
    tasks = problem.job_tasks[j]
    if any(problem.tasks[t].eligible is None or problem.tasks[t].eligible.size == 0 for t in tasks):
        return ""
    nodes = np.zeros(problem.n_nodes, dtype=bool)
    for t in tasks:
        nodes[problem.tasks[t].eligible] = True
    found = [r.index for r in problem.running if r.ripe and r.index not in placement.evicted
             and nodes[r.nodes].any() and _hint_rules(problem, j, r.index)]
    if not found:
        return ""
    view = _eligible_view(problem, tasks)
    found.sort(key=lambda r: problem.running[r].order(problem.request.policy.weights.victim_gpus))
    room = problem.free - usage
    chosen: list[int] = []
    for r in found[:HINT_VICTIMS]:
        chosen.append(r)
        room = room.copy()
        room[problem.running[r].nodes] += problem.running[r].use
        if _fits(view, j, room):
            break
    else:
        return ""
    for r in list(reversed(chosen))[1:]:  # keep only victims the fit needs
        trial = room.copy()
        trial[problem.running[r].nodes] -= problem.running[r].use
        if _fits(view, j, trial):
            chosen.remove(r)
            room = trial
    why = "; ".join(dict.fromkeys(_why_kept(problem, j, r) for r in chosen))
    return f"; fits if {_victims_text(problem, chosen)} were preempted ({why})"


def _eligible_view(problem: Problem, tasks: tuple[int, ...]) -> Problem:
    """The problem with job j's tasks allowed on every node that passes their filters (free or not)."""
    swapped = list(problem.tasks)
    for t in tasks:
        swapped[t] = replace(problem.tasks[t], candidates=problem.tasks[t].eligible)
    return replace(problem, tasks=tuple(swapped))


def _victims_text(problem: Problem, chosen: list[int]) -> str:
    """"job old (8 GPUs)", or per team "8 GPUs, 2× MIG 1g.10gb of team vision": what the victims hold, MIG
    instances and shares as such (never "0 GPUs")."""
    if problem.teams is None:
        return " and ".join(f"job {problem.running[r].spec.job} ({held_text(_running_kinds(problem, [r]))})"
                            for r in chosen)
    per_team: dict[str, list[int]] = {}
    for r in chosen:
        team = problem.running[r].team
        per_team.setdefault(problem.teams.names[team] if team >= 0 else "(none)", []).append(r)
    return " and ".join(f"{held_text(_running_kinds(problem, rs))} of team {team}" for team, rs in per_team.items())


def _running_kinds(problem: Problem, chosen: list[int]) -> dict[str, int]:
    """What running jobs hold, by kind (rivals.held_text's): whole healthy GPUs, MIG instances, shares."""
    kinds: dict[str, int] = {}
    for r in chosen:
        info = problem.running[r]
        for pod in info.spec.pods:
            if pod.mig is not None:
                kind, count = f"MIG {pod.mig.profile}", 1
            elif pod.gpu_share is not None:
                kind, count = f"{pod.gpu_share:g} of a shared GPU", 1
            else:
                continue
            kinds[kind] = kinds.get(kind, 0) + count
        if info.gpus or not kinds:
            kinds = {"GPUs": kinds.pop("GPUs", 0) + info.gpus, **kinds}
    return kinds
