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

import re
from collections.abc import Callable
from datetime import datetime, time, timezone
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from placement_models.errors import ErrorList
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
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


# JSON types, as strict as the schema says. pydantic's lax mode would read `true` as 1, "8" as 8, 1 and
# "yes" as true, and 1700000000 (or "1700000000") as a time, so a request the OpenAPI document calls
# invalid would be planned, and a caller's slip (a quoted number, a flag written as 1) would pass
# unnoticed. Every model of the wire format (Strict, the plan's PlanModel) refuses those in one
# `before` pass over its fields (`json_types`); anything else goes on to pydantic as before, so a whole
# float stays an integer (3.0 is one in JSON Schema too), an integer is a number, and Python callers may
# still pass numpy scalars. Per object, not per field: an Annotated validator on a field would push its
# `Field(ge=..., le=...)` off the native validator (and out of the schema's minimum and maximum).
# Items of lists and mappings are checked by their own type (`JSON_INT`...), after the container's
# bound: a million-item list is one `too_long`, not a million type errors.

_NUMERIC_TEXT = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


class _Kind:
    """One JSON type: the Python types (exact, for speed) that are never it, and how to say so."""

    def __init__(self, error: str, expected: str, wrong: tuple[type, ...], numeric_text: bool = False) -> None:
        self.error, self.expected, self.wrong, self.numeric_text = error, expected, frozenset(wrong), numeric_text

    def is_wrong(self, value: Any) -> bool:
        kind = type(value)
        return kind in self.wrong or (self.numeric_text and kind is str and _NUMERIC_TEXT.fullmatch(value) is not None)

    def message(self, value: Any) -> str:
        if isinstance(value, bool):
            given = "a boolean"
        elif isinstance(value, str):
            given = "a quoted number" if _NUMERIC_TEXT.fullmatch(value) else "a string"
        else:
            given = "a number" if isinstance(value, int | float) else type(value).__name__
        return f"Input should be {self.expected}, not {given}"

    def refuse(self, value: Any) -> Any:
        """As a BeforeValidator of a list's or a mapping's items."""
        if self.is_wrong(value):
            raise PydanticCustomError(self.error, self.message(value))
        return value


_TEXT = (str, bytes, bytearray)
_KIND_OF: dict[Any, _Kind] = {
    int: _Kind("int_type", "a valid integer", (bool, *_TEXT)),
    float: _Kind("float_type", "a valid number", (bool, *_TEXT)),
    bool: _Kind("bool_type", "a valid boolean (true or false)", (int, float, *_TEXT)),
    datetime: _Kind("datetime_type", "an ISO 8601 date-time string", (int, float, bool), numeric_text=True),
    #: YAML reads an unquoted 22:00 as the integer 1320, which pydantic would take as 00:22
    time: _Kind("time_type", "a time string such as \"22:00\"", (int, float, bool)),
}

#: The items' check, last in their Annotated (after any Field bounds, which then stay native):
#: `list[Annotated[int, Field(ge=0), JSON_INT]]`
JSON_INT = BeforeValidator(_KIND_OF[int].refuse)
JSON_NUMBER = BeforeValidator(_KIND_OF[float].refuse)


def _scalar(annotation: Any) -> _Kind | None:
    """The JSON type `annotation` stands for, through Annotated and `X | None` (None is never wrong);
    None for strings, literals, models (they check themselves), lists and mappings (their items do),
    and other unions such as `bool | PreemptionRules`, whose own validators read them strictly."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _scalar(get_args(annotation)[0])
    if origin in (Union, UnionType):
        kept = [a for a in get_args(annotation) if a is not type(None)]
        return _scalar(kept[0]) if len(kept) == 1 else None
    return _KIND_OF.get(annotation)


#: per model, its fields of one JSON type
_FIELDS: dict[type, dict[str, _Kind]] = {}


def json_types(model: type[BaseModel], data: Any) -> Any:
    """`data` for `model`, unchanged, or a ValidationError for each field whose JSON type is wrong
    (at that field's path, so the HTTP face's 422 names it)."""
    if not isinstance(data, dict):
        return data
    fields = _FIELDS.get(model)
    if fields is None:  # once per class: its fields are complete by its first validation
        fields = _FIELDS[model] = {name: kind for name, field in model.model_fields.items()
                                   if (kind := _scalar(field.annotation)) is not None}
    errors: ErrorList | None = None
    for name, value in data.items():
        kind = fields.get(name)
        if kind is not None and kind.is_wrong(value):
            errors = errors or ErrorList(model.__name__)
            errors.add((name,), kind.message(value), None, kind.error)
    if errors:
        errors.raise_if_any()
    return data


#: Whitespace as `str.strip()` removes it, spelt out for schema patterns: `\s` says the same to Python's `re`,
#: but generators (hypothesis) read `\s` and `\S` by Unicode categories, and would make "\x1f" as non-blank.
SPACE = r"\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: some character that is not whitespace
NOT_BLANK = f"[^{SPACE}]"

Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
Word = Annotated[str, Field(max_length=MAX_WORD)]
Priority = Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY)]

#: A GPU's index as a mapping key: JSON keys are strings, and pydantic would read "007", "+1", " 1" and
#: "1_0" as integers the schema's `propertyNames` refuses; the schema and this check read one pattern
#: (`re.search`, as JSON Schema validators in Python do). YAML and Python callers may give integers.
GPU_KEY_PATTERN = r"^(0|[1-9][0-9]?|1[01][0-9]|12[0-7])$"
_GPU_KEY = re.compile(GPU_KEY_PATTERN)


def _gpu_key(value: Any) -> Any:
    if isinstance(value, str):
        if _GPU_KEY.search(value) is None:
            raise PydanticCustomError("int_parsing", "a GPU index is 0 to {last} in decimal, without sign, spaces "
                                      "or leading zeros", {"last": MAX_GPUS - 1})
        return int(value)
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "a GPU index is an integer, not a boolean")
    return value


GpuKey = Annotated[int, BeforeValidator(_gpu_key), Field(ge=0, lt=MAX_GPUS)]

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


def gpu_dict(value: Any) -> Any:
    """GPU index -> `value`, for every GPU of a node at most; the keys' pattern is in the schema too."""
    return Annotated[dict[GpuKey, value], BeforeValidator(_mapping_cap(MAX_GPUS)),
                     Field(json_schema_extra={"maxProperties": MAX_GPUS,
                                              "propertyNames": {"pattern": GPU_KEY_PATTERN}})]


def bounded_list(item: Any, limit: int, **extra: Any) -> Any:
    """`list[item]` with at most `limit` entries (pydantic stops at the bound, before the items)."""
    return Annotated[list[item], Field(max_length=limit, **extra)]


# Cross-field rules of one object, stated in its JSON schema as the model validator checks them (a
# request the document calls valid must be accepted). Each rule is an `anyOf` of plain alternatives
# ("unset, or ..."), not `if`/`then`/`not`, so generators build valid objects instead of filtering.


def unset(field: str) -> dict[str, Any]:
    """`field` absent or null (how a model's None default reads on the wire)."""
    return {"properties": {field: {"type": "null"}}}


def given(field: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """`field` present and matching `schema`; by default not null (its own schema says the rest)."""
    return {"required": [field], "properties": {field: {"not": {"type": "null"}} if schema is None else schema}}


def holds(field: str, schema: dict[str, Any]) -> dict[str, Any]:
    """`field`, when present, matches `schema` (absent: its default, which the caller knows matches)."""
    return {"properties": {field: schema}}


def either(*alternatives: dict[str, Any]) -> dict[str, Any]:
    """One rule: at least one alternative holds."""
    return {"anyOf": list(alternatives)}


def cross_field(*rules: dict[str, Any]) -> ConfigDict:
    """A model config that adds `rules` to the model's schema (merged with the base's config)."""
    return ConfigDict(json_schema_extra={"allOf": list(rules)})


class Strict(BaseModel):
    """Unknown fields are errors: a misspelt field must not be silently dropped. JSON types are strict
    (`json_types`): a number is not a boolean or a string, a boolean not 0, 1 or "yes"."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _json_types(cls, data: Any) -> Any:
        return json_types(cls, data)


def as_utc(v: datetime | None) -> datetime | None:
    """Timestamps without a zone are UTC, so every comparison between them is defined."""
    if v is not None and v.tzinfo is None:
        return v.replace(tzinfo=timezone.utc)
    return v
