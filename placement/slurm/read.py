"""The live Slurm cluster as a placement request: nodes, partitions, running and held jobs.

Everything is derived from what Slurm reports this cycle, never from the placer's memory, so a
placer restarted at any moment sees the same cluster a running one would. How Slurm's words map:

* node: CPUs, memory, GPUs from its GRES (one type per index, `gpu:g0:1,...`, lets the placer pin
  indices; other GRES are counted only), features as labels `feature.<name>: "yes"`, partitions as labels
  `partition.<name>: "yes"` and its first partition as its pool. Down, drained, failing or
  not-responding nodes are left out. GPUs or CPUs Slurm reports busy that no running job accounts for
  (a job completing, outside the partitions read) are kept from new work.
* running job: its nodes and the GPU indices of each (`gres_detail`); preemptible when its Comment
  says `preemptible` (and Slurm may requeue it).
* pending job: read when it waits held (`JobHeldUser`, as the shipped job_submit.lua leaves every new job)
  or released by the placer but not yet started. GPUs per node (`--gpus-per-node`, `--gres`) or per job
  (`--gpus`, split evenly over the nodes), node count, CPUs and memory per node, `--exclusive` (the whole
  node), `--constraint` (features joined by `&`) as a node selector, submit time, account as team.
* priority: `--qos-priority QOS=N` (the placer's option) × 10,000 + partition PriorityTier × 100 − nice
  (clamped to ±99); higher runs first, strictly.
* time: the time limit is `max_runtime_h`; the runtime estimate is `runtime=<2h|90m|1.5d>` in the job's
  Comment, else `--time-min`, else the time limit.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from placement import catalog
from placement.slurm.commands import Slurm
from placement.slurm.syntax import (
    comment_words,
    expand_hostlist,
    gres_items,
    index_of_type,
    noted_gpus,
    parse_hours,
)

#: Node states (sinfo's `state`) whose nodes take work; any other (down, drained, future...) keeps them out.
USABLE = {"idle", "mixed", "allocated", "completing"}
#: Node state flags that keep a node out even in a usable state.
BAD_FLAGS = {"DRAIN", "DRAINING", "DRAINED", "FAIL", "FAILING", "NOT_RESPONDING", "MAINTENANCE", "REBOOT_REQUESTED",
             "REBOOT_ISSUED", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "INVALID_REG", "FUTURE"}
#: Job states that hold resources on their nodes.
HOLDING = {"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STOPPED"}
#: Pending reasons of a job the placer held or released and may (re)place.
HELD = {"JobHeldUser"}
#: The one task of every job: Slurm's nodes of one job are identical slots.
TASK = "main"
#: Seconds a released job stays where it was let go before it may be placed again (see _released).
RELEASE_GRACE_S = 30.0


@dataclass
class JobFacts:
    """What apply needs to know of one Slurm job beyond the request: how it stands and what it asks now."""

    id: str
    state: str  # "held", "released" (pending, not held) or "running"
    comment: str
    node_count: int
    req_nodes: list[str]
    tres_per_node: str
    tres_per_job: str
    gpus_per_node: int
    #: nodes the request gives it (its node count, or more when its GPUs per job need more nodes)
    slots: int = 1
    #: times Slurm requeued it (a requeued job's begin time must be reset when it is placed again)
    restarts: int = 0


@dataclass
class Snapshot:
    """One cycle's view: the request for placement.plan and the facts apply needs."""

    request: dict[str, Any]
    jobs: dict[str, JobFacts]
    #: node -> may its GPUs be pinned by index (every GRES type names one index)?
    pinnable: dict[str, bool]
    #: jobs left unread and why (unsupported requests), for the operator
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass
class Options:
    """What the operator sets: the partitions read (none: all), QOS priorities, the base policy."""

    partitions: list[str] = field(default_factory=list)
    qos_priority: dict[str, int] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    now: datetime | None = None
    #: the GPU model of nodes whose GRES types and features name none the catalog knows
    gpu_model: str = "H100-SXM5-80GB"
    #: pin the chosen GPU indices where nodes allow it (False: ask Slurm for the count on each chosen node)
    pin_gpus: bool = True


def read(slurm: Slurm, options: Options | None = None) -> Snapshot:
    """Read the cluster through `slurm` and build this cycle's request. The three commands run at once: each
    waits mostly on slurmctld, and the read is on the path from a job's end to the next start."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        nodes, jobs, parts = pool.submit(slurm.nodes), pool.submit(slurm.jobs), pool.submit(slurm.partitions)
        return build(nodes.result(), jobs.result(), parts.result(), options or Options())


def _iso(epoch: int | None) -> str | None:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat() if epoch else None


def _tiers(partitions: list[dict[str, str]]) -> dict[str, int]:
    out = {}
    for p in partitions:
        try:
            out[p.get("PartitionName", "")] = int(p.get("PriorityTier", "1"))
        except ValueError:
            out[p.get("PartitionName", "")] = 1
    return out


def priority_of(job: dict[str, Any], tiers: dict[str, int], qos: dict[str, int]) -> int:
    """The job's strict priority class (module docstring)."""
    part = (job.get("partition") or "").split(",")[0]
    nice = int(job.get("nice") or 0)
    return qos.get(job.get("qos") or "", 0) * 10_000 + tiers.get(part, 1) * 100 - max(-99, min(99, nice))


def _times(job: dict[str, Any]) -> tuple[float | None, float | None]:
    """(expected_runtime_h, max_runtime_h) from the Comment's runtime=, --time-min and the time limit."""
    limit = job.get("time_limit")
    max_h = limit / 60 if isinstance(limit, int) and limit > 0 else None
    said = parse_hours(comment_words(job.get("comment")).get("runtime", ""))
    tmin = job.get("time_minimum")
    expected = said or (tmin / 60 if isinstance(tmin, int) and tmin > 0 else None) or max_h
    return expected, max_h


def _node(n: dict[str, Any], parts: list[str], default_model: str) -> tuple[dict[str, Any], bool, dict[int, int]]:
    """A request node, whether its GPUs are pinnable, and GPU index -> busy count from gres_used. The GPU model
    is the first GRES type or feature the catalog knows (`a100-sxm4-80gb`), else `default_model`."""
    items = gres_items(n.get("gres") or "")
    gpus = sum(c for _, c, _ in items)
    kinds = [k for k, _, _ in items]
    pinnable = bool(items) and all(index_of_type(k) is not None and c == 1 for k, c, _ in items) and \
        sorted(index_of_type(k) for k in kinds) == list(range(gpus))  # type: ignore[type-var]
    features = [f for f in (n.get("active_features") or n.get("features") or "").split(",") if f]
    known = [m for m in (catalog.lookup(x) for x in [*(k for k in kinds if k), *features]) if m is not None]
    model = known[0].name if known else default_model
    labels = {f"feature.{f}": "yes" for f in features}
    labels.update({f"partition.{p}": "yes" for p in n.get("partitions") or []})
    busy: dict[int, int] = {}
    for _, used, idx in gres_items(n.get("gres_used") or ""):
        for i in idx or []:
            busy[i] = busy.get(i, 0) + (1 if used else 0)
    node = {"name": n["name"], "pool": parts[0], "gpus": gpus, "cpu": float(n.get("cpus") or 0),
            "memory_gib": round((n.get("real_memory") or 0) / 1024, 3), "labels": labels}
    if gpus:
        node["gpu_model"] = model
    return node, pinnable, busy


def _usable(n: dict[str, Any], wanted: list[str]) -> list[str]:
    """The node's partitions among those read, or [] when it is down, drained or in none of them."""
    state = str(n.get("state") or "").lower()
    flags = {str(f).upper() for f in n.get("state_flags") or []}
    if state not in USABLE or flags & BAD_FLAGS:
        return []
    parts = list(n.get("partitions") or [])
    return [p for p in parts if not wanted or p in wanted]


def _running(job: dict[str, Any], nodes: dict[str, dict[str, Any]], prio: int) -> dict[str, Any] | None:
    """A running entry with one pod per node it holds among `nodes`; None when it holds none of them."""
    hosts = expand_hostlist(job.get("nodes") or "")
    details = list(job.get("gres_detail") or [])
    cpu_each = (job.get("cpus") or 0) / max(1, len(hosts))
    mem = _memory_gib(job, cpu_each)
    pods = []
    for i, host in enumerate(hosts):
        if host not in nodes:
            continue
        gpus = sorted({g for _, _, idx in gres_items(details[i] if i < len(details) else "") for g in idx or []})
        gpus = [g for g in gpus if g < nodes[host]["gpus"]]
        pods.append({"task": TASK, "node": host, "gpus": gpus, "cpu": cpu_each, "memory_gib": mem})
    if not pods:
        return None
    words = comment_words(job.get("comment"))
    entry: dict[str, Any] = {"job": str(job["job_id"]), "priority": prio, "pods": pods,
                             "preemptible": "preemptible" in words and job.get("requeue") is not False,
                             "started_at": _iso(job.get("start_time"))}
    return _with_account_and_times(entry, job)


def _with_account_and_times(entry: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """A running entry with the job's account as team and its runtime estimate and limit, where it has them."""
    expected, max_h = _times(job)
    if job.get("account"):
        entry["team"] = job["account"]
    if expected:
        entry["expected_runtime_h"] = expected
    if max_h:
        entry["max_runtime_h"] = max_h
    return entry


def _released(job: dict[str, Any], nodes: dict[str, dict[str, Any]], prio: int, now: datetime,
              running: list[dict[str, Any]], busy: dict[str, dict[int, int]]) -> dict[str, Any] | None:
    """A job the placer released onto its whole node list less than RELEASE_GRACE_S ago, as a running entry
    there; None otherwise (it is then placed again, and moved if the plan wants it elsewhere).

    Slurm takes 0.3-3 s from a release to the start, longer when it is busy. A plan made meanwhile is
    free to put the job elsewhere, and a placer cycling faster than that moves it again and again
    (hold, update, release) before Slurm ever starts it; with its GPUs counted as taken, the plan leaves
    it where it was let go. Its GPUs are the indices it is pinned to, or, when it asks a count, the
    lowest ones free on each node (Slurm picks which; only the count matters to the plan)."""
    hosts = expand_hostlist(job.get("required_nodes") or "")
    items = gres_items(job.get("tres_per_node") or "")
    typed = sorted(i for i in (index_of_type(k) for k, _, _ in items) if i is not None)
    count = sum(c for _, c, _ in items)
    released_at = job.get("eligible_time") or 0
    if (not hosts or len(hosts) != int(job.get("node_count") or 0) or any(h not in nodes for h in hosts)
            or not count or job.get("tres_per_job") or now.timestamp() - released_at > RELEASE_GRACE_S):
        return None
    taken: dict[str, set[int]] = {h: {i for i, c in busy.get(h, {}).items() if c} for h in hosts}
    for other in running:
        for pod in other["pods"]:
            if pod["node"] in taken:
                taken[pod["node"]].update(pod["gpus"])
    gpus: dict[str, list[int]] = {}
    for h in hosts:
        gpus[h] = typed if len(typed) == count else [i for i in range(nodes[h]["gpus"]) if i not in taken[h]][:count]
        if len(gpus[h]) != count or any(i in taken[h] for i in gpus[h]):
            return None
    cpu_each = (job.get("cpus") or 0) / len(hosts)
    mem = _memory_gib(job, cpu_each)
    entry = {"job": str(job["job_id"]), "priority": prio, "preemptible": False, "started_at": now.isoformat(),
             "pods": [{"task": TASK, "node": h, "gpus": gpus[h], "cpu": cpu_each, "memory_gib": mem} for h in hosts]}
    return _with_account_and_times(entry, job)


def _memory_gib(job: dict[str, Any], cpus_per_node: float) -> float:
    per_node, per_cpu = job.get("memory_per_node"), job.get("memory_per_cpu")
    if isinstance(per_node, int) and per_node > 0:
        return round(per_node / 1024, 3)
    if isinstance(per_cpu, int) and per_cpu > 0:
        return round(per_cpu * cpus_per_node / 1024, 3)
    return 0.0


def _gpu_ask(job: dict[str, Any], most: int) -> tuple[int, int] | str:
    """(nodes, GPUs per node) the job asks for, or why it cannot be read."""
    k = max(1, int(job.get("node_count") or 1))
    per_node = gres_items(job.get("tres_per_node") or "")
    per_job = gres_items(job.get("tres_per_job") or "")
    per_task = gres_items(job.get("tres_per_task") or "")
    if per_task:
        per_job = [(None, sum(c for _, c, _ in per_task) * max(1, int(job.get("tasks") or 1)), None)]
    if per_node:
        return k, sum(c for _, c, _ in per_node)
    noted = noted_gpus(job.get("comment"))
    if noted is not None and not per_job:  # killed between clearing the request and setting the chosen GPUs
        return k, noted
    if per_job:
        total = sum(c for _, c, _ in per_job)
        k = max(k, math.ceil(total / most)) if most else k
        if total % k:
            return f"{total} GPUs do not split evenly over {k} nodes; ask with --gpus-per-node"
        return k, total // k
    return k, 0


def _selector(job: dict[str, Any]) -> dict[str, str] | str:
    text = (job.get("features") or "").strip()
    if any(c in text for c in "|[]*"):
        return f"constraint {text!r}: only features joined by & are read"
    sel = {f"feature.{f.strip()}": "yes" for f in text.replace(",", "&").split("&") if f.strip()}
    part = (job.get("partition") or "").split(",")[0]
    if part:
        sel[f"partition.{part}"] = "yes"
    return sel


def build(sinfo_nodes: list[dict[str, Any]], squeue_jobs: list[dict[str, Any]], partitions: list[dict[str, str]],
          options: Options) -> Snapshot:
    """The request from recorded or live command output (tests feed recorded JSON here)."""
    tiers, wanted = _tiers(partitions), options.partitions
    now = options.now or datetime.now(timezone.utc)
    nodes: dict[str, dict[str, Any]] = {}
    pinnable: dict[str, bool] = {}
    busy: dict[str, dict[int, int]] = {}
    alloc: dict[str, float] = {}
    for n in sinfo_nodes:
        parts = _usable(n, wanted)
        if not parts or n.get("name") in nodes:
            continue
        nodes[n["name"]], pinnable[n["name"]], busy[n["name"]] = _node(n, parts, options.gpu_model)
        pinnable[n["name"]] = pinnable[n["name"]] and options.pin_gpus
        alloc[n["name"]] = float(n.get("alloc_cpus") or 0)
    running, pending, facts, skipped = [], [], {}, {}
    most = max((n["gpus"] for n in nodes.values()), default=0)
    # jobs holding GPUs first, so a released job is kept where it was let go only if its GPUs are still free
    for job in sorted(squeue_jobs, key=lambda j: str(j.get("job_state") or "") not in HOLDING):
        state = str(job.get("job_state") or "")
        jid = str(job.get("job_id"))
        prio = priority_of(job, tiers, options.qos_priority)
        base = JobFacts(jid, "running", job.get("comment") or "", int(job.get("node_count") or 1),
                        expand_hostlist(job.get("required_nodes") or ""), job.get("tres_per_node") or "",
                        job.get("tres_per_job") or "", 0, restarts=int(job.get("restart_cnt") or 0))
        if state in HOLDING:
            entry = _running(job, nodes, prio)
            if entry is not None:
                running.append(entry)
                facts[jid] = base
            continue
        if state != "PENDING" or job.get("dependency"):
            continue
        part = (job.get("partition") or "").split(",")[0]
        if wanted and part not in wanted:
            continue
        held = job.get("state_reason") in HELD
        if not held and (job.get("state_reason") == "JobHeldAdmin" or not job.get("priority")):
            continue
        if not held:
            entry = _released(job, nodes, prio, now, running, busy)
            if entry is not None:  # placed and let go moments ago: Slurm starts it there, nothing to decide
                running.append(entry)
                facts[jid] = base
                base.state = "released"
                continue
        ask, sel = _gpu_ask(job, most), _selector(job)
        if isinstance(ask, str) or isinstance(sel, str):
            skipped[jid] = ask if isinstance(ask, str) else str(sel)
            continue
        k, g = ask
        cpu = max(float(job.get("minimum_cpus_per_node") or 1), (job.get("cpus") or 1) / k)
        mem = _memory_gib(job, cpu)
        if job.get("shared") == "none":  # --exclusive: the whole node, as Slurm gives it
            cpu = max((n["cpu"] for n in nodes.values()), default=cpu)
        if k > 1 and g > 0 and 2 * g <= most:  # one slot per node: more than half a node's memory each
            mem = max(mem, round(0.51 * min((n["memory_gib"] for n in nodes.values()), default=0), 3))
        expected, max_h = _times(job)
        spec: dict[str, Any] = {"name": jid, "priority": prio, "submitted_at": _iso(job.get("submit_time")),
                                "tasks": [{"name": TASK, "replicas": k, "gpus": g, "cpu": cpu, "memory_gib": mem,
                                           "node_selector": sel}]}
        if job.get("account"):
            spec["team"] = job["account"]
        if expected:
            spec["expected_runtime_h"] = expected
        if max_h:
            spec["max_runtime_h"] = max_h
        pending.append(spec)
        base.state, base.gpus_per_node, base.slots = ("held" if held else "released"), g, k
        facts[jid] = base
    _hide_unclaimed(nodes, running, busy, alloc)
    policy = {"time_limit_s": 5.0, "deterministic": True, **options.policy}
    policy["now"] = now.isoformat()
    pools = sorted({n["pool"] for n in nodes.values()})
    request = {"api_version": "placement/v1",
               "cluster": {"pools": [{"name": p} for p in pools], "nodes": list(nodes.values()), "running": running},
               "jobs": pending, "policy": policy}
    return Snapshot(request, facts, pinnable, skipped)


def _hide_unclaimed(nodes: dict[str, dict[str, Any]], running: list[dict[str, Any]],
                    busy: dict[str, dict[int, int]], alloc: dict[str, float]) -> None:
    """GPUs and CPUs Slurm says are busy but no running entry holds stay out of new work."""
    claimed: dict[str, set[int]] = {n: set() for n in nodes}
    cpus: dict[str, float] = dict.fromkeys(nodes, 0.0)
    for r in running:
        for pod in r["pods"]:
            claimed[pod["node"]].update(pod["gpus"])
            cpus[pod["node"]] += pod["cpu"]
    for name, node in nodes.items():
        hidden = sorted(i for i, c in busy[name].items() if c and i not in claimed[name] and i < node["gpus"])
        if hidden:
            node["unhealthy_gpus"] = hidden
        extra = alloc[name] - cpus[name]
        if extra > 0:
            node["cpu"] = max(cpus[name], node["cpu"] - extra)
