"""The ``preempt`` family of the instance library: a full cluster where Kueue-like rules decide who is evicted.

Why this exists: the other families never evict, so a solver tuned on them never meets the part of the
model that chooses victims with the placements (``placement/compile/preemption.py``). Here the cluster is
about 80 % busy, most running work is preemptible, and the queue holds work of higher classes, so the plan
trades placements against evictions under the rules operators write in Kueue's ClusterQueue
``preemption`` (``placement_models.PreemptionRules``):

* four priority classes, as Kueue WorkloadPriorityClasses: ``best-effort`` 0, ``batch`` 10,
  ``research`` 50, ``production`` 100 (the priority mix of :func:`placement.generate.generate`);
  running work of the three lower classes is preemptible (``best-effort`` always), ``production`` never;
* the five teams of ``generate`` in one cohort, with nominal GPU quotas drawn around their share of the
  queue (so some teams run above their nominal, borrowing, and may be reclaimed) and borrowing limits;
* each team's own rules (``Team.preemption``), the policy's as the default for any other: within the team
  lower priority (``vision``: also newer jobs of equal priority; ``speech``: never), reclaim within the
  cohort (any, or lower priority only), borrow within the cohort for two teams up to a threshold;
* running jobs carry ``started_at`` and ``checkpointed_at`` (a victim loses the GPU-hours since its last
  checkpoint), ``policy.min_runtime_s`` protects jobs started in the last 10 minutes.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from placement.generate import REFERENCE_TIME, generate

#: Kueue-like WorkloadPriorityClasses over generate's priority levels (the names are documentation only:
#: the wire format carries the integers).
PRIORITY_CLASSES: dict[str, int] = {"best-effort": 0, "batch": 10, "research": 50, "production": 100}
#: Share of the healthy GPUs running work holds: full enough that most high-class jobs need a victim.
RUNNING_SHARE = 0.8
#: Per team, the rules its pending jobs preempt by (Team.preemption); teams not listed use the policy's.
TEAM_RULES: dict[str, dict[str, Any]] = {
    "research": {"within_team": "lower_priority", "reclaim_within_cohort": "any",
                 "borrow_within_cohort": {"policy": "lower_priority", "max_priority_threshold": 10}},
    "vision": {"within_team": "lower_or_newer_equal_priority", "reclaim_within_cohort": "lower_priority"},
    "speech": {"within_team": "never", "reclaim_within_cohort": "any"},
    "serving": {"within_team": "lower_priority", "reclaim_within_cohort": "any",
                "borrow_within_cohort": {"policy": "lower_priority", "max_priority_threshold": 50}},
}
#: The policy's rules: Kueue's defaults for a ClusterQueue that preempts (reclaim any, no borrowing).
POLICY_RULES: dict[str, Any] = {"within_team": "lower_priority", "reclaim_within_cohort": "any"}
COHORT = "org"
#: Jobs running less than this may not be preempted (seconds).
MIN_RUNTIME_S = 600.0


def preempt_instance(n: int, seed: int) -> dict[str, Any]:
    """The request on ``n`` nodes (2n pending jobs) for one seed; deterministic."""
    req = generate(n, 2 * n, seed, running_share=RUNNING_SHARE)
    rng = np.random.default_rng(seed + 1)
    now = REFERENCE_TIME
    top = max(PRIORITY_CLASSES.values())
    for run in req["cluster"]["running"]:
        run["preemptible"] = run["priority"] == 0 or (run["priority"] < top and bool(rng.random() < 0.6))
        started = _parse(run["started_at"])
        every_h = float(rng.choice([0.5, 1.0, 2.0, 4.0]))
        ran_h = (now - started).total_seconds() / 3600.0
        last = math.floor(ran_h / every_h) * every_h  # the last checkpoint at or before now
        run["checkpointed_at"] = _iso(started + timedelta(hours=last))
    teams = sorted({j["team"] for j in req["jobs"]} | {r["team"] for r in req["cluster"]["running"]})
    healthy = sum(nd["gpus"] - len(nd.get("unhealthy_gpus", [])) for nd in req["cluster"]["nodes"])
    asked = {t: sum(_gpus(j) for j in req["jobs"] if j["team"] == t) for t in teams}
    total = max(1, sum(asked.values()))
    req["teams"] = []
    for t in teams:
        nominal = int(math.floor(0.9 * healthy * asked[t] / total * float(rng.uniform(0.6, 1.4))))
        team: dict[str, Any] = {"name": t, "cohort": COHORT,
                                "quota": {"gpus": {"nominal": nominal, "borrowing_limit": max(8, nominal)}}}
        if t in TEAM_RULES:
            team["preemption"] = TEAM_RULES[t]
        req["teams"].append(team)
    req["cohorts"] = [{"name": COHORT}]
    req["policy"] = {"now": _iso(now), "preemption": POLICY_RULES,
                     "min_runtime_s": MIN_RUNTIME_S}
    return req


def _gpus(job: dict[str, Any]) -> int:
    return sum(t.get("gpus", 0) * t.get("replicas", 1) for t in job["tasks"])


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
