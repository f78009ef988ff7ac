"""Who took the room a pending job needs, and why the objective ranked them first.

A job that fits the free cluster but not what the plan leaves lost its room to jobs the plan placed.
They are grouped by how the objective ranks them above it (placement.compile: work within a team's
nominal quota above every workload that borrows, classes above each other, then the soft terms within
a class), and the job is tried again without each group, strongest first; the first group whose room
makes it fit names the constraint:

* `quota` — placed work within its team's nominal while the job's team would borrow;
* `priority` — placed jobs of a higher priority class;
* jobs of its own class: `fairness` when those of teams further below their fair share make the room,
  `cost` when a deferrable job in peak lost to jobs that are not deferrable, else `capacity`;
* `capacity` — lower classes (a larger lower-priority gang can be worth more in `weighted` mode).

When no group alone makes room, groups are taken together, and the strongest among them is named.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import NamedTuple

import numpy as np

from placement import devices
from placement.baseline import place_task
from placement.baseline.devices import GreedyDevices
from placement.holdings import held_after, held_in, job_milli, pod_milli, problem_entitlements, use_of
from placement.problem import Problem, Slot
from placement.solution import Placement
from placement.teams import MILLI, QuotaLedger, amount

#: Candidate nodes per set of candidate arrays (`job_nodes`), keyed by the arrays' identity.
_JOB_NODES: Slot[dict[tuple[int, ...], tuple[tuple[np.ndarray, ...], list[int]]]] = Slot("job_nodes")

#: Rivals named per group (the rest are counted).
SHOWN = 3

Fits = Callable[..., bool]


class Reason(NamedTuple):
    """Why a job waits: the binding constraint's name (placement_models.PendingConstraint) and a sentence."""

    constraint: str
    text: str


def _holdings(problem: Problem, placement: Placement) -> dict[int, dict[int, tuple[dict[str, int], int]]]:
    """node -> placed job -> (what it holds there by kind, milli-GPU), built once per plan: thousands of pending
    jobs each ask who took their nodes. Kinds: "GPUs" (whole), "MIG 1g.10gb" and "0.25 of a shared GPU" (pods),
    "CPU-only pods"."""
    if "holdings" not in placement.memo:
        index: dict[int, dict[int, tuple[dict[str, int], int]]] = {}
        view = problem.devices
        for (t, n), k in placement.counts.items():
            if not k:
                continue
            task = problem.tasks[t]
            spec = task.spec
            if devices.is_mig(spec) and view is not None:
                found = devices.profile_for(spec, view.geometry(n))
                kind, count = f"MIG {found.name if found is not None else spec.mig_profile}", k
            elif devices.is_shared(spec):
                kind, count = f"{spec.gpu_share:g} of a shared GPU", k
            elif task.demand[0] > 0:
                kind, count = "GPUs", int(task.demand[0]) * k
            else:
                kind, count = "CPU-only pods", k
            kinds, milli = index.setdefault(n, {}).get(task.job, ({}, 0))
            kinds[kind] = kinds.get(kind, 0) + count
            index[n][task.job] = (kinds, milli + pod_milli(problem, t, n) * k)
        placement.memo["holdings"] = index
    return placement.memo["holdings"]  # type: ignore[return-value]


class Rivals(dict[int, tuple[dict[str, int], int]]):
    """Placed job -> (what it holds on some nodes by kind, milli-GPU), and (once asked) the jobs ranked as
    reasons name them: highest priority, then most GPUs, then name."""

    ranked: list[int] | None = None


def job_nodes(problem: Problem, j: int) -> list[int]:
    """Job j's candidate nodes, ascending (read-only: shared). Once per set of candidate arrays: jobs of one shape
    share theirs, and a pass over every node per pending job cost 0.1 s of 319 pending reasons at 12,500 nodes.
    Keyed by the arrays' identity, which the entry keeps alive."""
    arrays = tuple(problem.tasks[t].candidates for t in problem.job_tasks[j])
    cache = problem.facts.slot(_JOB_NODES, problem, dict)
    key = tuple(id(a) for a in arrays)
    hit = cache.get(key)
    if hit is None or any(a is not b for a, b in zip(hit[0], arrays, strict=True)):
        hit = cache[key] = (arrays, sorted(set().union(*(a.tolist() for a in arrays))))
    return hit[1]


def rivals_on(problem: Problem, placement: Placement, nodes: list[int]) -> Rivals:
    """Placed jobs on these nodes and what they hold there; cached per node set, since jobs of one shape share
    their candidate nodes (and, from `job_nodes`, the very list: then found by identity, without a pass over it)."""
    shared: dict[int, tuple[list[int], Rivals]] = placement.memo.setdefault("rivals_of_list", {})  # type: ignore[assignment]
    found = shared.get(id(nodes))
    if found is not None and found[0] is nodes:
        return found[1]
    cache: dict[bytes, Rivals] = placement.memo.setdefault("rivals", {})  # type: ignore[assignment]
    key = np.asarray(nodes, dtype=np.int64).tobytes()
    if key not in cache:
        out = Rivals()
        by_node = _holdings(problem, placement)
        for n in nodes:
            for rival, (kinds, milli) in by_node.get(n, {}).items():
                have, total = out.get(rival, ({}, 0))
                merged = dict(have)
                for kind, count in kinds.items():
                    merged[kind] = merged.get(kind, 0) + count
                out[rival] = (merged, total + milli)
        cache[key] = out
    shared[id(nodes)] = (nodes, cache[key])
    return cache[key]


def held_text(kinds: dict[str, int]) -> str:
    """"8 GPUs", "3× MIG 1g.10gb", "2× 0.25 of a shared GPU", "1 CPU-only pod": never "0 GPUs" for a device pod."""
    parts = []
    for kind, count in kinds.items():
        if kind == "GPUs":
            parts.append(f"{count} GPU" + ("s" if count != 1 else ""))
        elif kind == "CPU-only pods":
            parts.append(f"{count} CPU-only pod" + ("s" if count != 1 else ""))
        else:
            parts.append(f"{count}× {kind}")
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------
# Groups of placed jobs, by how the objective ranks them above job j


def _team_state(problem: Problem, placement: Placement) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Per GPU scope what each team holds after the plan (milli-GPU); held after the plan cluster-wide
    (milli-GPU) and fair entitlements (GPUs), once per plan."""
    if "team_state" not in placement.memo:
        index = problem.teams
        assert index is not None
        scopes = [held_in(problem, placement, s) for s in index.scopes]
        placement.memo["team_state"] = (scopes, held_after(problem, placement), problem_entitlements(problem))
    return placement.memo["team_state"]  # type: ignore[return-value]


def _within_nominal(problem: Problem, placement: Placement) -> set[int]:
    """Placed jobs whose team holds no more than its nominal in every GPU scope where they have pods."""
    if "within_nominal" not in placement.memo:
        index = problem.teams
        out: set[int] = set()
        if index is not None and index.scopes:
            scopes, _, _ = _team_state(problem, placement)
            nodes: dict[int, set[int]] = {}
            for (t, n), k in placement.counts.items():
                if k:
                    nodes.setdefault(problem.tasks[t].job, set()).add(n)
            for r, where in nodes.items():
                team = problem.job_team[r]
                if team >= 0 and all(held[team] <= s.nominal[team] for s, held in zip(index.scopes, scopes, strict=True)
                                     if any(s.mask[n] for n in where)):
                    out.add(r)
        placement.memo["within_nominal"] = out
    return placement.memo["within_nominal"]  # type: ignore[return-value]


def _borrows(problem: Problem, j: int, placement: Placement, nodes: list[int]) -> tuple[str, int, int] | None:
    """(scope label, held, nominal) of the first GPU scope on job j's nodes where its team would hold more than
    its nominal with the job placed (milli-GPU), or None (no teams, or within nominal everywhere)."""
    index = problem.teams
    team = problem.job_team[j] if problem.job_team else -1
    if index is None or team < 0 or not index.scopes:
        return None
    scopes, _, _ = _team_state(problem, placement)
    need = job_milli(problem, j)
    for s, held in zip(index.scopes, scopes, strict=True):
        if any(s.mask[n] for n in nodes) and held[team] + need > s.nominal[team]:
            return s.label, int(held[team]), int(s.nominal[team])
    return None


def _groups(problem: Problem, j: int, placement: Placement, nodes: list[int]) -> list[tuple[str, frozenset[int]]]:
    """Placed jobs in the order the objective ranks them above job j: ("nominal", ...), ("higher", ...),
    ("same", ...), ("lower", ...); a job is in the first group that fits it. Once per (priority, team, borrows)."""
    mine = problem.jobs[j].priority
    team = problem.job_team[j] if problem.job_team else -1
    borrows = _borrows(problem, j, placement, nodes) is not None
    cache: dict[object, list[tuple[str, frozenset[int]]]] = placement.memo.setdefault("groups", {})  # type: ignore[assignment]
    key = (mine, team, borrows)
    if key not in cache:
        placed = placement.placed_jobs(problem) - {j}
        nominal = _within_nominal(problem, placement) & placed if borrows else set()
        nominal = {r for r in nominal if problem.job_team[r] != team}
        rest = placed - nominal
        # Frozen: every pending job of the key shares them (a copy per job cost a pass over every placed job),
        # and `_fits_without` keys its cache by them at no cost.
        cache[key] = [("nominal", frozenset(nominal)),
                      ("higher", frozenset(r for r in rest if problem.jobs[r].priority > mine)),
                      ("same", frozenset(r for r in rest if problem.jobs[r].priority == mine)),
                      ("lower", frozenset(r for r in rest if problem.jobs[r].priority < mine))]
    return [(name, members - {j} if j in members else members) for name, members in cache[key]]


def _fits_without(problem: Problem, j: int, placement: Placement, usage: np.ndarray, drop: set[int],
                  fits: Fits) -> bool:
    """Would job j fit in what the plan leaves once the jobs in `drop` were taken out of it?"""
    cache: dict[frozenset[int], tuple[Placement, np.ndarray]] = placement.memo.setdefault("without", {})  # type: ignore[assignment]
    key = frozenset(drop)
    if key not in cache:  # once per set: pending jobs of a class share them, and so their fit caches
        counts = {pair: k for pair, k in placement.counts.items() if problem.tasks[pair[0]].job not in drop}
        freed = np.zeros_like(problem.free)
        for (t, n), k in placement.counts.items():
            if problem.tasks[t].job in drop:
                freed[n] += problem.tasks[t].demand * k
        cache[key] = (Placement(counts=counts, evicted=placement.evicted,
                                shares={pair: v for pair, v in placement.shares.items() if pair in counts},
                                mig_layouts=placement.mig_layouts, sharing_changes=placement.sharing_changes,
                                instance_shares={pair: v for pair, v in placement.instance_shares.items()
                                                 if pair in counts},
                                shared_instances=placement.shared_instances),
                      problem.free - usage + freed)
    without, left = cache[key]
    return bool(fits(problem, j, left, without, topology=True))


def _refused(problem: Problem, j: int, placement: Placement, drop: set[int]) -> str | None:
    """Once the jobs in `drop` made room (`_fits_without`, cached), would job j's team's quota still refuse it
    where the greedy fit puts it? Its quota reason then, else None."""
    index, team = problem.teams, problem.job_team[j] if problem.job_team else -1
    if index is None or not index.all_scopes or team < 0:
        return None
    without, left = placement.memo["without"][frozenset(drop)]  # type: ignore[index]
    ledger = QuotaLedger(index)
    for s, scope in enumerate(index.all_scopes):
        ledger.alloc[s] = held_in(problem, without, scope)
    trial, counts = left.copy(), {}
    for t in problem.job_tasks[j]:
        place_task(problem, t, trial, counts)
    add = index.scope_use(use_of(problem, counts))
    return ledger.blocker(team, add) if add.any() else None


def who_took(problem: Problem, j: int, placement: Placement, usage: np.ndarray, gang: str,
             fits: Fits) -> Reason | None:
    """The constraint and sentence naming the placed jobs whose room job j needs (module docstring), or None
    when taking every placed job out would still not make it fit (running work holds the room).

    Fits take whole groups out, on every node (the same few sets for every pending job of a class, so their
    fit caches serve them all); sentences name the group's jobs on the job's nodes."""
    nodes = job_nodes(problem, j)
    rivals = rivals_on(problem, placement, nodes)
    # (group, its members, whether any is on the job's nodes): an early-exit test, not an intersection
    groups = [(name, members, not rivals.keys().isdisjoint(members))
              for name, members in _groups(problem, j, placement, nodes)]
    refused: tuple[str, set[int]] | None = None  # room a group would leave, where the quota refuses it
    for name, members, here in groups:
        if here and _fits_without(problem, j, placement, usage, members, fits):
            blocked = _refused(problem, j, placement, members)
            if blocked is None:
                return _told(problem, j, placement, usage, name, members, rivals, gang, nodes, fits)
            refused = refused or (blocked, members & rivals.keys())
    taken: set[int] = set()
    present: list[str] = []
    for name, members, here in groups:
        taken |= members
        present += [name] if here else []
        if len(present) > 1 and _fits_without(problem, j, placement, usage, taken, fits):
            blocked = _refused(problem, j, placement, taken)
            if blocked is not None:
                refused = refused or (blocked, taken & rivals.keys())
                continue
            lead = next(m for n, m, _ in groups if n == present[0])
            first = _told(problem, j, placement, usage, present[0], lead, rivals, gang, nodes, fits)
            also = sorted((taken - lead) & rivals.keys(), key=lambda r: _rank(problem, r, rivals))
            return Reason(first.constraint, first.text + f"; it needs the room of {_named(problem, also, rivals)} too")
    if refused is not None:
        return Reason("quota", f"{refused[0]} (counting the room of {_named(problem, refused[1], rivals)} as free); "
                               f"gang of {gang} does not fit in {_left_text(problem, j, placement, usage, nodes)}")
    return None


def _on_nodes(placement: Placement, members: set[int] | frozenset[int], rivals: Rivals) -> set[int]:
    """members & rivals (read-only: shared): once per group and node set, which pending jobs of a class share
    (an intersection per pending job cost a pass over every placed job). Only frozen groups are kept."""
    if not isinstance(members, frozenset):
        return set(members & rivals.keys())
    cache: dict[tuple[int, int], tuple[set[int] | frozenset[int], Rivals, set[int]]] = placement.memo.setdefault(
        "on_nodes", {})  # type: ignore[assignment]
    hit = cache.get((id(members), id(rivals)))
    if hit is None or hit[0] is not members or hit[1] is not rivals:
        hit = cache[id(members), id(rivals)] = (members, rivals, set(members & rivals.keys()))
    return hit[2]


def crowded(problem: Problem, j: int, placement: Placement, usage: np.ndarray, gang: str) -> str:
    """The plan's jobs on job j's nodes, when no group of them alone explains why it does not fit."""
    nodes = job_nodes(problem, j)
    rivals = rivals_on(problem, placement, nodes)
    who = f": {_named(problem, set(rivals), rivals)}" if rivals else ""
    return (f"capacity went to the jobs this plan placed on its matching nodes{who}; gang of {gang} does not fit in "
            f"{_left_text(problem, j, placement, usage, nodes)}")


def _rank(problem: Problem, r: int, rivals: Rivals) -> tuple[int, int, str]:
    return -problem.jobs[r].priority, -rivals[r][1], problem.jobs[r].name


def _named(problem: Problem, members: list[int] | set[int], rivals: Rivals,
           team: bool = False) -> str:
    """"x (priority 1000, 8 GPUs), y (priority 5, 2× MIG 1g.10gb) and 3 more"."""
    wanted = set(members)
    if len(wanted) > SHOWN:  # each node set's rivals are ranked once (`rivals_on` keeps them for the plan)
        if rivals.ranked is None:
            rivals.ranked = sorted(rivals, key=lambda r: _rank(problem, r, rivals))
        top = list(islice((r for r in rivals.ranked if r in wanted), SHOWN))
    else:
        top = sorted(wanted, key=lambda r: _rank(problem, r, rivals))

    def one(r: int) -> str:
        owner = ""
        if team and problem.teams is not None and problem.job_team[r] >= 0:
            owner = f"team {problem.teams.names[problem.job_team[r]]}, "
        return f"{problem.jobs[r].name} ({owner}priority {problem.jobs[r].priority}, {held_text(rivals[r][0])})"

    text = ", ".join(one(r) for r in top)
    return text + (f" and {len(members) - len(top)} more" if len(members) > len(top) else "")


def _left_text(problem: Problem, j: int, placement: Placement, usage: np.ndarray, nodes: list[int]) -> str:
    """What the plan leaves on the job's nodes, in the job's own terms: whole GPUs for GPU pods, how many of
    its MIG or shared pods the devices left would take (never GPUs), CPU and memory for CPU-only pods."""
    left = _left_on(problem, placement, usage, nodes)
    tasks = [problem.tasks[t] for t in problem.job_tasks[j]]
    parts = []
    if any(t.demand[0] > 0 for t in tasks):
        parts.append(f"{int(left[0])} GPUs")
    for t in tasks:
        if devices.uses_devices(t.spec):
            kind = f"MIG {t.spec.mig_profile}" if devices.is_mig(t.spec) else f"{t.spec.gpu_share:g}-share"
            parts.append(f"room for {_device_room(problem, t.index, placement, usage)} of its {t.replicas} {kind} "
                         f"pods of task '{t.name}'")
    if not parts:
        parts.append(f"{left[1] / 1000:g} CPU and {left[2] / 1024:g} GiB")
    return f"what this plan leaves on matching nodes ({'; '.join(parts)})"


def _left_on(problem: Problem, placement: Placement, usage: np.ndarray, nodes: list[int]) -> np.ndarray:
    """What the plan leaves on `nodes` in all, (3,): once per node list (jobs of one shape share theirs,
    `job_nodes`), keyed by its and `usage`'s identity, which the entry keeps alive."""
    cache: dict[tuple[int, int], tuple[list[int], np.ndarray, np.ndarray]] = placement.memo.setdefault(
        "left_on", {})  # type: ignore[assignment]
    hit = cache.get((id(nodes), id(usage)))
    if hit is None or hit[0] is not nodes or hit[1] is not usage:
        hit = cache[id(nodes), id(usage)] = (nodes, usage, (problem.free[nodes] - usage[nodes]).sum(axis=0))
    return hit[2]


def _device_room(problem: Problem, t: int, placement: Placement, usage: np.ndarray) -> int:
    """Pods of MIG/shared task t the devices take beside the plan: the loaded ledger is built once per plan, and
    the answer once per task shape (thousands of pending MIG jobs share a handful of shapes)."""
    memo: dict[object, object] = placement.memo.setdefault("device_room", {})  # type: ignore[assignment]
    if "ledger" not in memo:
        room = problem.free - usage
        ledger = GreedyDevices(problem)
        ledger.apply(placement, room)
        memo["ledger"] = (ledger, room)
    ledger, room = memo["ledger"]  # type: ignore[misc]
    task = problem.tasks[t]
    key = (repr(sorted(task.spec.model_dump(exclude={"name"}).items())), task.candidates.tobytes(),
           task.demand.tobytes())
    if key not in memo:
        memo[key] = ledger.trial().place_task(t, room.copy(), {})
    return int(memo[key])  # type: ignore[call-overload]


def _told(problem: Problem, j: int, placement: Placement, usage: np.ndarray, group: str, members: set[int],
          rivals: Rivals, gang: str, nodes: list[int], fits: Fits) -> Reason:
    """The sentence for one group of placed jobs whose room job j needs (named: those on its nodes)."""
    everywhere, members = members, _on_nodes(placement, members, rivals)
    tail = f"; gang of {gang} does not fit in {_left_text(problem, j, placement, usage, nodes)}"
    job = problem.jobs[j]
    if group == "nominal":
        label, held, nominal = _borrows(problem, j, placement, nodes) or ("", 0, 0)
        name = problem.teams.names[problem.job_team[j]] if problem.teams is not None else "?"
        need = amount(job_milli(problem, j))
        return Reason("quota", f"quota: team {name} would borrow above its nominal{label} ({amount(held)} of "
                               f"{amount(nominal)} GPUs held; the gang needs {need} more), and work within its team's "
                               f"nominal ranks above borrowing, whatever the priority: the room went to "
                               f"{_named(problem, members, rivals, team=True)}" + tail)
    # Work within a team's nominal ranks above every workload that borrows, whatever the classes
    # (compile/nominal.py): it decides when the job would take its team past its nominal (it would add less
    # within nominal than it asks) and the rivals hold work within theirs; else classes and the soft terms do.
    inside = _inside(problem, j, placement, members, nodes)
    worth = job_milli(problem, j)
    if inside is not None and inside[0] > 0 and inside[1] < worth:
        return Reason("quota", f"quota: this job would borrow (only {amount(inside[1])} of its {amount(worth)} GPUs "
                               f"within its team's nominal), and work within a team's nominal ranks above borrowing, "
                               f"whatever the class: the jobs that took the room hold {amount(inside[0])} GPUs within "
                               f"their teams' nominal: {_named(problem, members, rivals, team=True)}" + tail)
    mode = problem.request.policy.priority_mode
    least = worth * job.needed // max(job.pods, 1)  # an elastic gang is sure of its needed pods only
    if group == "higher" and (mode == "strict" or sum(_milli(problem, placement, r) for r in members) <= least):
        return Reason("priority", f"outranked by jobs {_named(problem, members, rivals)}: a higher priority class "
                                  f"took the room it needs" + tail)
    weighted = f"(priority_mode {mode}: a job is worth its priority level's weight × its GPUs)"
    if group == "higher":  # weighted levels: a bigger job of a higher level is worth more in all
        return Reason("capacity", f"outranked by jobs {_named(problem, members, rivals)}, worth more in all "
                                  f"{weighted}" + tail)
    if group == "lower":
        why = f"the plan values more {weighted}" if mode == "weighted" else "the plan preferred"
        return Reason("capacity", f"capacity went to lower-priority jobs {why}: {_named(problem, members, rivals)}"
                      + tail)
    # The soft terms decide only between jobs worth as much: a bigger rival wins on its value alone.
    fair = _favoured(problem, j, placement, everywhere)
    if fair & rivals.keys() and sum(_milli(problem, placement, r) for r in fair & rivals.keys()) <= worth and \
            _fits_without(problem, j, placement, usage, fair, fits):
        fair &= rivals.keys()
        _, held, entitled = _team_state(problem, placement)
        team = problem.job_team[j]
        names = problem.teams.names if problem.teams is not None else ()
        others = sorted({problem.job_team[r] for r in fair})
        given = {t: sum(_milli(problem, placement, r) for r in fair if problem.job_team[r] == t) for t in others}
        told = ", ".join(f"{names[t]} at {amount(int(held[t]) - given[t])} of {float(entitled[t]):.4g}" for t in others)
        would = amount(int(held[team]) + job_milli(problem, j))
        return Reason("fairness", f"fairness: team {names[team]} would hold {would} GPUs against a fair share of "
                                  f"{float(entitled[team]):.4g}; the room went to teams "
                                  f"further below theirs ({told} GPUs without them): "
                                  f"{_named(problem, fair, rivals, team=True)}"
                                  + tail)
    prompt = {r for r in everywhere if not problem.jobs[r].deferrable}
    if job.deferrable and problem.request.in_peak and prompt & rivals.keys() and sum(
            _milli(problem, placement, r) for r in prompt & rivals.keys()) <= worth and _fits_without(
            problem, j, placement, usage, prompt, fits):
        prompt &= rivals.keys()
        return Reason("cost", f"during peak (policy.peak) a deferrable job is worth half its priority value, so jobs "
                              f"of its priority that are not deferrable took the room: "
                              f"{_named(problem, prompt, rivals)}" + tail)
    return Reason("capacity", f"capacity went to jobs of its own priority ({job.priority}) that the plan preferred: "
                              f"{_named(problem, members, rivals)}" + tail)


def _inside(problem: Problem, j: int, placement: Placement, drop: set[int], nodes: list[int]) -> tuple[int, int] | None:
    """(milli-GPU within their teams' nominal the plan would lose without the jobs in `drop`, milli-GPU within
    its team's nominal job j would add then), over the GPU scopes that hold all of job j's nodes: what the quota
    term weighs above every class; None without that term."""
    index = problem.teams
    team = problem.job_team[j] if problem.job_team else -1
    if index is None or not index.scopes or problem.request.policy.weights.priority <= 0:
        return None
    if "scope_milli" not in placement.memo:  # per placed job: milli-GPU it holds in each GPU scope, once per plan
        per: dict[int, np.ndarray] = {}
        for (t, n), k in placement.counts.items():
            r = problem.tasks[t].job
            inside = per.setdefault(r, np.zeros(len(index.scopes), dtype=np.int64))
            inside += np.array([scope.mask[n] for scope in index.scopes], dtype=np.int64) * pod_milli(problem, t, n) * k
        placement.memo["scope_milli"] = per
    per = placement.memo["scope_milli"]  # type: ignore[assignment]
    dropped = np.zeros((len(index.scopes), index.size), dtype=np.int64)  # what `drop` holds, per scope and team
    for r in drop:
        if problem.job_team[r] >= 0 and r in per:
            dropped[:, problem.job_team[r]] += per[r]
    held, _, _ = _team_state(problem, placement)
    lost = gain = 0
    need = job_milli(problem, j)
    for scope, have, gone in zip(index.scopes, held, dropped, strict=True):
        if not all(scope.mask[n] for n in nodes):
            continue  # where the job would land in this scope is open: no claim
        nominal = scope.nominal
        lost += int((np.minimum(nominal, have) - np.minimum(nominal, have - gone)).sum())
        if team >= 0:
            rest = int(have[team] - gone[team])
            gain += min(int(nominal[team]), rest + need) - min(int(nominal[team]), rest)
    return lost, gain


def _milli(problem: Problem, placement: Placement, r: int) -> int:
    """Milli-GPU placed job r holds in the plan (all placed jobs' counted once per plan)."""
    if "milli_by_job" not in placement.memo:
        per: dict[int, int] = {}
        for (t, n), k in placement.counts.items():
            per[problem.tasks[t].job] = per.get(problem.tasks[t].job, 0) + pod_milli(problem, t, n) * k
        placement.memo["milli_by_job"] = per
    return placement.memo["milli_by_job"].get(r, 0)  # type: ignore[attr-defined, no-any-return]


def _favoured(problem: Problem, j: int, placement: Placement, members: set[int]) -> set[int]:
    """Rivals of other teams further below their fair share than job j's team would be with it placed (the
    fairness term's order), when that term counts."""
    team = problem.job_team[j] if problem.job_team else -1
    if problem.teams is None or team < 0 or problem.request.policy.weights.fairness <= 0:
        return set()
    _, held, entitled = _team_state(problem, placement)

    def share(t: int, extra: int = 0) -> float:
        return (held[t] + extra) / MILLI / entitled[t] if entitled[t] > 0 else float("inf")

    mine = share(team, job_milli(problem, j))
    return {r for r in members if 0 <= problem.job_team[r] != team and share(problem.job_team[r]) < mine}
