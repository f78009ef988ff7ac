"""One placement cycle for Slurm: read the cluster, plan, apply; and the loop that repeats it.

The cycle keeps nothing of its own between calls: each one reads Slurm afresh, so a placer killed
at any point (between an update and its release, mid-preemption) and started again converges: a
job updated but not released is still held and is placed again; a released job the plan no longer
wants is held back; a stale Comment is rewritten. Slurm itself never gives a GPU twice; the placer
only ever tells it where a held job may go. Plans from `placement.plan` are verified before they
return, so the cycle applies them as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from placement_models import Plan, format_errors
from pydantic import ValidationError

from placement.slurm.apply import Outcome, plan_steps, run_steps
from placement.slurm.commands import Slurm, SlurmError
from placement.slurm.read import Options, Snapshot, read


@dataclass
class Cycle:
    """What one cycle saw, decided and did."""

    snapshot: Snapshot
    plan: Plan | None
    outcome: Outcome

    def summary(self) -> str:
        """One line for the operator's log."""
        req = self.snapshot.request
        waiting = len(self.plan.pending) if self.plan else len(req["jobs"])
        text = (f"{len(req['cluster']['nodes'])} nodes, {len(req['cluster']['running'])} running, "
                f"{len(req['jobs'])} waiting to place: started {len(self.outcome.started)}, "
                f"preempted {len(self.outcome.preempted)}, waiting {waiting}, "
                f"{len(self.outcome.commands)} commands")
        if self.outcome.failed:
            text += "; failed: " + "; ".join(f"job {j}: {m}" for j, m in sorted(self.outcome.failed.items()))
        if self.snapshot.skipped:
            text += "; not read: " + "; ".join(f"job {j}: {m}" for j, m in sorted(self.snapshot.skipped.items()))
        return text


def cycle(slurm: Slurm, options: Options | None = None) -> Cycle:
    """Read, plan, apply once; SlurmError when Slurm cannot be read or the request it gives is not valid."""
    import placement

    snap = read(slurm, options)
    if not snap.request["cluster"]["nodes"]:
        if snap.request["jobs"]:
            raise SlurmError("no usable node in the partitions read (all down, drained or none listed)")
        return Cycle(snap, None, Outcome())
    try:
        plan = placement.plan(snap.request)
    except ValidationError as exc:
        raise SlurmError("the cluster as read is not a valid request: " + "; ".join(format_errors(exc))) from None
    return Cycle(snap, plan, run_steps(slurm, plan_steps(snap, plan)))


def queue_state(slurm: Slurm) -> str | None:
    """Slurm's queue as `wait` compares it; None when Slurm cannot say (the next cycle will report why)."""
    try:
        return slurm.queue_state()
    except SlurmError:
        return None


def wait(slurm: Slurm, seen: str | None, *, until: float, poll_s: float | None,
         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> bool:
    """Sleep until `until` (on `clock`), or until Slurm's queue is no longer `seen`, looking every `poll_s`.

    Why: a GPU freed just after a cycle would otherwise stay idle for the rest of the interval, and
    Slurm's own scheduler starts work on it at its next pass. Polling a short `squeue` (milliseconds)
    lets the interval stay long, for a quiet cluster, while a job that ends, starts or arrives brings
    the next cycle forward. True when a change cut the wait short. No `seen` (Slurm unreadable) or no
    `poll_s`: a plain sleep to `until`."""
    while True:
        left = until - clock()
        if left <= 0:
            return False
        if seen is None or not poll_s:
            sleep(left)
            return False
        sleep(min(poll_s, left))
        now = queue_state(slurm)
        if now is None:
            seen = None
        elif now != seen:
            return True


def run(slurm: Slurm, options: Options, *, interval_s: float, once: bool, say: Callable[[str], None],
        cycles: int | None = None, poll_s: float | None = None, sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic) -> int:
    """Cycle every `interval_s`, sooner when the queue changes (`poll_s`, see `wait`); with `once`, one cycle
    whose failure is the exit code (1). In the loop a failing cycle is reported and tried again next
    interval: a controller restart must not stop the placer."""
    done = 0
    while True:
        began = clock()
        # Taken before the read, so a job that ends while the cycle runs still wakes the next one.
        seen = queue_state(slurm) if poll_s and not once else None
        try:
            result = cycle(slurm, options)
            say(result.summary())
            status = 1 if result.outcome.failed else 0
        except SlurmError as exc:
            say(f"error: {exc}")
            status = 1
        done += 1
        if once or (cycles is not None and done >= cycles):
            return status
        wait(slurm, seen, until=began + interval_s, poll_s=poll_s, sleep=sleep, clock=clock)
