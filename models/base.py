"""The base every request model shares: strict fields, timestamps read as UTC, and the bounds.

Kept apart so the cluster, jobs, teams and policy modules depend on it and not on each other.

Every list, mapping, string and number of the wire format has a bound, stated here once. A bound
is what keeps one request from costing the solver, the validator or the problem build more than
a real cluster ever needs: a million-item list would build a million errors before anyone reads
the first, and a price of 1e308 overflows the integer objective. The caps are generous for real
clusters (the library plans 12,500 nodes and ~19,000 jobs within 10 s) and the same in the schema
(the OpenAPI document) as in validation.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

# Sizes of lists and mappings.
MAX_NODES = 50_000
MAX_JOBS = 100_000
MAX_RUNNING_JOBS = 100_000
MAX_POOLS = 1_000
MAX_TEAMS = 1_000
#: tasks per job (a job is a gang of a few roles: launcher, workers, parameter servers...)
MAX_TASKS = 64
#: pods of one running job, and of all running jobs together (8 per node of the biggest cluster and more)
MAX_RUNNING_PODS = 100_000
MAX_RUNNING_PODS_TOTAL = 1_000_000
#: GPUs of one node (and so every per-GPU list or mapping of it)
MAX_GPUS = 128
#: labels, selectors, taints, tolerations: Kubernetes objects carry tens, not thousands
MAX_LABELS = 256
MAX_TAINTS = 64
MAX_TOPOLOGY_MATRICES = 1_024
#: the previous plan's assignments: one per pod placed (a pod per GPU of the biggest cluster, and then some)
MAX_PREVIOUS_ASSIGNMENTS = 1_000_000

# Sizes of strings.
#: names of nodes, jobs, tasks, teams, pools (a Kubernetes name is at most 253 characters)
MAX_NAME = 253
#: label keys and values, taint keys and values, GPU models, profiles and other short words
MAX_WORD = 1_024
#: an `nvidia-smi topo -m` matrix (about 3 kB for 8 GPUs; 72-GPU NVLink domains need more)
MAX_TEXT = 256 * 1024

# Sizes of numbers. Objective terms multiply several of these, and CP-SAT needs integers that fit
# in 64 bits after scaling, so the caps leave room for their products.
#: CPU cores of a node or a pod
MAX_CPU = 1_000_000.0
#: GiB of memory of a node or a pod (100 PiB)
MAX_MEMORY_GIB = 100_000_000.0
#: GiB of memory of one GPU
MAX_GPU_MEMORY_GIB = 100_000.0
#: objective weights, in GPU-equivalents: the defaults are 0.01 to 1
MAX_WEIGHT = 10_000.0
#: currency per GPU-hour (today's GPUs cost a few units)
MAX_PRICE = 100_000.0
#: hours (runtimes, checkpoints, waits, billing): over a century
MAX_HOURS = 1_000_000.0
#: GPU-hours of a team's past usage
MAX_GPU_HOURS = 1e12
#: seconds (minimum runtimes): over 30 years
MAX_SECONDS = 1e9
#: counts of GPUs, pods and changes in one request
MAX_COUNT = 10_000_000
#: priorities: Kubernetes PriorityClass values are 32-bit integers
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31

Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
Word = Annotated[str, Field(max_length=MAX_WORD)]
Priority = Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY)]

def _mapping_cap(limit: int) -> Callable[[Any], Any]:
    """pydantic validates every entry of a mapping before `max_length` is looked at (a list stops at
    the bound); a mapping of a million entries must be refused before that work, not after."""

    def check(value: Any) -> Any:
        if isinstance(value, dict) and len(value) > limit:
            raise PydanticCustomError("too_long", "Dictionary should have at most {max_length} items after "
                                      "validation, not {actual_length}",
                                      {"max_length": limit, "actual_length": len(value)})
        return value

    return check


def bounded_dict(key: Any, value: Any, limit: int) -> Any:
    """`dict[key, value]` with at most `limit` entries, checked before the entries are (and shown as
    JSON Schema's `maxProperties`: pydantic would write a mapping's `max_length` as `maxLength`)."""
    return Annotated[dict[key, value], BeforeValidator(_mapping_cap(limit)),
                     Field(json_schema_extra={"maxProperties": limit})]


def bounded_list(item: Any, limit: int, **extra: Any) -> Any:
    """`list[item]` with at most `limit` entries (pydantic stops at the bound, before the items)."""
    return Annotated[list[item], Field(max_length=limit, **extra)]


class Strict(BaseModel):
    """Unknown fields are errors: a misspelt field must not be silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def as_utc(v: datetime | None) -> datetime | None:
    """Timestamps without a zone are UTC, so every comparison between them is defined."""
    if v is not None and v.tzinfo is None:
        return v.replace(tzinfo=timezone.utc)
    return v
