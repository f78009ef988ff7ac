"""The fleet (which GPU model each node has) and a seeded generator of Gavel's published job mix.

Why this exists: the benchmark must replay the job mix the Gavel paper evaluated on (OSDI 2020, §7.1:
job types drawn uniformly from its 26 models × batch sizes, sizes and durations from Microsoft's Philly
trace, Poisson arrivals), drawn here by our own code from the distributions in Gavel's
``scheduler/utils.py`` (``_generate_scale_factor``, ``_generate_duration``, ``generate_job``) so every policy
sees the same seeded jobs and nothing depends on Gavel's code being installed:

* scale factor (GPUs): 1 w.p. 0.7, 2 w.p. 0.1, 4 w.p. 0.15, 8 w.p. 0.05;
* job type: uniform over the job types; a job of more than one GPU draws again until the type is one
  Gavel runs distributed (those measured at scale factors above 1);
* duration: on the reference GPU (V100), 10^U(1.5, 3) minutes w.p. 0.8, else 10^U(3, 4) minutes;
* arrivals: a Poisson process (the first job at t = 0) at a rate chosen by the caller.

Each of those four draws has its own random stream derived from the seed (as Gavel keeps separate
generators), so the same seed gives the same jobs at any arrival rate.

A job's speeds are its Gavel throughputs relative to the V100's at the same scale factor; its duration and
runtime estimate are work at speed 1.0 (V100 seconds), exact, as Gavel's simulator knows every job's steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from placement.bench.cycles.state import TraceJob
from placement.bench.fleet.data import CATALOG_MODEL, GAVEL_TYPES, REFERENCE, Throughputs, load

HOUR = 3600.0
#: Philly scale factors and their probabilities (Gavel's ``_generate_scale_factor``).
SCALE_PROBS: tuple[tuple[int, float], ...] = ((1, 0.7), (2, 0.1), (4, 0.15), (8, 0.05))
#: Philly durations (Gavel's ``_generate_duration``): w.p. ``LONG_P`` 10^U(3, 4) minutes, else 10^U(1.5, 3).
LONG_P = 0.2
SHORT_EXP, LONG_EXP = (1.5, 3.0), (3.0, 4.0)
#: GPU memory per GPU of each model (GiB, as the catalog names say): a job that cannot run on a model asks
#: the optimizer for more memory than that model has, which is how a scheduler learns an OOM.
GPU_MEMORY_GIB: dict[str, float] = {"V100-SXM2-16GB": 16.0, "P100-SXM2-16GB": 16.0, "K80-12GB": 12.0}
#: The fleet's models, fastest first (Gavel's round mechanism walks types in this order).
MODELS: tuple[str, ...] = tuple(CATALOG_MODEL[t] for t in GAVEL_TYPES)
UNIFORM_MODEL = CATALOG_MODEL[REFERENCE]


@dataclass(frozen=True)
class Fleet:
    """The GPU model of each node (all nodes have ``gpus_per_node`` GPUs)."""

    node_models: tuple[str, ...]
    gpus_per_node: int

    @property
    def nodes(self) -> int:
        return len(self.node_models)

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def models(self) -> tuple[str, ...]:
        """The models present, in :data:`MODELS` order (fastest first), then any others by name."""
        present = set(self.node_models)
        return tuple(m for m in MODELS if m in present) + tuple(sorted(present - set(MODELS)))

    def gpus_of(self, model: str) -> int:
        return self.gpus_per_node * sum(m == model for m in self.node_models)


def mixed_fleet(nodes: int, gpus_per_node: int) -> Fleet:
    """A third of the nodes each V100, P100 and K80, interleaved (V100, P100, K80, V100, ...) so no policy's
    habit of filling low node indices first lands it on one model by accident."""
    if nodes < 3 or nodes % 3:
        raise ValueError(f"a mixed fleet needs a multiple of 3 nodes, got {nodes}")
    return Fleet(tuple(MODELS[i % 3] for i in range(nodes)), gpus_per_node)


def uniform_fleet(nodes: int, gpus_per_node: int) -> Fleet:
    """Every node a V100: the same jobs on a fleet where placement by model cannot matter."""
    if nodes < 1:
        raise ValueError("the fleet needs at least one node")
    return Fleet((UNIFORM_MODEL,) * nodes, gpus_per_node)


def mean_gpu_hours() -> float:
    """Expected V100 GPU-hours of one job of the mix: E[scale factor] × E[duration] (drawn independently).

    E[10^U(a, b)] = (10^b − 10^a) / ((b − a) ln 10)."""
    def mean_pow(a: float, b: float) -> float:
        return (10**b - 10**a) / ((b - a) * math.log(10))

    minutes = (1 - LONG_P) * mean_pow(*SHORT_EXP) + LONG_P * mean_pow(*LONG_EXP)
    return sum(sf * p for sf, p in SCALE_PROBS) * minutes / 60.0


def rate_for_load(load: float, total_gpus: int) -> float:
    """Arrivals per hour at which the mix offers ``load`` × ``total_gpus`` V100 GPU-hours per hour.

    Load is counted in V100 work: on a mixed fleet, where K80s and P100s do less per hour, the same load
    asks more of the fleet than on an all-V100 one."""
    if load <= 0:
        raise ValueError(f"load must be positive, got {load:g}")
    return load * total_gpus / mean_gpu_hours()


@dataclass(frozen=True)
class Mix:
    """Generated jobs (arrival order) and each one's Gavel job type and scale factor, by name."""

    jobs: list[TraceJob]
    kinds: dict[str, tuple[str, int]]


def _scale_factor(u: float) -> int:
    acc = 0.0
    for sf, p in SCALE_PROBS:
        acc += p
        if u < acc:
            return sf
    return SCALE_PROBS[-1][0]


def generate(n: int, seed: int, rate_per_h: float, throughputs: Throughputs | None = None) -> Mix:
    """``n`` jobs of Gavel's mix arriving at ``rate_per_h`` (Poisson), from ``seed``; see the module docstring."""
    if n < 1:
        raise ValueError(f"need at least one job, got {n}")
    if rate_per_h <= 0:
        raise ValueError(f"the arrival rate must be positive, got {rate_per_h:g}")
    tp = throughputs or load()
    types = tp.job_types
    distributed = [t for t in types if max(tp.scale_factors(t)) > 1]
    arrivals, sizes, kinds, durations = (np.random.default_rng([seed, stream]) for stream in range(4))
    gaps = arrivals.exponential(HOUR / rate_per_h, size=n)
    submit = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    jobs: list[TraceJob] = []
    names: dict[str, tuple[str, int]] = {}
    for i in range(n):
        sf = _scale_factor(float(sizes.random()))
        while True:  # Gavel redraws the type until one that runs on sf GPUs
            job_type = types[int(kinds.integers(len(types)))]
            if sf == 1 or job_type in distributed:
                break
        if sf not in tp.scale_factors(job_type):
            raise ValueError(f"{job_type} has no throughputs at scale factor {sf}")
        lo, hi = LONG_EXP if durations.random() < LONG_P else SHORT_EXP
        duration = 60.0 * 10 ** float(durations.uniform(lo, hi))
        name = f"j{i:04d}"
        jobs.append(TraceJob(name=name, submit_s=float(submit[i]), duration_s=duration, gpus=sf,
                             estimate_s=duration, speeds=tp.speeds(job_type, sf)))
        names[name] = (job_type, sf)
    return Mix(jobs=jobs, kinds=names)


def gpu_memory_need(job: TraceJob) -> float | None:
    """The GPU memory (GiB) that keeps ``job`` off the models it cannot run on (speed 0), or None if it runs
    on all: the memory of the smallest model it runs on, which must exceed every excluded model's."""
    if job.speeds is None:
        return None
    cannot = [m for m, s in job.speeds.items() if s <= 0]
    if not cannot:
        return None
    can = [m for m, s in job.speeds.items() if s > 0]
    need = min(GPU_MEMORY_GIB[m] for m in can)
    if any(GPU_MEMORY_GIB[m] >= need for m in cannot):
        raise ValueError(f"{job.name}: cannot express 'not on {', '.join(cannot)}' as a GPU memory need")
    return need
