"""Our scheduler in the loop: every cycle, the cluster and the queue become one request to `placement.plan`.

What a scheduler integration would send, and nothing more: nodes, running jobs with their start times,
runtime estimates and attained service, the queue with submission times, estimates and attained service,
`policy.now` and last cycle's plan; the one choice is `policy.preset` (placement_models.presets). The
default call (`auto`, which a call carrying time resolves to `completion`) is what a scheduler gets with no
knob; `las` is Tiresias's discretised least-attained-service, with the planner choosing victims and packing;
`bounded-wait` adds a reservation for a job blocked 6 h. The plan comes back verified (`placement.plan`
checks every plan), and its assignments are the cycle's starts.
"""

from __future__ import annotations

import bisect
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
from placement_models.policy import Las

from placement.api import plan
from placement.bench.cycles.state import Decision, Running, TraceJob, pods_of

#: Simulated time 0.
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
#: A GPU model from the catalog; the trace names none, and whole-GPU gangs do not care which.
GPU_MODEL = "H100-SXM5-80GB"
def _at(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=seconds)).isoformat()


def _hours(seconds: float | None) -> float | None:
    return None if seconds is None else max(seconds, 1.0) / 3600.0


def _attained_h(job: TraceJob) -> float:
    """GPU-hours the job has run over all its runs (the simulator counts a running job's current run in)."""
    return job.attained_gpu_s / 3600.0


def _queue(attained_h: float, las: Las) -> int:
    """The LAS queue of a job with this much service (0: the least)."""
    return bisect.bisect_right(las.thresholds_gpu_h, attained_h)


class Ours:
    """placement.plan every cycle as a scheduler would call it, with `preset` as its only choice (`policy`: more
    fields for sweeps, as a user who sets them). Reservations are kept across cycles through
    `policy.previous_plan`."""

    def __init__(self, time_limit_s: float = 1.0, seed: int = 0, workers: int = 2, preset: str = "auto",
                 name: str = "placement", policy: dict[str, Any] | None = None) -> None:
        self.name = name
        self.preset = preset
        self.policy = dict(policy or {})
        #: attained service changes a job's class as time passes, so a LAS loop looks every cycle
        self.every_cycle = preset == "las"
        self.las = Las.model_validate(self.policy.get("las", {}))
        self._seen: tuple | None = None
        self.time_limit_s = time_limit_s
        self.seed = seed
        self.workers = workers
        self.last_plan: Any = None

    def moves(self, running: list[Running]) -> bool:
        """Could a plan move running jobs (policy.migration, which needs speed tables) with nothing queued?"""
        return False

    def request(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
                gpus_per_node: int) -> dict[str, Any]:
        nodes = [{"name": f"n{i}", "gpus": gpus_per_node, "cpu": 8.0 * gpus_per_node,
                  "memory_gib": 128.0 * gpus_per_node, "gpu_model": GPU_MODEL} for i in range(len(free))]
        next_gpu = [0] * len(free)
        runs = []
        for r in running:
            pods = []
            for n, gpus in sorted(r.nodes.items()):  # one pod per node is all a running job's GPUs need to say
                pods.append({"task": "w", "node": f"n{n}", "gpus": list(range(next_gpu[n], next_gpu[n] + gpus))})
                next_gpu[n] += gpus
            estimate = None if r.job.estimate_s is None else r.job.estimate_s - r.job.done_s
            runs.append({"job": r.job.name, "priority": r.job.priority, "started_at": _at(r.start_s),
                         "expected_runtime_h": _hours(estimate), "pods": pods,
                         "attained_gpu_h": _attained_h(r.job),
                         "checkpointed_at": _at(r.checkpoint_s if r.checkpoint_s is not None else r.start_s)})
        for n, taken in enumerate(next_gpu):  # down nodes (spot reclaims) show no free GPUs: mark them unhealthy
            down = gpus_per_node - taken - int(free[n])
            if down > 0:
                nodes[n]["unhealthy_gpus"] = list(range(gpus_per_node - down, gpus_per_node))
        jobs = []
        for job in queue:
            pods = pods_of(job.gpus, gpus_per_node)
            estimate = None if job.estimate_s is None else job.estimate_s - job.done_s
            jobs.append({"name": job.name, "priority": job.priority, "submitted_at": _at(job.submit_s),
                         "expected_runtime_h": _hours(estimate), "attained_gpu_h": _attained_h(job),
                         "tasks": [{"name": "w", "replicas": len(pods), "gpus": pods[0]}]})
        policy = {"now": _at(now_s), "time_limit_s": self.time_limit_s, "seed": self.seed,
                  "workers": self.workers, "preset": self.preset, "previous_plan": self._previous(), **self.policy}
        return {"cluster": {"nodes": nodes, "running": runs}, "jobs": jobs, "policy": policy}

    def _previous(self) -> dict[str, Any] | None:
        """Last cycle's plan, passed back as a scheduler does: its reservations are kept (and its assignments
        earn stability; they have all started, so nothing of them is pending any more)."""
        if self.last_plan is None:
            return None
        return {"reservations": [{"job": r.job} for r in self.last_plan.reservations]}

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        if not queue and not self.moves(running):
            return Decision()
        if self.every_cycle:  # called every cycle: plan again only when a job arrived, ended or changed class
            lease = self.policy.get("min_runtime_s", self.las.lease_s)
            seen = (tuple(j.name for j in queue),
                    tuple((r.job.name, _queue(_attained_h(r.job), self.las), now_s - r.start_s >= lease)
                          for r in running))
            if seen == self._seen:
                return Decision()
            self._seen = seen
        out = plan(self.request(now_s, queue, running, free, gpus_per_node))
        self.last_plan = out
        by_name = {job.name: job for job in queue} | {r.job.name: r.job for r in running}  # moves start again
        starts: dict[str, dict[int, int]] = {}
        for a in out.assignments:
            nodes = starts.setdefault(a.job, {})
            n = int(a.node[1:])
            nodes[n] = nodes.get(n, 0) + len(a.gpus)
        return Decision(starts=[(by_name[name], nodes) for name, nodes in starts.items()],
                        preempt=[p.job for p in out.preemptions])
