"""Teams: fair-share weights, past usage and quotas in the spirit of Kueue's ClusterQueue.

Teams borrow within a cohort (Kueue's `spec.cohort`): what other members' nominal leaves idle. Cohorts may
nest (`Cohort.parent`) and hold quota of their own, which their subtree may use. When no team names a cohort
and the request declares none, all teams form one implicit cohort, as before cohorts were modelled.
Quotas cover GPUs, CPU and memory, cluster-wide and per flavor, as a Kueue ClusterQueue covers
`nvidia.com/gpu`, `cpu` and `memory` per ResourceFlavor.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from placement_models.base import (
    MAX_GPU_HOURS,
    MAX_HOURS,
    MAX_WEIGHT,
    Name,
    Strict,
    Word,
    as_utc,
    bounded_list,
    cross_field,
    either,
    given,
    unset,
)
from placement_models.errors import ErrorList
from placement_models.policy import PreemptionRules, rules_or_bool
from pydantic import Field, ValidatorFunctionWrapHandler, field_validator, model_validator


class GpuQuota(Strict):
    """A team's GPUs in one scope (the whole cluster, or one flavor), as Kueue counts them.

    `nominal` is the team's own share. It may hold up to `nominal + borrowing_limit` (no limit when
    unset) by borrowing what other teams' nominal leaves idle, and lends at most `lending_limit`
    of its own idle nominal (all of it when unset); the rest of its nominal is never lent. Counted in
    GPU-equivalents: a whole-GPU pod its GPUs, a MIG pod its instance's memory slices over its GPU's
    (1g on an 8-slice GPU: 1/8), a pod on a shared GPU its `gpu_share`.
    """

    nominal: int = Field(ge=0, le=10_000_000)
    borrowing_limit: int | None = Field(None, ge=0, le=10_000_000)
    lending_limit: int | None = Field(None, ge=0, le=10_000_000)


class ResourceQuota(Strict):
    """A team's CPU (cores) or memory (GiB) quota, cluster-wide or on one flavor, with GpuQuota's borrowing and
    lending rules.

    Every pod counts what it requests (`cpu`, `memory_gib`), running pods what they hold.
    """

    nominal: float = Field(ge=0, le=10_000_000)
    borrowing_limit: float | None = Field(None, ge=0, le=10_000_000)
    lending_limit: float | None = Field(None, ge=0, le=10_000_000)


class FlavorQuota(Strict):
    """Quota on one flavor (Kueue's ResourceFlavor): the nodes of a pool, of a GPU model, or both, and the GPUs,
    CPU and memory on them, as a ClusterQueue sets `nvidia.com/gpu`, `cpu` and `memory` per flavor.

    Any of the three may be left out (a CPU-only flavor, Kueue's usual `default-flavor` on CPU nodes, sets no
    `gpus`), but not all: an entry that limits nothing is a mistake, not a quota.
    """

    model_config = cross_field(either(given("pool"), given("gpu_model")),
                               either(given("gpus"), given("cpu"), given("memory_gib")))

    pool: Name | None = None
    gpu_model: Annotated[Word, Field(min_length=1)] | None = None
    gpus: GpuQuota | None = None
    cpu: ResourceQuota | None = None
    memory_gib: ResourceQuota | None = None

    @model_validator(mode="after")
    def _check(self) -> FlavorQuota:
        if self.pool is None and self.gpu_model is None:
            errors = ErrorList("FlavorQuota")
            errors.add(("pool",), "a flavor names a pool, a gpu_model or both (the whole cluster is quota.gpus)",
                       None, "missing")
            errors.raise_if_any()
        if self.gpus is None and self.cpu is None and self.memory_gib is None:
            errors = ErrorList("FlavorQuota")
            errors.add(("gpus",), "a flavor sets at least one of gpus, cpu and memory_gib", None, "missing")
            errors.raise_if_any()
        return self


class Quota(Strict):
    """Per resource limits: GPUs, CPU and memory cluster-wide (`gpus`, `cpu`, `memory_gib`) and per flavor
    (`flavors`); a pod counts in every scope whose nodes it lands on."""

    gpus: GpuQuota | None = None
    #: one per pool and GPU model at most
    flavors: bounded_list(FlavorQuota, 1_000) = Field(default_factory=list)
    cpu: ResourceQuota | None = None
    memory_gib: ResourceQuota | None = None

    @model_validator(mode="after")
    def _check(self) -> Quota:
        errors = ErrorList("Quota")
        _unique_keys(errors, [(f.pool, f.gpu_model) for f in self.flavors])
        errors.raise_if_any()
        return self


def _unique_keys(errors: ErrorList, keys: list[tuple[str | None, str | None]]) -> None:
    seen: set[tuple[str | None, str | None]] = set()
    for i, key in enumerate(keys):
        if key in seen:
            errors.add(("flavors", i), f"duplicate flavor (pool={key[0]}, gpu_model={key[1]})", None)
        seen.add(key)


class Team(Strict):
    """A tenant: its weight in the fair share, its past usage, its quota and the cohort it borrows in."""

    # decaying usage needs the time it was measured: checked with the request, stated in the team's schema
    model_config = cross_field(either(unset("usage_half_life_h"), given("usage_at")))

    name: Name
    weight: float = Field(1.0, gt=0, le=MAX_WEIGHT)
    #: GPU-hours used in the past; decayed to `policy.now` with `usage_half_life_h` when `usage_at` is set
    usage_gpu_h: float = Field(0.0, ge=0, le=MAX_GPU_HOURS)
    #: when `usage_gpu_h` was measured (unset: the caller already decayed it to now)
    usage_at: datetime | None = None
    usage_half_life_h: float | None = Field(None, gt=0, le=MAX_HOURS)
    quota: Quota | None = None
    #: the cohort (of the request's `cohorts`) it borrows from and lends to; unset while other teams name one: it
    #: neither borrows nor lends (Kueue's ClusterQueue without `spec.cohort`); unset everywhere: one implicit cohort
    cohort: Name | None = None
    #: hours any of the team's jobs may run (a job's own max_runtime_h overrides it)
    max_runtime_h: float | None = Field(None, gt=0, le=1_000_000)
    #: whom this team's jobs may preempt, in place of `policy.preemption` (Kueue sets `preemption` per
    #: ClusterQueue): the same values; unset: the policy's
    preemption: bool | PreemptionRules | None = None

    _tz = field_validator("usage_at")(as_utc)

    @field_validator("preemption", mode="wrap")
    @classmethod
    def _rules_or_bool(cls, value: object, handler: ValidatorFunctionWrapHandler) -> bool | PreemptionRules | None:
        return None if value is None else rules_or_bool(value)


class Cohort(Strict):
    """A Kueue Cohort: teams naming it borrow each other's idle nominal; its own `quota` adds to what its
    subtree may use, and through `parent` the subtree borrows from (and lends to) the enclosing cohort.

    Its quota's `borrowing_limit` caps what the subtree takes from the parent, `lending_limit` what the
    parent may take from the subtree's idle lendable quota; `nominal` is lendable to the subtree itself.

    `weight` is Kueue's `spec.fairSharing.weight` of a Cohort: how strongly the subtree claims its parent's
    borrowable GPUs against its siblings (teams and cohorts of the same parent). The fair share multiplies
    the weight of every team below the cohort by it (placement/cohorts.py, `fair_weights`), so a cohort of
    weight 2 claims twice what it would with weight 1. A root cohort has no siblings: its weight changes
    nothing. Kueue's weight 0 (borrow only what nobody else wants) has no exact counterpart: the Kubernetes
    importer maps it to 0.001, as for a ClusterQueue, and says so.
    """

    name: Name
    parent: Name | None = None
    quota: Quota | None = None
    #: fair-sharing weight against the sibling teams and cohorts under the same parent (unused on a root)
    weight: float = Field(1.0, gt=0, le=MAX_WEIGHT)
