"""Teams in numbers: quota scopes, fair entitlements, the quota ledger and Jain's index.

Shared by the compiler (quota, fairness and preemption modules), the greedy baseline (which must
respect quotas so that its plan stays a feasible hint) and the plan report. Pure numpy and the
wire format: no CP-SAT here, so the same arithmetic serves a model and a report.

Quota semantics (Kueue's ClusterQueue/cohort). A *scope* is a set of
nodes and a resource a quota counts: GPUs on the whole cluster (`quota.gpus`) or on one flavor
(`quota.flavors[].gpus`, the nodes of a pool and/or GPU model), CPU or memory on the whole cluster
(`quota.cpu`, `quota.memory_gib`) or on one flavor's nodes (`quota.flavors[].cpu`, `.memory_gib`,
as Kueue counts `cpu` and `memory` per ResourceFlavor). Once any team declares a scope, every team
is in it; a team that declares nothing there has nominal 0 and may only borrow. For team T in scope
s, with A_T what it holds after the plan (running jobs kept + placed jobs on the scope's nodes):

    A_T ≤ nominal_T + borrowing_limit_T                             (no limit when unset)
    Σ_T max(0, A_T − guaranteed_T) ≤ Σ_T lendable_T                  (borrow only what is idle)

where lendable_T = min(lending_limit_T, nominal_T) and guaranteed_T = nominal_T − lendable_T is
never lent. A plan never makes an existing excess worse but need not cure it: each limit is
raised to what running jobs already hold (quotas can shrink under running work; Kueue does not
evict to enforce a quota either).

The rule above is one cohort holding every team: the request's shape when no team names a cohort and
none is declared (`Scope.tree` None). With cohorts (`Tree`) it applies at every cohort c to its
children x (teams and child cohorts), each drawing over_x = max(0, E_x − guaranteed_x) on c:

    draw_c = Σ_x over_x ≤ pool_c + borrowing_limit_c   (0 for a root: it has no parent to borrow from)
    pool_c = nominal_c + Σ_x lendable_x                   (c's own nominal is lent to its subtree)

A child cohort k enters its parent with lendable_k = min(lending_limit_k, pool_k) and guaranteed_k =
capacity_k − lendable_k, where E_k counts its children's idle guaranteed parts as used (they are
nobody else's): so over_k = max(0, draw_k − pool_k + lendable_k) is exactly what k takes from its parent
beyond what it lends it. A team in no cohort neither borrows nor lends: it holds at most its nominal.

Units: every GPU counts, in GPU-equivalents: a whole-GPU pod its GPUs, a MIG pod its instance's
memory slices over its GPU's (the node's model: 1g on an 8-slice GPU is 1/8), a pod on a shared GPU
its `gpu_share`, a pod on a shared MIG instance that share of its instance's part; running pods the
same. Scopes, the ledger and the model count integers: milli-GPU (`MILLI` per GPU, demands rounded
up, so 8 × 1/8 fit a quota of 1 GPU and 9 do not), milli-CPU and MiB (quotas rounded down, demands
up: integer accounting is never more permissive than the request).
Reports and reasons print GPUs, cores and GiB (`amount`).

Fair entitlement (KAI's two stages, Slurm's fair-share factor): a team first gets its nominal,
capped by its demand; the GPUs left are water-filled by weight among teams with unmet demand, up
to their borrowing limits, with each weight scaled by 2^(−U/S) (U: the team's share of all past
usage, S: its share of all weight), so teams that used more than their share lately get less now.
A team's weight there is its fair weight (`cohorts.fair_weights`): its own weight times the weights of the
cohorts above it, as Kueue weighs sibling cohorts under hierarchical fair sharing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from placement_models import Cohort, GpuQuota, PlacementRequest, ResourceQuota, Team

from placement import catalog
from placement.catalog import MigGeometry, MigProfile
from placement.cohorts import UNLIMITED, Tree, fair_weights

#: Integer GPU-equivalents per GPU (the same as placement.devices.MILLI, which this layer cannot import).
MILLI = 1000
#: What `Scope.resource` indexes, and the integer unit of each: milli-GPU, milli-CPU, MiB (Problem.DIMS' units).
RESOURCES = ("gpus", "cpu", "memory")
_PER_UNIT = (MILLI, 1000, 1024)  # integer units per GPU, core, GiB


# --------------------------------------------------------------------------------------------
# GPU-equivalents


def share_milli(share: float) -> int:
    """Milli-GPU of a pod's share of a shared GPU (rounded up)."""
    return int(math.ceil(share * MILLI - 1e-6))


def instance_share_milli(share: float, instance: int) -> int:
    """Milli-GPU of a pod's share of a shared MIG instance of `instance` milli-GPU (rounded up)."""
    return int(math.ceil(share * instance - 1e-6))


def slice_milli(geo: MigGeometry, profile: MigProfile) -> int:
    """Milli-GPU of one MIG instance: its memory slices over the GPU's (rounded up; exact for 8 and 4 slices)."""
    return int(math.ceil(MILLI * profile.memory_slices / geo.memory_slices - 1e-6))


def mig_milli(model: str | None, profile: str) -> int:
    """Milli-GPU of an instance of a named profile on a GPU model (0 when the model has no such profile)."""
    geo = catalog.mig_geometry(model) if model else None
    found = geo.profile(profile) if geo is not None else None
    return slice_milli(geo, found) if geo is not None and found is not None else 0


def to_units(value: float, resource: int, demand: bool) -> int:
    """GPUs, cores or GiB in the resource's integer unit: demands round up, limits down."""
    x = value * _PER_UNIT[resource]
    return int(math.ceil(x - 1e-6)) if demand else int(math.floor(x + 1e-6))


def amount(value: float, resource: int = 0) -> str:
    """An integer amount of a resource as people read it: '8', '0.125' (GPUs), '96' (cores), '512 GiB'."""
    x = float(value) / _PER_UNIT[resource]
    text = f"{x:.3f}".rstrip("0").rstrip(".")
    return f"{text} GiB" if resource == 2 else text


def running_holdings(request: PlacementRequest, nodes: Sequence[object],
                     gpu_models: Sequence[str | None]) -> tuple[dict[int, np.ndarray], ...]:
    """Per running job (request order), node index -> (milli-GPU, milli-CPU, MiB) it holds there.

    A whole GPU counts when healthy; a MIG instance or a share counts when its GPU is healthy.
    """
    index = {getattr(n, "name", None): i for i, n in enumerate(nodes)}
    out: list[dict[int, np.ndarray]] = []
    for rj in request.cluster.running:
        per: dict[int, np.ndarray] = {}
        for pod in rj.pods:
            i = index[pod.node]
            bad = set(getattr(nodes[i], "unhealthy_gpus", ()))
            if pod.mig is not None:
                milli = 0 if pod.mig.gpu in bad else mig_milli(gpu_models[i], pod.mig.profile)
                if pod.gpu_share is not None:  # a share of a shared instance: that part of the instance's
                    milli = instance_share_milli(pod.gpu_share, milli)
            elif pod.gpu_share is not None:
                milli = 0 if any(g in bad for g in pod.gpus) else share_milli(pod.gpu_share)
            else:
                milli = MILLI * len([g for g in pod.gpus if g not in bad])
            use = np.array([milli, to_units(pod.cpu, 1, True), to_units(pod.memory_gib, 2, True)], dtype=np.int64)
            per[i] = per.get(i, np.zeros(3, dtype=np.int64)) + use
        out.append(per)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Fair share


def water_fill(capacity: float, caps: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted max-min allocation: a_i = min(cap_i, w_i·λ) with Σ a_i = min(capacity, Σ cap_i).

    Teams are raised together in proportion to their weights; a team stops at its cap and the
    rest keep rising (the classic progressive filling). Exact, O(T log T).
    """
    caps = np.maximum(np.asarray(caps, dtype=float), 0.0)
    weights = np.asarray(weights, dtype=float)
    out = np.zeros_like(caps)
    left = max(0.0, float(capacity))
    if caps.sum() <= left:
        return caps.copy()
    active = np.ones(caps.size, dtype=bool) & (weights > 0)
    for i in np.argsort(caps / np.where(weights > 0, weights, 1.0), kind="stable"):
        if not active[i]:
            continue
        level = left / weights[active].sum()
        if caps[i] <= weights[i] * level:
            out[i] = caps[i]
            left -= caps[i]
            active[i] = False
        else:
            out[active] = weights[active] * level
            return out
    return out


def fairshare_factor(usage: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Slurm's classic fair-share factor 2^(−U/S): 1 for no past usage, ½ for usage equal to the share."""
    usage = np.asarray(usage, dtype=float)
    weights = np.asarray(weights, dtype=float)
    if usage.sum() <= 0 or weights.sum() <= 0:
        return np.ones_like(weights)
    # Floor: a team that used everything still takes what nobody else wants.
    return np.maximum(np.power(2.0, -(usage / usage.sum()) / (weights / weights.sum())), 1e-6)


def entitlements(capacity: float, demand: np.ndarray, nominal: np.ndarray, limit: np.ndarray,
                 weights: np.ndarray, usage: np.ndarray) -> np.ndarray:
    """Each team's fair GPUs: nominal first (by weight if over-committed), then the rest by usage-scaled weight."""
    demand = np.asarray(demand, dtype=float)
    cap = np.minimum(demand, np.asarray(limit, dtype=float))
    first = water_fill(capacity, np.minimum(cap, nominal), weights)
    second = water_fill(capacity - first.sum(), cap - first, np.asarray(weights) * fairshare_factor(usage, weights))
    return first + second


def jain(values: Sequence[float] | np.ndarray) -> float | None:
    """Jain's fairness index (Σx)²/(n·Σx²): 1 when all equal, 1/n when one takes all; None when undefined."""
    x = np.asarray(values, dtype=float)
    if x.size == 0 or not (x * x).sum() > 0:
        return None
    return float(x.sum() ** 2 / (x.size * (x * x).sum()))


def decayed_usage(team: Team, now: datetime) -> float:
    """Past GPU-hours halved every `usage_half_life_h` since `usage_at` (unchanged when either is unset)."""
    if team.usage_at is None or team.usage_half_life_h is None:
        return team.usage_gpu_h
    age_h = max(0.0, (now - team.usage_at).total_seconds() / 3600.0)
    return team.usage_gpu_h * math.pow(2.0, -age_h / team.usage_half_life_h)


# --------------------------------------------------------------------------------------------
# Quota scopes


@dataclass(frozen=True)
class Scope:
    """One quota scope: its nodes, its resource and every team's limits there, in the resource's integer
    unit (milli-GPU, milli-CPU or MiB; UNLIMITED for none)."""

    label: str  # "" for the whole cluster, else e.g. " on pool h100-spot"
    mask: np.ndarray  # (N,) bool: nodes whose resources this scope counts
    nominal: np.ndarray  # (T,) int
    limit: np.ndarray  # (T,) int: nominal + borrowing_limit
    lendable: np.ndarray  # (T,) int: min(lending_limit, nominal)
    before: np.ndarray  # (T,) int: what running jobs hold here before the plan
    resource: int = 0  # index into RESOURCES: 0 GPUs, 1 CPU, 2 memory
    #: the cohorts teams borrow in; None: one implicit cohort of every team (`pool` is its limit)
    tree: Tree | None = None

    @property
    def guaranteed(self) -> np.ndarray:
        return self.nominal - self.lendable

    @property
    def cap(self) -> np.ndarray:
        """Per-team ceiling the plan must respect: the limit, or what the team already holds if more."""
        return np.maximum(self.limit, self.before)

    @property
    def pool(self) -> int:
        """What the cohort may have borrowed in total: the lendable nominal, or what is already borrowed if more."""
        return int(max(self.lendable.sum(), borrowed(self.before, self.guaranteed)))

    def overdrawn(self, alloc: np.ndarray) -> int | None:
        """The cohort whose shared pool `alloc` (T,) overdraws: its index, -1 for the implicit cohort; None when
        none does (the team caps are checked apart)."""
        if self.tree is None:
            return -1 if borrowed(alloc, self.guaranteed) > self.pool else None
        _, draw = self.tree.draws(alloc, self.guaranteed)
        bad = np.flatnonzero(draw > self.tree.limit(self.before, self.guaranteed))
        return int(bad[0]) if bad.size else None


def borrowed(alloc: np.ndarray, guaranteed: np.ndarray) -> int:
    """What teams draw from the cohort's shared pool: Σ max(0, A_T − guaranteed_T)."""
    return int(np.maximum(np.asarray(alloc) - guaranteed, 0).sum())


@dataclass(frozen=True)
class TeamIndex:
    names: tuple[str, ...]
    index: dict[str, int]
    weights: np.ndarray  # (T,) the team's weight times its non-root cohorts' (`cohorts.fair_weights`)
    usage: np.ndarray  # (T,) GPU-hours, decayed to the planning time
    #: GPU scopes (milli-GPU): cluster-wide first when declared, then flavors
    scopes: tuple[Scope, ...]
    #: cluster-wide nominal and limit for the entitlement, milli-GPU (sum over flavors when only flavors are declared)
    nominal: np.ndarray
    limit: np.ndarray
    #: CPU scopes, then memory scopes: cluster-wide first when declared, then flavors
    resource_scopes: tuple[Scope, ...] = ()
    #: per running job (request order), node index -> (milli-GPU, milli-CPU, MiB) it holds there
    held: tuple[dict[int, np.ndarray], ...] = ()

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def all_scopes(self) -> tuple[Scope, ...]:
        """GPU scopes, then CPU and memory: the rows of a QuotaLedger."""
        return self.scopes + self.resource_scopes

    def scope_use(self, use: np.ndarray) -> np.ndarray:
        """(len(all_scopes),) what an (N, 3) per-node use (milli-GPU, milli-CPU, MiB) puts in each scope."""
        return np.array([int(use[s.mask, s.resource].sum()) for s in self.all_scopes], dtype=np.int64)


def build_index(request: PlacementRequest, nodes: Sequence[object], gpu_models: Sequence[str | None],
                running_team: Sequence[int], running_gpus: Sequence[dict[int, int]] | None = None) -> TeamIndex | None:
    """Index the declared teams (None when there are none).

    `nodes` are the problem's nodes (with `pool`), `gpu_models` their canonical catalog names;
    `running_team[r]` is the team index of running job r. What running jobs hold is read from the
    request (`running_holdings`, GPU-equivalents); `running_gpus` (whole GPUs per node) is not needed.
    """
    teams = request.teams
    if not teams:
        return None
    names = tuple(t.name for t in teams)
    index = {name: i for i, name in enumerate(names)}
    now = request.planning_time()
    held = running_holdings(request, nodes, gpu_models)
    cohorts = request.cohorts
    tree_mode = bool(cohorts) or any(t.cohort is not None for t in teams)
    keys = _keys([*teams, *cohorts], "gpus")
    pools = np.array([getattr(n, "pool", None) or "" for n in nodes], dtype=object)
    models = np.array([m or "" for m in gpu_models], dtype=object)
    scopes = []
    for pool, model in keys:
        mask = _mask(pools, models, pool, model)
        nominal, limit, lendable = _limits(teams, pool, model)
        tree = _tree(request, "gpus", 0, (pool, model), lendable) if tree_mode else None
        scopes.append(_scope(_label(pool, model), mask, nominal, limit, lendable,
                             _before(held, running_team, mask, 0, len(teams)), 0, tree))
    resource_scopes = []
    for resource, field in ((1, "cpu"), (2, "memory_gib")):
        for pool, model in _keys([*teams, *cohorts], field):
            mask = _mask(pools, models, pool, model)
            nominal, limit, lendable = _resource_limits(teams, field, resource, (pool, model))
            tree = _tree(request, field, resource, (pool, model), lendable) if tree_mode else None
            resource_scopes.append(_scope(_label(pool, model), mask, nominal, limit, lendable,
                                          _before(held, running_team, mask, resource, len(teams)), resource, tree))
    if keys and keys[0] == (None, None):
        nominal_all, limit_all = scopes[0].nominal, scopes[0].limit
    elif scopes:
        nominal_all = sum(s.nominal for s in scopes)
        limit_all = np.minimum(sum(s.limit for s in scopes), UNLIMITED)
    else:
        nominal_all = np.zeros(len(teams), dtype=np.int64)
        limit_all = np.full(len(teams), UNLIMITED, dtype=np.int64)
    return TeamIndex(
        names=names, index=index, weights=fair_weights(request),
        usage=np.array([decayed_usage(t, now) for t in teams]), scopes=tuple(scopes),
        nominal=np.asarray(nominal_all), limit=np.asarray(limit_all), resource_scopes=tuple(resource_scopes),
        held=held,
    )


def _scope(label: str, mask: np.ndarray, nominal: np.ndarray, limit: np.ndarray, lendable: np.ndarray,
           before: np.ndarray, resource: int, tree: Tree | None) -> Scope:
    """A scope; with cohorts, a team in none holds at most its nominal and lends nothing."""
    if tree is not None:
        alone = tree.team_cohort < 0
        limit = np.where(alone, nominal, limit)
        lendable = np.where(alone, 0, lendable)
    return Scope(label, mask, nominal, limit, lendable, before, resource, tree)


def _tree(request: PlacementRequest, field: str, resource: int, key: tuple[str | None, str | None],
          team_lendable: np.ndarray) -> Tree:
    """The cohort tree of one scope: each cohort's own nominal, lending and borrowing limits there (none
    declared: nominal 0, no limits), its parent, and the teams' cohorts."""
    cohorts = request.cohorts
    at = {c.name: i for i, c in enumerate(cohorts)}
    parent = np.array([at[c.parent] if c.parent is not None else -1 for c in cohorts], dtype=np.int64)
    team_cohort = np.array([at[t.cohort] if t.cohort is not None else -1 for t in request.teams], dtype=np.int64)
    own = np.zeros((3, len(cohorts)), dtype=np.int64)
    own[1:] = UNLIMITED
    for i, c in enumerate(cohorts):
        q = _quota_of(c, field, key)
        if isinstance(q, GpuQuota | ResourceQuota):
            own[0, i] = to_units(q.nominal, resource, False)
            for row, limit in ((1, q.lending_limit), (2, q.borrowing_limit)):
                own[row, i] = UNLIMITED if limit is None else to_units(limit, resource, False)
    order: list[int] = []

    def visit(c: int) -> None:
        for k in np.flatnonzero(parent == c).tolist():
            visit(k)
        order.append(c)

    for root in np.flatnonzero(parent < 0).tolist():
        visit(root)
    return Tree(tuple(c.name for c in cohorts), parent, team_cohort, own[0], own[1], own[2], tuple(order),
                np.where(team_cohort >= 0, team_lendable, 0))


def _keys(teams: Sequence[Team | Cohort], field: str) -> list[tuple[str | None, str | None]]:
    """The scopes of one resource (`gpus`, `cpu`, `memory_gib`) any team declares, as (pool, canonical GPU model):
    (None, None) for the whole cluster first, then flavors in order of first mention. A flavor counts only for the
    resources it sets, so a CPU-only flavor does not put every other team at 0 GPUs on its nodes."""
    keys: list[tuple[str | None, str | None]] = []
    if any(t.quota is not None and getattr(t.quota, field) is not None for t in teams):
        keys.append((None, None))
    for t in teams:
        for f in t.quota.flavors if t.quota else []:
            key = (f.pool, _canonical(f.gpu_model))
            if getattr(f, field) is not None and key not in keys:
                keys.append(key)
    return keys


def _mask(pools: np.ndarray, models: np.ndarray, pool: str | None, model: str | None) -> np.ndarray:
    """The nodes of a scope: of the pool and of the GPU model, each when named (neither: every node)."""
    mask = np.ones(len(pools), dtype=bool)
    if pool is not None:
        mask &= pools == pool
    if model is not None:
        mask &= models == model
    return mask


def _quota_of(team: Team | Cohort, field: str, key: tuple[str | None, str | None]) -> object | None:
    """The team's quota of one resource in one scope ((None, None): cluster-wide), None when it declares none."""
    if team.quota is None:
        return None
    if key == (None, None):
        return getattr(team.quota, field)
    found = next((f for f in team.quota.flavors if (f.pool, _canonical(f.gpu_model)) == key), None)
    return getattr(found, field) if found is not None else None


def _before(held: tuple[dict[int, np.ndarray], ...], running_team: Sequence[int], mask: np.ndarray, resource: int,
            size: int) -> np.ndarray:
    before = np.zeros(size, dtype=np.int64)
    for team, per_node in zip(running_team, held, strict=True):
        if team >= 0:
            before[team] += sum(int(u[resource]) for n, u in per_node.items() if mask[n])
    return before


def _canonical(model: str | None) -> str | None:
    if model is None:
        return None
    found = catalog.lookup(model)
    return found.name if found is not None else model


def _label(pool: str | None, model: str | None) -> str:
    parts = ([f"pool {pool}"] if pool else []) + ([model] if model else [])
    return f" on {' '.join(parts)}" if parts else ""


def _limits(teams: Sequence[Team], pool: str | None, model: str | None) -> tuple[np.ndarray, ...]:
    nominal = np.zeros(len(teams), dtype=np.int64)
    limit = np.full(len(teams), UNLIMITED, dtype=np.int64)
    lendable = np.zeros(len(teams), dtype=np.int64)
    for i, t in enumerate(teams):
        q = _quota_of(t, "gpus", (pool, model))
        if not isinstance(q, GpuQuota):
            continue  # not declared here: nominal 0, may borrow without limit, lends nothing
        nominal[i] = MILLI * q.nominal
        if q.borrowing_limit is not None:
            limit[i] = MILLI * (q.nominal + q.borrowing_limit)
        lendable[i] = MILLI * (q.nominal if q.lending_limit is None else min(q.lending_limit, q.nominal))
    return nominal, limit, lendable


def _resource_limits(teams: Sequence[Team], field: str, resource: int,
                     key: tuple[str | None, str | None]) -> tuple[np.ndarray, ...]:
    """A CPU or memory scope's limits (cluster-wide, or on flavor `key`) in its integer unit (rounded down: a
    quota is never exceeded)."""
    nominal = np.zeros(len(teams), dtype=np.int64)
    limit = np.full(len(teams), UNLIMITED, dtype=np.int64)
    lendable = np.zeros(len(teams), dtype=np.int64)
    for i, t in enumerate(teams):
        q = _quota_of(t, field, key)
        if not isinstance(q, ResourceQuota):
            continue  # as for GPUs: nominal 0, may borrow without limit, lends nothing
        nominal[i] = to_units(q.nominal, resource, False)
        if q.borrowing_limit is not None:
            limit[i] = to_units(q.nominal + q.borrowing_limit, resource, False)
        lendable[i] = to_units(q.nominal if q.lending_limit is None else min(q.lending_limit, q.nominal), resource,
                               False)
    return nominal, limit, lendable


# --------------------------------------------------------------------------------------------
# The ledger: quota bookkeeping for one-job-at-a-time planners and for explanations


class QuotaLedger:
    """What each team holds per scope (`TeamIndex.all_scopes`), updated as a planner adds jobs or frees running ones."""

    def __init__(self, index: TeamIndex) -> None:
        self.index = index
        scopes = index.all_scopes
        self.alloc = np.array([s.before for s in scopes], dtype=np.int64).reshape(len(scopes), index.size)

    def blocker(self, team: int, add: np.ndarray) -> str | None:
        """Why adding `add` (one entry per scope of `all_scopes`; missing CPU/memory entries count 0) to `team`
        breaks a quota, or None when it fits."""
        add = np.asarray(add, dtype=np.int64)
        if add.size < len(self.alloc):
            add = np.concatenate([add, np.zeros(len(self.alloc) - add.size, dtype=np.int64)])
        name = self.index.names[team]
        for s, scope in enumerate(self.index.all_scopes):
            if add[s] <= 0:
                continue
            now = int(self.alloc[s, team])
            cap = int(scope.cap[team])
            if now + add[s] > cap:
                return _over_cap(name, scope, team, now, cap, int(add[s]))
            after = self.alloc[s].copy()
            after[team] += add[s]
            if scope.tree is not None:
                cohort = scope.overdrawn(after)
                if cohort is not None:
                    return _cohort_full(name, scope, team, now, int(add[s]), cohort, after)
                continue
            used = borrowed(after, scope.guaranteed)
            if used > scope.pool:
                lent = borrowed(self.alloc[s], scope.guaranteed)
                if now + add[s] <= scope.nominal[team]:
                    others = np.maximum(self.alloc[s] - scope.nominal, 0)
                    others[team] = 0
                    return _reclaim_needed(name, scope, team, now, int(others.sum()), int(add[s]))
                return _lent_out(name, scope, team, now, int(add[s]), lent)
        return None

    def within_nominal(self, team: int, add: np.ndarray) -> bool:
        """Does `team` stay within its nominal GPUs in every GPU scope `add` touches (a workload that does not
        borrow, which Kueue admits before those that do)?"""
        for s, scope in enumerate(self.index.scopes):  # GPU scopes lead all_scopes
            if s < len(add) and add[s] > 0 and self.alloc[s, team] + add[s] > scope.nominal[team]:
                return False
        return True

    def take(self, team: int, add: np.ndarray) -> None:
        self.alloc[: len(add), team] += add

    def release(self, team: int, sub: np.ndarray) -> None:
        self.alloc[: len(sub), team] -= sub


def _what(scope: Scope) -> str:
    """The resource as reasons name it; the flavor, if any, follows the amounts (`Scope.label`)."""
    return RESOURCES[scope.resource] if scope.resource != 2 else "memory"


def _over_cap(name: str, scope: Scope, team: int, now: int, cap: int, add: int) -> str:
    r = scope.resource
    nominal = int(scope.nominal[team])
    if r == 0:
        how = f"nominal {amount(nominal)}"
        if scope.limit[team] > scope.nominal[team]:
            how += f" + borrowing limit {amount(int(scope.limit[team]) - nominal)}"
        return f"quota: {name} at {amount(now)}/{amount(cap)} GPUs{scope.label} ({how}); needs {amount(add)} more"
    limit = int(scope.limit[team])
    how = f"nominal {amount(nominal, r)}, borrowing limit {amount(limit - nominal, r)}"
    if cap > limit:
        how += f"; running work already holds {amount(cap, r)}"
    return (f"quota: team {name}: {_what(scope)} {amount(now, r)} of {amount(cap, r)} used{scope.label} ({how}); "
            f"needs {amount(add, r)} more")


def _reclaim_needed(name: str, scope: Scope, team: int, now: int, others: int, add: int) -> str:
    r = scope.resource
    nominal = int(scope.nominal[team])
    if r == 0:
        return (f"quota: {name} at {amount(now)}/{amount(nominal)} GPUs{scope.label} is within its nominal, "
                f"but other teams hold {amount(others)} GPUs above theirs; taking {amount(add)} "
                "more needs them preempted (reclaim)")
    return (f"quota: team {name}: {_what(scope)} {amount(now, r)} of {amount(nominal, r)} nominal used{scope.label}, "
            f"within its nominal, but other teams hold {amount(others, r)} above theirs; taking {amount(add, r)} more "
            "needs them preempted (reclaim)")


def _lent_out(name: str, scope: Scope, team: int, now: int, add: int, lent: int) -> str:
    r = scope.resource
    nominal = int(scope.nominal[team])
    if r == 0:
        return (f"quota: {name} at {amount(now)} GPUs{scope.label} (nominal {amount(nominal)}) needs "
                f"{amount(add)} more, but the cohort's idle nominal is all lent out "
                f"({amount(lent)}/{amount(scope.pool)} GPUs borrowed)")
    return (f"quota: team {name}: {_what(scope)} {amount(now, r)} used{scope.label} (nominal {amount(nominal, r)}) "
            f"needs {amount(add, r)} more, but the cohort's idle {_what(scope)} nominal{scope.label} is all lent out "
            f"({amount(lent, r)} of {amount(scope.pool, r)} borrowed)")


def _cohort_full(name: str, scope: Scope, team: int, now: int, add: int, cohort: int, after: np.ndarray) -> str:
    """A cohort's pool (own nominal, members' lendable, what it may borrow) cannot cover its members' borrowing."""
    assert scope.tree is not None
    r, label = scope.resource, scope.tree.names[cohort]
    drawn = int(scope.tree.draws(after, scope.guaranteed)[1][cohort])
    limit = int(scope.tree.limit(scope.before, scope.guaranteed)[cohort])
    who = f"{name} at {amount(now)} GPUs{scope.label}" if r == 0 else \
        f"team {name}: {_what(scope)} {amount(now, r)} used{scope.label}"
    unit = " GPUs" if r == 0 else f" {_what(scope)}"
    pool = (f"cohort {label} can lend only {amount(limit, r)}{unit} beyond its members' guaranteed quota "
            f"({amount(drawn, r)} asked: own and members' idle nominal, and what it may borrow from its parent)")
    if now + add <= scope.nominal[team]:
        return (f"quota: {who} is within its nominal {amount(int(scope.nominal[team]), r)}, but {pool}; taking "
                f"{amount(add, r)} more needs borrowers preempted (reclaim)")
    return f"quota: {who} (nominal {amount(int(scope.nominal[team]), r)}) needs {amount(add, r)} more, but {pool}"
