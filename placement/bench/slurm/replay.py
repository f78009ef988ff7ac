"""A trace slice replayed into a real Slurm: what is sent (sbatch lines), the lab, and the clock that sends it.

Each trace job becomes one `sbatch` at its arrival / speedup, a `sleep` of its duration / speedup, with
the gang mapped to 8-GPU nodes the way the cycles bench maps it (`pods_of`: 12 GPUs -> 2 nodes x 6).
Both schedulers are told the same thing about time: the time limit, the scaled duration rounded up to
Slurm's unit (whole minutes) after a small slack, so Slurm never kills a job for running its full
length. With `estimates="exact"` placement also gets the scaled duration itself in `--comment=runtime=`,
which Slurm's backfill cannot be told (its time limits are minutes): that run is then not a like-for-like
comparison and says so.

The job first asks the controller what it holds (`scontrol show job -d`, in the background so the sleep
starts at once) into its output file: the GPU indices per node the bench checks (records.py).
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from placement.bench.cycles.state import TraceJob, pods_of
from placement.bench.slurm.records import Ask
from placement.slurm.lab import SlurmLab

#: Seconds added to a job's sleep before its time limit is rounded up: Slurm ends a job at its limit.
LIMIT_SLACK_S = 2.0
#: What each runtime estimate mode sends (see the module docstring).
ESTIMATES = ("limit", "exact")


@dataclass(frozen=True)
class Submission:
    """One sbatch of the replay: when (wall seconds after the start) and what."""

    at_s: float
    name: str
    nodes: int
    per_node: int
    sleep_s: float
    limit_min: int
    comment: str = ""

    def ask(self, speedup: float) -> Ask:
        return Ask(self.name, self.nodes, self.per_node, self.sleep_s * speedup)

    def argv(self, out_dir: Path) -> list[str]:
        """The sbatch command line (without the `sbatch` itself)."""
        args = ["--parsable", "-J", self.name, "-o", str(out_dir / "%j.out"), "--open-mode=append",
                f"-N{self.nodes}", f"--gpus-per-node={self.per_node}", f"--time={self.limit_min}"]
        if self.comment:
            args.append(f"--comment={self.comment}")
        args.append(f"--wrap=scontrol show job -d $SLURM_JOB_ID & sleep {self.sleep_s:.3f}; wait")
        return args


def submissions(jobs: list[TraceJob], speedup: float, estimates: str = "limit",
                gpus_per_node: int = 8) -> list[Submission]:
    """The replay of `jobs` (arrivals from 0) at `speedup`: one Submission each, in arrival order."""
    if estimates not in ESTIMATES:
        raise ValueError(f"unknown estimates {estimates!r}; known: {', '.join(ESTIMATES)}")
    out = []
    for j in sorted(jobs, key=lambda j: j.submit_s):
        pods = pods_of(j.gpus, gpus_per_node)
        sleep_s = j.duration_s / speedup
        limit = max(1, math.ceil((sleep_s + LIMIT_SLACK_S) / 60))
        comment = f"runtime={sleep_s:.3f}s" if estimates == "exact" else ""
        out.append(Submission(j.submit_s / speedup, j.name, len(pods), pods[0], sleep_s, limit, comment))
    return out


@dataclass
class BenchLab(SlurmLab):
    """The lab with the job completion log on; `hold` False drops job_submit.lua (Slurm decides alone).
    Everything else in slurm.conf is the same for both runs."""

    hold: bool = True

    @property
    def jobcomp(self) -> Path:
        return self.root / "jobcomp.txt"

    def _write_config(self) -> None:
        super()._write_config()
        lines = []
        for line in self.conf.read_text().splitlines():
            if line == "JobCompType=jobcomp/none":
                lines += ["JobCompType=jobcomp/filetxt", f"JobCompLoc={self.jobcomp}"]
            elif line == "JobSubmitPlugins=lua" and not self.hold:
                continue
            else:
                lines.append(line)
        self.conf.write_text("\n".join(lines) + "\n")


@dataclass
class Placer:
    """The placer as a service runs it: a subprocess started again at once when it dies or is killed."""

    argv: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    kills: list[float] = field(default_factory=list)  #: wall seconds of each SIGKILL
    mid_cycle: int = 0  #: kills that landed while a cycle was running (its log's last line a `begin`)
    crashes: int = 0  #: exits not caused by a kill

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def kill(self, at_s: float) -> None:
        """SIGKILL it (this process only, by its PID) and start it again."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
            self.mid_cycle += bool(tail and tail[0].startswith("begin"))
            with self.log.open("a") as out:
                out.write("killed\n")
        self.kills.append(at_s)
        self.start()

    def watch(self) -> None:
        """Start it again if it exited by itself."""
        if self.proc is not None and self.proc.poll() is not None:
            self.crashes += 1
            self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()


@dataclass
class Replayed:
    """What the driver saw: Slurm job id -> submission, and how late each sbatch went out."""

    ids: dict[str, Submission]
    lag_s: list[float]
    wall_s: float
    finished: bool


def replay(lab: BenchLab, subs: list[Submission], *, placer: Placer | None, kill_at: list[float],
           timeout_s: float, say: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
           poll_s: float = 1.0) -> Replayed:
    """Submit `subs` on their clock, SIGKILL the placer at `kill_at` (wall seconds), and wait until Slurm's
    completion log holds every job or `timeout_s` passes."""
    out_dir = lab.root / "jobs"
    out_dir.mkdir(parents=True, exist_ok=True)
    ids: dict[str, Submission] = {}
    lag: list[float] = []
    kills = sorted(kill_at)
    if placer is not None:
        placer.start()
    t0 = time.monotonic()
    i, next_poll, next_say = 0, 0.0, 0.0
    while True:
        now = time.monotonic() - t0
        while i < len(subs) and subs[i].at_s <= now:
            res = lab.run(["sbatch", *subs[i].argv(out_dir)])
            ids[res.stdout.strip().split(";")[0]] = subs[i]
            lag.append(time.monotonic() - t0 - subs[i].at_s)
            i += 1
            now = time.monotonic() - t0
        while kills and kills[0] <= now and placer is not None:
            placer.kill(kills.pop(0))
        if placer is not None:
            placer.watch()
        if now >= next_poll:
            next_poll = now + poll_s
            ended = _ended(lab)
            if now >= next_say:
                next_say = now + 60
                say(f"  {now:6.0f} s: {i}/{len(subs)} submitted, {len(ended & ids.keys())} ended")
            if i == len(subs) and ids.keys() <= ended and not kills:
                return Replayed(ids, lag, now, True)
            if now > timeout_s:
                return Replayed(ids, lag, now, False)
        upcoming = [t for t in (subs[i].at_s if i < len(subs) else None, kills[0] if kills else None, next_poll)
                    if t is not None]
        time.sleep(max(0.0, min(upcoming) - (time.monotonic() - t0)))


def _ended(lab: BenchLab) -> set[str]:
    """Job ids the completion log has a final end for (a requeue is logged too, but the job runs again).
    Cheap enough to read every poll: one line per job."""
    if not lab.jobcomp.exists():
        return set()
    return {line.split(" ", 1)[0].removeprefix("JobId=") for line in lab.jobcomp.read_text().splitlines()
            if line.startswith("JobId=") and " JobState=REQUEUE" not in line}
