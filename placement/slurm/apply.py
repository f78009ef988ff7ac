"""A plan as `scontrol` commands: where each started job runs, which GPUs, who is preempted, why others wait.

Slurm stays the only keeper of state, so every command is derived from the difference between what
Slurm reports now and what the plan wants, job by job:

* a job to start: `update NumNodes=k ReqNodeList=<all k nodes> StartTime=now` (ReqNodeList means "at
  least these", so the list is always whole; StartTime undoes the 120 s a requeue adds), `TresPerJob=`
  when it asked GPUs per job, `TresPerNode=` (updates merge: clear first) then one GRES type per chosen
  GPU index (`gres:gpu:g1:1,...`) when every node pins indices and the indices are the same on every node
  (Slurm gives a multi-node job the same types on each), else the count; then `release`. A job already
  released where the plan wants it gets nothing; one released elsewhere is held back first.
* a preemption: `requeuehold` (never plain `requeue`: job_submit.lua runs only at submission, so Slurm
  would start it by itself); the job comes back held and is placed again in a later cycle.
* a waiting job: its pending reason and estimated start after `placement:` in its Comment (the user's
  text before it is kept); a released job the plan leaves waiting is held again.

Commands that would change nothing are not issued, so a cycle with nothing new issues none. Commands of
one job run in order and stop at its first failure (a job never released half-updated by this cycle;
the next cycle sees its state and finishes or redoes it).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from placement_models import Plan

from placement.slurm.commands import Slurm, SlurmError
from placement.slurm.read import JobFacts, Snapshot
from placement.slurm.syntax import MARK, STARTING, gres_items, with_note

#: Longest note written into a Comment (Slurm keeps more, squeue's columns show less).
MAX_NOTE = 240
#: Estimated starts further out than this are not written (see _when).
HORIZON = timedelta(days=90)
#: Taking a released job back is `scontrol uhold`, never `hold`: `hold` run by an admin (the placer runs as
#: SlurmUser or root) leaves the job `JobHeldAdmin`, which the reader does not read, so the job would wait
#: forever; `uhold` leaves it `JobHeldUser`, as job_submit.lua does (measured on 22.05.8).
HOLD = "uhold"


@dataclass
class Step:
    """The commands of one job, run in order."""

    job: str
    commands: list[tuple[str, ...]] = field(default_factory=list)


@dataclass
class Outcome:
    """What one apply did: commands run, jobs started and preempted, failures (job -> Slurm's message)."""

    commands: list[tuple[str, ...]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def tres_for(nodes: dict[str, list[int]], pinnable: dict[str, bool]) -> str:
    """The TresPerNode value for GPUs chosen per node: index types when possible, else the count."""
    sets = {tuple(sorted(g)) for g in nodes.values()}
    count = max((len(g) for g in nodes.values()), default=0)
    if count == 0:
        return ""
    if len(sets) == 1 and all(pinnable.get(n, False) for n in nodes):
        return ",".join(f"gres:gpu:g{i}:1" for i in next(iter(sets)))
    return f"gres:gpu:{count}"


def _same_tres(current: str, wanted: str) -> bool:
    def norm(text: str) -> list[tuple[str | None, int]]:
        return sorted((k or "", c) for k, c, _ in gres_items(text))
    return norm(current) == norm(wanted)


def start_step(f: JobFacts, nodes: dict[str, list[int]], pinnable: dict[str, bool]) -> Step:
    """The commands that start job `f` on `nodes` (node -> GPU indices); none when it is already so."""
    step = Step(f.id)
    names = sorted(nodes)
    tres = tres_for(nodes, pinnable)
    where_ok = f.node_count == len(names) and sorted(f.req_nodes) == names
    tres_ok = _same_tres(f.tres_per_node, tres) and not f.tres_per_job
    if f.state == "released":
        if where_ok and tres_ok:
            return step
        step.commands.append(("scontrol", HOLD, f.id))
    if not where_ok or f.state == "released" or f.restarts:  # a requeued job's begin time is 120 s ahead
        step.commands.append(("scontrol", "update", f"JobId={f.id}", f"NumNodes={len(names)}",
                              f"ReqNodeList={','.join(names)}", "StartTime=now"))
    clearing = bool(f.tres_per_job) or not _same_tres(f.tres_per_node, tres)
    if clearing and tres:  # what the job asks survives a kill between the clear and the set (read.py reads it)
        note = with_note(f.comment, f"{STARTING} {f.gpus_per_node}")
        if note != f.comment:
            step.commands.append(("scontrol", "update", f"JobId={f.id}", f"Comment={note}"))
    if f.tres_per_job:
        step.commands.append(("scontrol", "update", f"JobId={f.id}", "TresPerJob="))
    if not _same_tres(f.tres_per_node, tres):
        step.commands.append(("scontrol", "update", f"JobId={f.id}", "TresPerNode="))
        if tres:
            step.commands.append(("scontrol", "update", f"JobId={f.id}", f"TresPerNode={tres}"))
    step.commands.append(("scontrol", "release", f.id))
    return step


def note_for(reason: str, constraint: str | None, start: str | None) -> str:
    """The text after `placement:` in a waiting job's Comment."""
    head = f"waiting ({constraint})" if constraint else "waiting"
    text = f"{head}: {' '.join(reason.split())}"
    tail = f"; est. start {start}" if start else ""
    if len(text) + len(tail) > MAX_NOTE:
        text = text[: MAX_NOTE - len(tail) - 3] + "..."
    return text + tail


def _when(start: datetime | None, now: datetime | None) -> str | None:
    """An estimated start as a Comment shows it; none when unknown or beyond HORIZON (work without time limits
    gives the planner no end to count from, and a date a year out says nothing a user can use)."""
    if start is None or (now is not None and start - now > HORIZON):
        return None
    return start.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


def plan_steps(snap: Snapshot, plan: Plan) -> list[Step]:
    """Every job's commands for this plan, preemptions first (their room is what some starts wait for)."""
    steps: list[Step] = []
    raw_now = snap.request.get("policy", {}).get("now") if snap.request else None
    plan_now = datetime.fromisoformat(raw_now) if raw_now else None
    for p in plan.preemptions:
        f = snap.jobs.get(p.job)
        if f is not None and f.state == "running":
            steps.append(Step(p.job, [("scontrol", "requeuehold", p.job)]))
    chosen: dict[str, dict[str, list[int]]] = {}
    for a in plan.assignments:
        chosen.setdefault(a.job, {}).setdefault(a.node, []).extend(a.gpus)
    for job, nodes in sorted(chosen.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
        f = snap.jobs.get(job)
        if f is None or f.state == "running":
            continue
        if len(nodes) != f.slots:  # Slurm gives each node of a job one slot: two on one node is not its shape
            steps.append(_waiting(f, f"the plan put {f.slots} node slots on {len(nodes)} nodes; placed again "
                                  "next cycle", None, None))
            continue
        step = start_step(f, nodes, snap.pinnable)
        if MARK in f.comment and not any(c[-1].startswith("Comment=") for c in step.commands):
            step.commands.insert(0, ("scontrol", "update", f"JobId={job}", f"Comment={with_note(f.comment, '')}"))
        if step.commands:
            steps.append(step)
    for pend in plan.pending:
        f = snap.jobs.get(pend.job)
        if f is None or f.state == "running":
            continue
        start = _when(pend.estimated_start, plan_now)
        steps.append(_waiting(f, pend.reason, pend.constraint, start))
    steps = [s for s in steps if s.commands]
    for f in snap.jobs.values():
        if f.state == "running" and MARK in f.comment:
            steps.append(Step(f.id, [("scontrol", "update", f"JobId={f.id}", f"Comment={with_note(f.comment, '')}")]))
    return steps


def _waiting(f: JobFacts, reason: str, constraint: str | None, start: str | None) -> Step:
    """A job the plan leaves waiting: held (again, if it was released) with the reason in its Comment."""
    step = Step(f.id)
    if f.state == "released":
        step.commands.append(("scontrol", HOLD, f.id))
    comment = with_note(f.comment, note_for(reason, constraint, start))
    if comment != f.comment:
        step.commands.append(("scontrol", "update", f"JobId={f.id}", f"Comment={comment}"))
    return step


def run_steps(slurm: Slurm, steps: list[Step]) -> Outcome:
    """Run the steps; a job's failure stops that job's steps only and is reported, not raised."""
    out = Outcome()
    for step in steps:
        for cmd in step.commands:
            try:
                slurm.change(cmd)
            except SlurmError as exc:
                out.failed[step.job] = str(exc)
                break
            out.commands.append(cmd)
            if cmd[1] == "release":
                out.started.append(step.job)
            elif cmd[1] == "requeuehold":
                out.preempted.append(step.job)
    return out


def printer(write: Callable[[str], None]) -> Callable[[tuple[str, ...]], None]:
    """A dry-run hook that writes each command as a shell line."""
    return lambda cmd: write(shlex.join(cmd))
