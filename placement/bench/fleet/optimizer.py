"""Our optimizer on a mixed fleet: the cycles bench's loop (``placement.bench.cycles.ours.Ours``) with real GPU models.

Why this exists: the fleet bench compares the same scheduler loop twice, once as a scheduler calls it today
(nodes carry their real ``gpu_model``, jobs no speeds: heterogeneity-agnostic) and once with each job's speed
table on the wire (``speeds``: GPU model -> relative throughput, runtime estimates at speed 1.0), so any
difference between the two rows is what the speeds buy. Everything else, the preset (auto: `completion`
without speeds, `las` with moves where jobs declare them), the time limit, previous plans, estimates and
attained service, is the cycles bench's request unchanged; running jobs are preemptible, as Gavel's are.

Both rows also send what a scheduler knows whether or not it knows speeds: a job that cannot run on a model
(a 0 in Gavel's table) asks for more GPU memory than that model has (``Task.gpu_memory_gib``), so no policy
can start it where the simulator would refuse it. In the speed table such a model gets ``MIN_SPEED`` (the wire
wants speeds > 0; the memory need keeps the job off it anyway).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from placement.bench.cycles.ours import Ours
from placement.bench.cycles.state import Running, TraceJob
from placement.bench.fleet.mix import Fleet, gpu_memory_need

#: What a speed of 0 (cannot run) becomes on the wire, which wants speeds > 0.
MIN_SPEED = 1e-3


def wire_speeds(job: TraceJob, models: tuple[str, ...]) -> dict[str, float]:
    """The job's speed on every model of the fleet (absent models would count as 1.0, so all are sent)."""
    return {m: max(job.speed_on(m), MIN_SPEED) for m in models}


class FleetOurs(Ours):
    """``Ours`` whose nodes carry the fleet's GPU models and, with ``speeds=True``, whose jobs carry speed tables."""

    def __init__(self, fleet: Fleet, speeds: bool, name: str, time_limit_s: float = 1.0, seed: int = 0,
                 preset: str = "auto", policy: dict[str, Any] | None = None) -> None:
        super().__init__(time_limit_s=time_limit_s, seed=seed, preset=preset, name=name, policy=policy)
        self.policy.setdefault("deterministic", True)  # the same run gives the same table
        if speeds and preset == "auto":  # auto is `las` where jobs declare speeds: its classes move every cycle
            self.every_cycle = True
        self.fleet = fleet
        self.send_speeds = speeds

    def request(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
                gpus_per_node: int) -> dict[str, Any]:
        req = super().request(now_s, queue, running, free, gpus_per_node)
        models = self.fleet.models
        for node, model in zip(req["cluster"]["nodes"], self.fleet.node_models, strict=True):
            node["gpu_model"] = model
        for wire, job in zip(req["jobs"], queue, strict=True):
            need = gpu_memory_need(job)
            if need is not None:
                for task in wire["tasks"]:
                    task["gpu_memory_gib"] = need
            if self.send_speeds and job.speeds is not None:
                wire["speeds"] = wire_speeds(job, models)
        for wire in req["cluster"]["running"]:
            wire["preemptible"] = True  # Gavel's jobs checkpoint every round and may stop at any round's end
        if self.send_speeds:
            for wire, r in zip(req["cluster"]["running"], running, strict=True):
                if r.job.speeds is not None:
                    wire["speeds"] = wire_speeds(r.job, models)
        return req

    def moves(self, running: list[Running]) -> bool:
        """With policy.migration (running jobs move to faster GPUs; the `las` preset's), plan even with nothing
        queued, when some running job has a speed table."""
        migration = self.policy.get("migration", self.preset == "las" or (self.preset == "auto" and self.send_speeds))
        return self.send_speeds and bool(migration) and any(r.job.speeds is not None for r in running)
