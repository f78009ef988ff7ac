"""The utilisation report: per GPU, node, team and job, with reclaim and right-sizing suggestions.

`analyse` turns streamed statistics (metrics.Usage) and, when given, the request into rows; the
renderers write the same content as Markdown or HTML; `plots` draws PNGs when matplotlib is
installed (the optional `report` extra) and says so plainly when it is not.

Attribution: a sample's job is the CSV `job` column, else the request job whose name is the pod's
name or a '-'-separated prefix of it (`train-7` belongs to job `train`), else the pod's name
without a trailing `-<number>`. Its team is the CSV `team` column, else the request job's team,
else the pod's namespace. "Declared" GPU memory is a pending job's largest `gpu_memory_gib`, a
running job's MIG instance or share memory, else the memory of the GPU it held (a whole GPU
declares all of it); a job is a right-sizing candidate when its peak is under `memory_below` of that.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from placement_models import PlacementRequest

from placement import catalog
from placement.compile.usage import unused_fraction
from placement.usage.metrics import Device, Stats, Usage


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


# --------------------------------------------------------------------------------------------
# Analysis


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


# --------------------------------------------------------------------------------------------
# Rendering: one list of blocks, written as Markdown or HTML


@dataclass
class Block:
    kind: str  # h1 | h2 | p | table | img | note
    text: str = ""
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


def _f(x: float | None, digits: int = 1, suffix: str = "") -> str:
    return "–" if x is None else f"{x:.{digits}f}{suffix}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _capped(rows: list[list[str]], limit: int, what: str) -> tuple[list[list[str]], str | None]:
    if limit and len(rows) > limit:
        return rows[:limit], f"{len(rows) - limit} more {what} not shown (--max-rows 0 shows all)."
    return rows, None


def blocks(a: Analysis, images: dict[str, str] | None = None, plot_note: str | None = None,
           what_if: list[Block] | None = None) -> list[Block]:
    o, t = a.options, a.total
    out = [Block("h1", "GPU utilisation report")]
    if a.window is None:
        return [*out, Block("p", "The metrics hold no SM utilisation samples.")]
    span_h = (a.window[1] - a.window[0]) / 3600.0
    out.append(Block("p", f"Window {_when(a.window[0])} → {_when(a.window[1])} ({span_h:.1f} h); "
                          f"{_n(len(a.gpus), 'GPU')} on {_n(len(a.nodes), 'node')}; {a.usage.rows:,} samples read in "
                          f"{_n(a.usage.chunks, 'chunk')}."))
    idle_h = sum(g.stats.idle_hours for g in a.idle)
    idle_share = t.idle_hours / t.hours if t.hours else None
    out.append(Block("p", f"Mean SM utilisation {_f(t.mean_sm)}% (p95 {_f(t.p95_sm, 0)}%); "
                          f"{_f(t.idle_hours, 0)} of {_f(t.hours, 0)} GPU-hours ({_pct(idle_share)}) "
                          f"under {o.idle_below:g}%. {_n(len(a.idle), 'card')} idle for ≥ {_pct(o.idle_share)} of "
                          f"the samples ({idle_h:.0f} idle GPU-hours); {_n(len(a.right_size), 'job')} peak under "
                          f"{_pct(o.memory_below)} of their GPU memory."))

    out.append(Block("h2", "Reclaim: cards idle most of the window"))
    if a.idle:
        free = [g for g in a.idle if g.free_in_request]
        out.append(Block("p", f"Under {o.idle_below:g}% SM for at least {_pct(o.idle_share)} of their samples. "
                              + (f"{len(free)} of them {'is' if len(free) == 1 else 'are'} free in the request: "
                                 "reclaim or downgrade (`--what-if` plans without them). " if free else "")
                              + "Cards a running job holds are idle allocations: ask their owners."))
        rows = [[g.node, g.info.name, g.model or g.info.model or "–", _f(g.stats.mean_sm), _f(g.stats.p95_sm, 0),
                 _pct(g.stats.idle_share), _f(g.stats.idle_hours),
                 g.held_by or ("free" if g.in_request else "not in request"), ", ".join(g.jobs) or "–"]
                for g in a.idle]
        rows, more = _capped(rows, o.max_rows, "cards")
        out.append(Block("table", headers=["node", "GPU", "model", "mean SM %", "p95 SM %", "idle share", "idle h",
                                           "in the request", "jobs seen"], rows=rows))
        if more:
            out.append(Block("note", more))
    else:
        out.append(Block("p", "None."))

    out.append(Block("h2", "Right-sizing: jobs using little of their GPU memory"))
    if a.right_size:
        saved = sum(j.suggestion.gpus_saved for j in a.right_size if j.suggestion)
        out.append(Block("p", f"Peak GPU memory under {_pct(o.memory_below)} of what they declared or held; a MIG "
                              f"instance with the peak × {o.headroom:g} would free about {saved:.1f} GPUs."))
        rows = [[j.name, j.team or "–", str(j.gpus), _f(j.declared_gib), j.declared_from, _f(j.stats.mem_peak),
                 _pct(j.memory_share), _f(j.stats.mean_sm), (j.suggestion.profile or "–") if j.suggestion else "–",
                 _f(j.suggestion.gpus_saved, 2) if j.suggestion else "–", j.suggestion.note if j.suggestion else ""]
                for j in sorted(a.right_size, key=lambda j: -(j.suggestion.gpus_saved if j.suggestion else 0))]
        rows, more = _capped(rows, o.max_rows, "jobs")
        out.append(Block("table", headers=["job", "team", "GPUs", "declared GiB", "declared as", "peak GiB",
                                           "peak share", "mean SM %", "MIG instance", "GPUs saved", "note"], rows=rows))
        if more:
            out.append(Block("note", more))
    else:
        out.append(Block("p", "None."))

    if a.over_declared:
        out.append(Block("h2", "Over-declared: lower value in the next plan"))
        w = a.over_declared_weight
        out.append(Block("p", "Pending jobs whose tasks declare more gpu_memory_gib than they were seen to use. "
                              "After `placement usage annotate`, the term usage.over_declared takes "
                              f"{'weights.over_declared' if w is None else f'{w:g}'} × the unused share of their "
                              "priority value."))
        out.append(Block("table", headers=["job", "team", "declared GiB", "peak GiB", "unused", "value kept"],
                         rows=[[j.name, j.team or "–", _f(j.declared_gib), _f(j.stats.mem_peak), _pct(j.unused),
                                _pct(1 - (w or 0) * j.unused)] for j in a.over_declared]))

    if what_if:
        out.extend(what_if)

    out.append(Block("h2", "Teams"))
    out.append(Block("table", headers=["team", "GPUs", "GPU-hours", "mean SM %", "p95 SM %", "idle h", "mem mean GiB"],
                     rows=[[g.name, str(g.gpus), _f(g.stats.hours), _f(g.stats.mean_sm), _f(g.stats.p95_sm, 0),
                            _f(g.stats.idle_hours), _f(g.stats.mem_mean)] for g in a.teams]))
    out.append(Block("h2", "Nodes"))
    node_rows = [[g.name, str(g.gpus), _f(g.stats.mean_sm), _f(g.stats.p95_sm, 0), _f(g.stats.idle_hours),
                  _f(g.stats.mem_mean), _f(g.stats.mem_peak)]
                 for g in sorted(a.nodes, key=lambda g: (g.stats.mean_sm or 0.0, g.name))]
    node_rows, more = _capped(node_rows, o.max_rows, "nodes")
    out.append(Block("table", headers=["node", "GPUs", "mean SM %", "p95 SM %", "idle h", "mem mean GiB",
                                       "mem peak GiB"], rows=node_rows))
    if more:
        out.append(Block("note", more + " Sorted by mean utilisation, lowest first."))
    out.append(Block("h2", "Jobs"))
    job_rows = [[j.name, j.team or "–", j.state, str(j.gpus), _f(j.stats.mean_sm), _f(j.stats.p95_sm, 0),
                 _f(j.stats.idle_hours), _f(j.stats.mem_peak), _f(j.declared_gib)]
                for j in sorted(a.jobs, key=lambda j: (j.stats.mean_sm or 0.0, j.name))]
    job_rows, more = _capped(job_rows, o.max_rows, "jobs")
    out.append(Block("table", headers=["job", "team", "state", "GPUs", "mean SM %", "p95 SM %", "idle h",
                                       "peak GiB", "declared GiB"], rows=job_rows))
    if more:
        out.append(Block("note", more + " Sorted by mean utilisation, lowest first."))
    out.append(Block("h2", "GPUs"))
    gpu_rows = [[g.node, g.info.name, g.model or g.info.model or "–", _f(g.stats.mean_sm), _f(g.stats.p95_sm, 0),
                 _f(g.stats.idle_hours), _f(g.stats.mem_mean), _f(g.stats.mem_peak), _f(g.stats.mem_total),
                 _f(g.stats.power_mean, 0), ", ".join(g.jobs) or "–"]
                for g in sorted(a.gpus, key=lambda g: (g.stats.mean_sm or 0.0, g.node, g.info.name))]
    gpu_rows, more = _capped(gpu_rows, o.max_rows, "GPUs")
    out.append(Block("table", headers=["node", "GPU", "model", "mean SM %", "p95 SM %", "idle h", "mem mean GiB",
                                       "mem peak GiB", "mem total GiB", "power W", "jobs"], rows=gpu_rows))
    if more:
        out.append(Block("note", more + " Sorted by mean utilisation, lowest first."))

    out.append(Block("h2", "Plots"))
    if images:
        out.extend(Block("img", text=alt, rows=[[path]]) for alt, path in images.items())
    out.append(Block("note", plot_note or "Plots were not requested (--plots DIR)."))
    return out


def markdown(parts: list[Block]) -> str:
    lines: list[str] = []
    for b in parts:
        if b.kind == "h1":
            lines += [f"# {b.text}", ""]
        elif b.kind == "h2":
            lines += [f"## {b.text}", ""]
        elif b.kind in ("p", "note"):
            lines += [b.text if b.kind == "p" else f"_{b.text}_", ""]
        elif b.kind == "img":
            lines += [f"![{b.text}]({b.rows[0][0]})", ""]
        elif b.kind == "table":
            lines.append("| " + " | ".join(b.headers) + " |")
            lines.append("|" + "|".join("---" for _ in b.headers) + "|")
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in b.rows]
            lines.append("")
    return "\n".join(lines)


def to_html(parts: list[Block]) -> str:
    body: list[str] = []
    for b in parts:
        e = html.escape(b.text)
        if b.kind in ("h1", "h2"):
            body.append(f"<{b.kind}>{e}</{b.kind}>")
        elif b.kind == "p":
            body.append(f"<p>{e}</p>")
        elif b.kind == "note":
            body.append(f"<p class='note'>{e}</p>")
        elif b.kind == "img":
            body.append(f"<figure><img src='{html.escape(b.rows[0][0])}' alt='{e}'><figcaption>{e}</figcaption>"
                        "</figure>")
        elif b.kind == "table":
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    style = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}"
             "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f0f0f0}"
             ".note{color:#666;font-style:italic}img{max-width:100%}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>GPU utilisation report</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


# --------------------------------------------------------------------------------------------
# Plots (optional: matplotlib)

MISSING_MATPLOTLIB = ("Plots skipped: matplotlib is not installed (pip install 'placement[report]' adds it); "
                      "every figure above is in the tables.")


def plots(a: Analysis, folder: Path, per_node: int = 8) -> tuple[dict[str, str], str]:
    """PNG files in `folder`: the node × time heat map, GPU × time heat maps of the `per_node` nodes with the
    most idle GPU-hours, and SM-utilisation histograms per team. Returns ({caption: path}, note)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}, MISSING_MATPLOTLIB
    if a.window is None or a.usage.t0 is None:
        return {}, "No plots: the metrics hold no SM utilisation samples."
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}
    nodes = [g.name for g in a.nodes]
    devices_of = {n: np.array([g.device for g in a.gpus if g.node == n], dtype=np.int64) for n in nodes}
    grid = np.array([a.usage.timeline(devices_of[n]) for n in nodes])
    out["SM utilisation per node over time"] = _heat(plt, grid, nodes, a, folder / "heatmap_nodes.png",
                                                     "mean SM utilisation per node")
    busiest_idle = sorted(a.nodes, key=lambda g: -g.stats.idle_hours)[:per_node]
    for g in busiest_idle:
        rows = [r for r in a.gpus if r.node == g.name]
        grid = np.array([a.usage.timeline(np.array([r.device])) for r in rows])
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", g.name)
        out[f"SM utilisation of {g.name}'s GPUs"] = _heat(plt, grid, [r.info.name for r in rows], a,
                                                          folder / f"heatmap_{safe}.png", f"{g.name}: SM utilisation")
    out["SM utilisation histogram per team"] = _team_histograms(plt, a, folder / "teams_histogram.png")
    return {caption: str(path) for caption, path in out.items()}, f"{len(out)} plots in {folder}."


def _heat(plt, grid: np.ndarray, labels: list[str], a: Analysis, path: Path, title: str) -> Path:  # noqa: ANN001
    usage = a.usage
    assert usage.t0 is not None
    fig, ax = plt.subplots(figsize=(12, max(2.0, 0.22 * len(labels) + 1.2)))
    hours = usage.bucket_s / 3600.0
    extent = (0, grid.shape[1] * hours, len(labels) - 0.5, -0.5)
    im = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", vmin=0, vmax=100, cmap="viridis",
                   interpolation="nearest", extent=extent)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7 if len(labels) > 30 else 9)
    ax.set_xlabel(f"hours since {_when(usage.t0)} (bucket {hours:g} h)")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="SM %")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _team_histograms(plt, a: Analysis, path: Path) -> Path:  # noqa: ANN001
    teams = a.teams or []
    cols = min(3, max(1, len(teams)))
    rows = max(1, -(-len(teams) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), squeeze=False)
    edges = np.arange(0, 101, 10)
    for ax, team in zip(axes.flat, teams, strict=False):
        hist = team.stats.hist
        tens = np.add.reduceat(hist[:100], edges[:-1])
        tens[-1] += hist[100]
        share = tens / max(1, hist.sum())
        ax.bar(edges[:-1] + 5, 100 * share, width=9, color="#4c72b0")
        ax.set_title(f"{team.name} ({team.gpus} GPUs)", fontsize=10)
        ax.set_xlim(0, 100)
        ax.set_xlabel("SM %")
        ax.set_ylabel("% of samples")
    for ax in list(axes.flat)[len(teams):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
