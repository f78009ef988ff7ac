"""The preempt family: Kueue-like rules over a full cluster of preemptible work."""

from __future__ import annotations

from placement_models import PlacementRequest

from placement.bench import library
from placement.bench.library_preempt import PRIORITY_CLASSES, TEAM_RULES, preempt_instance


def test_the_request_carries_the_rules_and_victims() -> None:
    data = preempt_instance(16, 1)
    req = PlacementRequest.model_validate(data)
    assert req.policy.preemption_rules is not None and req.policy.min_runtime_s > 0
    assert {t.cohort for t in req.teams} == {"org"} and [c.name for c in req.cohorts] == ["org"]
    assert {t.name for t in req.teams if t.preemption is not None} == set(TEAM_RULES) & {t.name for t in req.teams}
    running = req.cluster.running
    assert any(r.preemptible for r in running)
    assert not any(r.preemptible for r in running if r.priority == max(PRIORITY_CLASSES.values()))
    assert all(r.started_at <= r.checkpointed_at <= req.policy.now for r in running)
    assert {j.priority for j in req.jobs} <= set(PRIORITY_CLASSES.values())


def test_small_instance_preempts_in_a_short_solve() -> None:
    from placement.api import plan

    data = library.instance("preempt", "S")
    data["policy"].update(time_limit_s=1.0, workers=1)
    result = plan(data)  # verified inside plan
    assert result.preemptions, "the S instance should need victims"
    assert all(p.rule for p in result.preemptions)
