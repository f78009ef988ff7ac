"""The report's content: statistics merged per GPU, node, team and job, with reclaim and right-sizing.

`analyse` turns streamed statistics (placement.usage.stats.Usage) and, when given, the request
into rows; placement.usage.render writes them, placement.usage.plots draws them.

Attribution: a sample's job is the CSV `job` column, else the request job whose name is the pod's
name or a '-'-separated prefix of it (`train-7` belongs to job `train`), else the pod's name
without a trailing `-<number>`. Its team is the CSV `team` column, else the request job's team,
else the pod's namespace. "Declared" GPU memory is a pending job's largest `gpu_memory_gib`, a
running job's MIG instance or share memory, else the memory of the GPU it held (a whole GPU
declares all of it); a job is a right-sizing candidate when its peak is under `memory_below` of that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from placement_models import PlacementRequest

from placement import catalog
from placement.compile.usage import unused_fraction
from placement.usage.reader import Device
from placement.usage.stats import Stats, Usage


@dataclass(frozen=True)
class Options:
    idle_below: float = 20.0  # percent SM utilisation under which a sample is idle
    idle_share: float = 0.75  # a card idle for at least this share of its samples is a reclaim candidate
    memory_below: float = 0.30  # a job whose peak memory is under this share of its declaration is right-sized
    headroom: float = 1.25  # a suggested MIG instance holds peak × headroom
    max_rows: int = 50  # rows per table in the report (the lowest utilisation first); 0 = all

    def check(self) -> None:
        problems = []
        if not 0 < self.idle_below <= 100:
            problems.append(f"idle-below must be in (0, 100] percent, got {self.idle_below:g}")
        if not 0 < self.idle_share <= 1:
            problems.append(f"idle-share must be in (0, 1], got {self.idle_share:g}")
        if not 0 < self.memory_below <= 1:
            problems.append(f"memory-below must be in (0, 1], got {self.memory_below:g}")
        if not self.headroom >= 1:
            problems.append(f"headroom must be at least 1, got {self.headroom:g}")
        if self.max_rows < 0:
            problems.append(f"max-rows must be 0 (all) or more, got {self.max_rows}")
        if problems:
            raise ValueError("; ".join(problems))


@dataclass
class GpuRow:
    device: int
    info: Device
    node: str
    stats: Stats
    jobs: list[str]
    model: str | None  # catalog name when known
    held_by: str | None  # running job holding it in the request
    in_request: bool  # the request names this node and GPU

    @property
    def free_in_request(self) -> bool:
        return self.in_request and self.held_by is None


@dataclass
class GroupRow:
    name: str
    gpus: int
    stats: Stats


@dataclass
class Suggestion:
    profile: str | None  # MIG profile that holds peak × headroom, None when there is none smaller than a GPU
    gpus_saved: float
    note: str


@dataclass
class JobRow:
    name: str
    team: str | None
    gpus: int
    stats: Stats
    declared_gib: float | None
    declared_from: str
    state: str  # pending | running | not in request
    right_size: bool  # the pending job opted in
    suggestion: Suggestion | None = None
    unused: float = 0.0  # share of a pending task's declared gpu_memory_gib unused (usage.over_declared)

    @property
    def memory_share(self) -> float | None:
        if self.stats.mem_peak is None or not self.declared_gib:
            return None
        return self.stats.mem_peak / self.declared_gib


@dataclass
class Analysis:
    options: Options
    usage: Usage
    window: tuple[float, float] | None
    total: Stats
    gpus: list[GpuRow]
    nodes: list[GroupRow]
    teams: list[GroupRow]
    jobs: list[JobRow]
    idle: list[GpuRow] = field(default_factory=list)
    right_size: list[JobRow] = field(default_factory=list)
    over_declared: list[JobRow] = field(default_factory=list)
    over_declared_weight: float | None = None
    team_of_node: dict[str, str] = field(default_factory=dict)


def job_name(pod: str | None, explicit: str | None, names: list[str]) -> str | None:
    """The job a pod belongs to: explicit, else a request job named like it, else the pod's stem."""
    if explicit:
        return explicit
    if not pod:
        return None
    for name in names:  # longest first
        if pod == name or pod.startswith(name + "-"):
            return name
    return re.sub(r"-\d+$", "", pod)


def analyse(usage: Usage, request: PlacementRequest | None = None, options: Options | None = None) -> Analysis:
    options = options or Options()
    options.check()
    pending = {j.name: j for j in request.jobs} if request else {}
    running = {r.job: r for r in request.cluster.running} if request else {}
    names = sorted([*pending, *running], key=len, reverse=True)
    wl_job = [job_name(w.pod, w.job, names) for w in usage.workloads]
    wl_team = []
    for w, job in zip(usage.workloads, wl_job, strict=True):
        spec = pending.get(job) if job else None
        spec_team = spec.team if spec else (running[job].team if job in running else None)
        wl_team.append(w.team or spec_team or w.namespace)

    nodes = {n.name: n for n in request.cluster.nodes} if request else {}
    held = _held(request) if request else {}
    by_device = usage.device_series()
    gpus = []
    for d, series in by_device.items():
        info = usage.devices[d]
        node = info.node or "?"
        jobs = sorted({wl_job[w] for w in usage.series_workload[series].tolist() if wl_job[w]})
        req_node = nodes.get(node)
        model = _model(req_node.gpu_model if req_node else None) or _model(info.model)
        in_request = req_node is not None and info.gpu is not None and 0 <= info.gpu < req_node.gpus
        gpus.append(GpuRow(d, info, node, usage.stats(series, options.idle_below), jobs, model,
                           held.get((node, info.gpu)) if info.gpu is not None else None, in_request))
    gpus.sort(key=lambda g: (g.node, g.info.gpu if g.info.gpu is not None else -1, g.info.name))

    everything = np.arange(usage.series_device.size)
    analysis = Analysis(options=options, usage=usage, window=usage.window,
                        total=usage.stats(everything, options.idle_below), gpus=gpus,
                        nodes=_groups(usage, options, {g.node for g in gpus},
                                      lambda s: np.array([usage.devices[d].node or "?" for d in
                                                          usage.series_device[s].tolist()])),
                        teams=[], jobs=[])
    series_team = np.array([wl_team[w] or "(unknown)" for w in usage.series_workload.tolist()], dtype=object)
    analysis.teams = [GroupRow(t, len(set(usage.series_device[series_team == t].tolist())),
                               usage.stats(np.flatnonzero(series_team == t), options.idle_below))
                      for t in sorted(set(series_team.tolist()))]
    analysis.idle = sorted((g for g in gpus if g.stats.idle_share is not None
                            and g.stats.idle_share >= options.idle_share),
                           key=lambda g: (-g.stats.idle_hours, g.node, g.info.name))
    analysis.jobs = _jobs(usage, options, request, wl_job, wl_team, gpus)
    analysis.right_size = [j for j in analysis.jobs if j.memory_share is not None
                           and j.memory_share < options.memory_below]
    analysis.over_declared = [j for j in analysis.jobs if j.unused > 0]
    if request is not None:
        analysis.over_declared_weight = request.policy.weights.over_declared
    return analysis


def _groups(usage: Usage, options: Options, names: set[str], label) -> list[GroupRow]:  # noqa: ANN001
    of_series = label(np.arange(usage.series_device.size))
    out = []
    for name in sorted(names):
        series = np.flatnonzero(of_series == name)
        out.append(GroupRow(name, len(set(usage.series_device[series].tolist())), usage.stats(series,
                                                                                             options.idle_below)))
    return out


def _model(name: str | None) -> str | None:
    """Catalog name of a GPU model as a request or DCGM's modelName spells it ('NVIDIA H100 80GB HBM3')."""
    if not name:
        return None
    for guess in (name, name.replace(" ", "-"), name.replace("NVIDIA ", "").replace(" ", "-")):
        found = catalog.lookup(guess)
        if found is not None:
            return found.name
    return None


def _held(request: PlacementRequest) -> dict[tuple[str, int], str]:
    """(node, GPU) -> running job holding it whole, by a MIG instance or by a share."""
    out: dict[tuple[str, int], str] = {}
    for rj in request.cluster.running:
        for pod in rj.pods:
            for g in [*pod.gpus, *([pod.mig.gpu] if pod.mig else [])]:
                out.setdefault((pod.node, g), rj.job)
    return out


def _jobs(usage: Usage, options: Options, request: PlacementRequest | None, wl_job: list[str | None],
          wl_team: list[str | None], gpus: list[GpuRow]) -> list[JobRow]:
    pending = {j.name: j for j in request.jobs} if request else {}
    running = {r.job: r for r in request.cluster.running} if request else {}
    nodes = {n.name: n for n in request.cluster.nodes} if request else {}
    series_job = np.array([wl_job[w] for w in usage.series_workload.tolist()], dtype=object)
    row_of = {g.device: g for g in gpus}
    out = []
    for name in sorted({j for j in wl_job if j}):
        series = np.flatnonzero(series_job == name)
        devices = sorted(set(usage.series_device[series].tolist()))
        stats = usage.stats(series, options.idle_below)
        team = next((wl_team[w] for w in usage.series_workload[series].tolist() if wl_team[w]), None)
        declared, source, state = None, "", "not in request"
        job, run = pending.get(name), running.get(name)
        if job is not None:
            state = "pending"
            asked = [t.gpu_memory_gib for t in job.tasks if t.gpu_memory_gib is not None
                     and (t.gpus or t.mig_profile or t.gpu_share)]
            if asked:
                declared, source = max(asked), "gpu_memory_gib"
        elif run is not None:
            state = "running"
            declared, source = _running_declared(run, nodes)
        if declared is None:
            totals = [row_of[d].stats.mem_total for d in devices if row_of[d].stats.mem_total]
            declared, source = (max(totals), "whole GPU") if totals else (None, "unknown")
        row = JobRow(name=name, team=team, gpus=len(devices), stats=stats, declared_gib=declared,
                     declared_from=source, state=state, right_size=bool(job and job.right_size))
        if job is not None and stats.mem_peak is not None:
            seen = job.model_copy(update={"observed_gpu_memory_gib": stats.mem_peak})
            row.unused = max((unused_fraction(seen, t) for t in job.tasks), default=0.0)
        share = row.memory_share
        if share is not None and share < options.memory_below and stats.mem_peak is not None:
            models = [row_of[d].model for d in devices]
            row.suggestion = _suggest(stats.mem_peak * options.headroom, models, job, stats.mean_sm, state,
                                      options.headroom)
        out.append(row)
    return out


def _running_declared(run, nodes) -> tuple[float | None, str]:  # noqa: ANN001
    sizes: list[float] = []
    for pod in run.pods:
        if pod.gpu_memory_gib is not None:
            sizes.append(pod.gpu_memory_gib)
        elif pod.mig is not None:
            node = nodes.get(pod.node)
            geo = catalog.mig_geometry(node.gpu_model) if node is not None else None
            profile = geo.profile(pod.mig.profile) if geo is not None else None
            if profile is not None:
                sizes.append(profile.memory_gib)
    return (max(sizes), "its MIG instance or share") if sizes else (None, "")


def _suggest(need_gib: float, models: list[str | None], job, mean_sm: float | None,  # noqa: ANN001
             state: str, headroom: float) -> Suggestion:
    """The smallest MIG instance holding `need_gib` on the model the job ran on, and the GPUs it frees.

    As the solver does (compile/usage.py), the instance must also have mean GPU_UTIL × headroom of the
    SMs: GPU_UTIL bounds the SM share a job keeps busy. A job that is too busy is listed with no saving.
    """
    model = next((m for m in models if m), None)
    geo = catalog.mig_geometry(model) if model else None
    if geo is None:
        return Suggestion(None, 0.0, f"no MIG on {model or 'an unknown GPU model'}: a GPU share (time-slicing/MPS) "
                                     "would free it")
    profile = geo.smallest_fitting(need_gib)
    if profile is None or profile.memory_slices >= geo.memory_slices:
        return Suggestion(None, 0.0, f"needs {need_gib:.1f} GiB with headroom: no instance smaller than the GPU")
    need_sm = None if mean_sm is None else mean_sm / 100.0 * headroom
    share = profile.compute_slices / geo.compute_slices
    if need_sm is not None and share < need_sm - 1e-9:
        return Suggestion(profile.name, 0.0, f"too busy for it: {mean_sm:.0f}% GPU util × {headroom:g} needs "
                                             f"{100 * need_sm:.0f}% of the SMs, {profile.name} has "
                                             f"{profile.compute_slices}/{geo.compute_slices}")
    saved = len(models) * (1.0 - profile.memory_slices / geo.memory_slices)
    if job is None:
        note = ("running: resubmitted with right_size: true, the plan could move it" if state == "running"
                else "not in the request")
    elif job.right_size:
        note = "opted in (right_size): the next plan may move it"
    elif any(t.gpus == 1 for t in job.tasks) and job.topology is None:
        note = "set right_size: true to let the next plan move it"
    else:
        note = "pods of several GPUs: MIG gives one instance per pod"
    return Suggestion(profile.name, saved, note)
