"""Speed per GPU model: how fast a job runs on each GPU model, relative to a reference.

Mixed fleets run the same job at very different speeds, and not by one factor for every job (Gavel,
OSDI'20: a language model gains far more from a V100 over a K80 than an RL agent does). A job or a
named workload declares a table `GPU model -> relative throughput`; its runtime estimates
(`expected_runtime_h`) are for throughput 1.0, so on a GPU of speed s it runs `expected_runtime_h / s`
hours, and a gang runs at its slowest member. A model absent from the table counts as 1.0. No table:
the job runs alike everywhere (today's behaviour). GPU model names are catalog names or their aliases
(checked against the catalog when the request is read: `placement.problem`).
"""

from __future__ import annotations

from typing import Annotated

from placement_models.base import JSON_NUMBER, MAX_WORD, Name, Strict, bounded_dict
from pydantic import Field

#: GPU models one table may name (the catalog holds a few dozen)
MAX_SPEED_MODELS = 64
#: named workloads one request may declare
MAX_WORKLOADS = 1_000
#: characters of a workload's `source`
MAX_SOURCE = 256
#: the largest relative throughput: a thousand times the reference is beyond any real pair of GPUs
MAX_SPEED = 1_000.0

#: relative throughput on one GPU model (1.0: the model the runtime estimates are for)
Speed = Annotated[float, Field(gt=0, le=MAX_SPEED), JSON_NUMBER]
GpuModelName = Annotated[str, Field(min_length=1, max_length=MAX_WORD)]
#: GPU model -> relative throughput
SpeedTable = bounded_dict(GpuModelName, Speed, MAX_SPEED_MODELS)


class Workload(Strict):
    """A named class of jobs that share a speed table (ResNet-50 training, LLM fine-tuning, ...): jobs name it
    in `workload` rather than repeat the table."""

    name: Name
    speeds: SpeedTable = Field(min_length=1)
    #: where the speeds come from: unset is `declared`; `placement usage speeds` writes what it observed
    #: ("observed: 12 runs on 3 models, median per-GPU rate"); the plan reports it (`Plan.speed_sources`)
    source: str | None = Field(None, min_length=1, max_length=MAX_SOURCE)
