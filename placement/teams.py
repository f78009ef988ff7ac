"""Teams in numbers: quota scopes, fair entitlements, the quota ledger and Jain's index.

Shared by the compiler (quota, fairness and preemption modules), the greedy baseline (which must
respect quotas so that its plan stays a feasible hint) and the plan report. Pure numpy and the
wire format: no CP-SAT here, so the same arithmetic serves a model and a report.

Quota semantics (Kueue's ClusterQueue/cohort, one cohort per request). A *scope* is a set of
nodes whose GPUs a quota counts: the whole cluster (`quota.gpus`) or one flavor (`quota.flavors`,
the nodes of a pool and/or GPU model). Once any team declares a scope, every team is in it; a team
that declares nothing there has nominal 0 and may only borrow. For team T in scope s, with A_T
the GPUs it holds after the plan (running jobs kept + placed jobs on the scope's nodes):

    A_T ≤ nominal_T + borrowing_limit_T                             (no limit when unset)
    Σ_T max(0, A_T − guaranteed_T) ≤ Σ_T lendable_T                  (borrow only what is idle)

where lendable_T = min(lending_limit_T, nominal_T) and guaranteed_T = nominal_T − lendable_T is
never lent. A plan never makes an existing excess worse but need not cure it: each limit is
raised to what running jobs already hold (quotas can shrink under running work; Kueue does not
evict to enforce a quota either).

Fair entitlement (KAI's two stages, Slurm's fair-share factor): a team first gets its nominal,
capped by its demand; the GPUs left are water-filled by weight among teams with unmet demand, up
to their borrowing limits, with each weight scaled by 2^(−U/S) (U: the team's share of all past
usage, S: its share of all weight), so teams that used more than their share lately get less now.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from placement_models import PlacementRequest, Team

from placement import catalog

#: "no limit" for integer comparisons (larger than any cluster's GPU count).
UNLIMITED = 1 << 40


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
    """One quota scope: its nodes and every team's limits there (integers; UNLIMITED for none)."""

    label: str  # "" for the whole cluster, else e.g. " on pool h100-spot"
    mask: np.ndarray  # (N,) bool: nodes whose GPUs this scope counts
    nominal: np.ndarray  # (T,) int
    limit: np.ndarray  # (T,) int: nominal + borrowing_limit
    lendable: np.ndarray  # (T,) int: min(lending_limit, nominal)
    before: np.ndarray  # (T,) int: GPUs of running jobs here before the plan

    @property
    def guaranteed(self) -> np.ndarray:
        return self.nominal - self.lendable

    @property
    def cap(self) -> np.ndarray:
        """Per-team ceiling the plan must respect: the limit, or what the team already holds if more."""
        return np.maximum(self.limit, self.before)

    @property
    def pool(self) -> int:
        """GPUs the cohort may have borrowed in total: the lendable nominal, or what is already borrowed if more."""
        return int(max(self.lendable.sum(), borrowed(self.before, self.guaranteed)))


def borrowed(alloc: np.ndarray, guaranteed: np.ndarray) -> int:
    """GPUs drawn from the cohort's shared pool: Σ max(0, A_T − guaranteed_T)."""
    return int(np.maximum(np.asarray(alloc) - guaranteed, 0).sum())


@dataclass(frozen=True)
class TeamIndex:
    names: tuple[str, ...]
    index: dict[str, int]
    weights: np.ndarray  # (T,)
    usage: np.ndarray  # (T,) GPU-hours, decayed to the planning time
    scopes: tuple[Scope, ...]
    #: cluster-wide nominal and limit for the entitlement (sum over flavors when only flavors are declared)
    nominal: np.ndarray
    limit: np.ndarray

    @property
    def size(self) -> int:
        return len(self.names)

    def scope_gpus(self, gpus_per_node: np.ndarray) -> np.ndarray:
        """(S,) GPUs that a per-node GPU vector puts in each scope."""
        return np.array([int(gpus_per_node[s.mask].sum()) for s in self.scopes], dtype=np.int64)


def build_index(request: PlacementRequest, nodes: Sequence[object], gpu_models: Sequence[str | None],
                running_team: Sequence[int], running_gpus: Sequence[dict[int, int]]) -> TeamIndex | None:
    """Index the declared teams (None when there are none).

    `nodes` are the problem's nodes (with `pool`), `gpu_models` their canonical catalog names;
    `running_team[r]` is the team index of running job r and `running_gpus[r]` its healthy GPUs per node.
    """
    teams = request.teams
    if not teams:
        return None
    names = tuple(t.name for t in teams)
    index = {name: i for i, name in enumerate(names)}
    now = request.planning_time()
    keys: list[tuple[str | None, str | None]] = []
    if any(t.quota is not None and t.quota.gpus is not None for t in teams):
        keys.append((None, None))
    for t in teams:
        for f in t.quota.flavors if t.quota else []:
            key = (f.pool, _canonical(f.gpu_model))
            if key not in keys:
                keys.append(key)
    pools = np.array([getattr(n, "pool", None) or "" for n in nodes], dtype=object)
    models = np.array([m or "" for m in gpu_models], dtype=object)
    scopes = []
    for pool, model in keys:
        mask = np.ones(len(nodes), dtype=bool)
        if pool is not None:
            mask &= pools == pool
        if model is not None:
            mask &= models == model
        nominal, limit, lendable = _limits(teams, pool, model)
        before = np.zeros(len(teams), dtype=np.int64)
        for team, per_node in zip(running_team, running_gpus, strict=True):
            before[team] += sum(g for n, g in per_node.items() if mask[n])
        scopes.append(Scope(_label(pool, model), mask, nominal, limit, lendable, before))
    if keys and keys[0] == (None, None):
        nominal_all, limit_all = scopes[0].nominal, scopes[0].limit
    elif scopes:
        nominal_all = sum(s.nominal for s in scopes)
        limit_all = np.minimum(sum(s.limit for s in scopes), UNLIMITED)
    else:
        nominal_all = np.zeros(len(teams), dtype=np.int64)
        limit_all = np.full(len(teams), UNLIMITED, dtype=np.int64)
    return TeamIndex(
        names=names, index=index, weights=np.array([t.weight for t in teams]),
        usage=np.array([decayed_usage(t, now) for t in teams]), scopes=tuple(scopes),
        nominal=np.asarray(nominal_all), limit=np.asarray(limit_all),
    )


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
        q = None
        if t.quota is not None:
            if pool is None and model is None:
                q = t.quota.gpus
            else:
                q = next((f.gpus for f in t.quota.flavors if (f.pool, _canonical(f.gpu_model)) == (pool, model)),
                         None)
        if q is None:
            continue  # not declared here: nominal 0, may borrow without limit, lends nothing
        nominal[i] = q.nominal
        if q.borrowing_limit is not None:
            limit[i] = q.nominal + q.borrowing_limit
        lendable[i] = q.nominal if q.lending_limit is None else min(q.lending_limit, q.nominal)
    return nominal, limit, lendable


# --------------------------------------------------------------------------------------------
# The ledger: quota bookkeeping for one-job-at-a-time planners and for explanations


class QuotaLedger:
    """GPUs each team holds per scope, updated as a planner adds jobs or frees running ones."""

    def __init__(self, index: TeamIndex) -> None:
        self.index = index
        self.alloc = np.array([s.before for s in index.scopes], dtype=np.int64).reshape(len(index.scopes),
                                                                                      index.size)

    def blocker(self, team: int, add: np.ndarray) -> str | None:
        """Why adding `add` (S,) GPUs to `team` breaks a quota, or None when it fits."""
        name = self.index.names[team]
        for s, scope in enumerate(self.index.scopes):
            if add[s] <= 0:
                continue
            now = int(self.alloc[s, team])
            cap = int(scope.cap[team])
            if now + add[s] > cap:
                how = f"nominal {scope.nominal[team]}"
                if scope.limit[team] > scope.nominal[team]:
                    how += f" + borrowing limit {scope.limit[team] - scope.nominal[team]}"
                return (f"quota: {name} at {now}/{cap} GPUs{scope.label} ({how}); needs {int(add[s])} more")
            after = self.alloc[s].copy()
            after[team] += add[s]
            used = borrowed(after, scope.guaranteed)
            if used > scope.pool:
                lent = borrowed(self.alloc[s], scope.guaranteed)
                if now + add[s] <= scope.nominal[team]:
                    others = np.maximum(self.alloc[s] - scope.nominal, 0)
                    others[team] = 0
                    return (f"quota: {name} at {now}/{scope.nominal[team]} GPUs{scope.label} is within its nominal, "
                            f"but other teams hold {int(others.sum())} GPUs above theirs; taking {int(add[s])} "
                            "more needs them preempted (reclaim)")
                return (f"quota: {name} at {now} GPUs{scope.label} (nominal {scope.nominal[team]}) needs "
                        f"{int(add[s])} more, but the cohort's idle nominal is all lent out "
                        f"({lent}/{scope.pool} GPUs borrowed)")
        return None

    def take(self, team: int, add: np.ndarray) -> None:
        self.alloc[:, team] += add

    def release(self, team: int, sub: np.ndarray) -> None:
        self.alloc[:, team] -= sub
