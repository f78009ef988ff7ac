"""``placement bench fleet``: per-node GPU models and per-job speeds in the cycles simulator, the Gavel data and
job generator, the Gavel-like policy, our optimizer's requests on a mixed fleet, and the command line."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from placement.bench.cycles.peers import EasyBackfill
from placement.bench.cycles.peers_tiresias import TiresiasLike
from placement.bench.cycles.sim import InvalidDecision, SimConfig, simulate
from placement.bench.cycles.state import Decision, Running, TraceJob
from placement.bench.fleet import main
from placement.bench.fleet.data import CATALOG_MODEL, GAVEL_PATH, TABLE_PATH, extract, load
from placement.bench.fleet.gavel import GavelLike, max_min_allocation
from placement.bench.fleet.mix import Fleet, generate, gpu_memory_need, mixed_fleet, rate_for_load
from placement.bench.fleet.optimizer import MIN_SPEED, FleetOurs
from placement.bench.fleet.report import jain

H = 3600.0
V100, P100, K80 = CATALOG_MODEL["v100"], CATALOG_MODEL["p100"], CATALOG_MODEL["k80"]
GAVEL_MIRROR = Path("/work/.mirror/stanford-futuredata+gavel/repo")


class Script:
    """A policy that plays back fixed decisions, by cycle time."""

    name = "script"
    every_cycle = True

    def __init__(self, plays: dict[float, object]) -> None:
        self.plays = plays

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        play = self.plays.get(now_s)
        if play is None:
            return Decision()
        by_name = {j.name: j for j in queue} | {r.job.name: r.job for r in running}
        starts, preempt = play  # type: ignore[misc]
        return Decision(starts=[(by_name[n], nodes) for n, nodes in starts], preempt=list(preempt))


# -- the simulator --------------------------------------------------------------------------------


def test_a_gang_runs_at_its_slowest_node_and_keeps_work_across_a_migration() -> None:
    """2 h of V100 work: one hour split over a V100 and a K80 (speed 0.5) does half an hour of work; the
    checkpoint keeps it, and the job moves to two V100 nodes in the same decision for the remaining 1.5 h."""
    job = TraceJob("a", 0.0, 2 * H, 2, estimate_s=2 * H, speeds={V100: 1.0, K80: 0.5})
    cfg = SimConfig(nodes=3, gpus_per_node=1, cycle_s=H, checkpoint_h=1.0, node_models=(V100, K80, V100))
    plays = {0.0: ([("a", {0: 1, 1: 1})], []), H: ([("a", {0: 1, 2: 1})], ["a"])}
    res = simulate([job], Script(plays), cfg)
    assert res.drained and res.preemptions == 1
    assert res.finish_s[0] == pytest.approx(2.5 * H)
    assert res.lost_gpu_s == pytest.approx(0.0)
    assert res.jobs[0].done_s == pytest.approx(2 * H)


def test_without_a_checkpoint_a_slow_run_loses_its_wall_time() -> None:
    job = TraceJob("a", 0.0, 2 * H, 1, speeds={K80: 0.25})
    cfg = SimConfig(nodes=2, gpus_per_node=1, cycle_s=H, checkpoint_h=0.0, node_models=(V100, K80))
    res = simulate([job], Script({0.0: ([("a", {1: 1})], []), H: ([("a", {0: 1})], ["a"])}), cfg)
    assert res.finish_s[0] == pytest.approx(3 * H)  # the K80 hour is lost, then 2 h on the V100
    assert res.lost_gpu_s == pytest.approx(H)


def test_a_start_on_a_model_the_job_cannot_run_on_is_refused() -> None:
    job = TraceJob("a", 0.0, H, 1, speeds={V100: 1.0, K80: 0.0})
    cfg = SimConfig(nodes=2, gpus_per_node=1, cycle_s=H, node_models=(V100, K80))
    with pytest.raises(InvalidDecision, match="cannot run on"):
        simulate([job], Script({0.0: ([("a", {1: 1})], [])}), cfg)
    with pytest.raises(ValueError, match="node_models"):
        SimConfig(nodes=3, node_models=(V100, K80))


def _small_mix(n: int = 24, seed: int = 3) -> list[TraceJob]:
    return generate(n, seed, rate_for_load(1.5, 16)).jobs


@pytest.mark.parametrize("peer", [EasyBackfill, TiresiasLike])
def test_a_uniform_fleet_runs_as_the_simulator_did_before_models(peer: type) -> None:
    """All-V100 nodes with speed tables (V100 = 1.0) give exactly the run without models or speeds."""
    typed = _small_mix()
    plain = [replace(j, speeds=None) for j in typed]
    assert all(j.speeds is not None and j.speeds[V100] == 1.0 for j in typed)
    base = SimConfig(nodes=4, gpus_per_node=4, cycle_s=360.0, checkpoint_h=1.0)
    a = simulate(plain, peer(), base)
    b = simulate(typed, peer(), replace(base, node_models=(V100,) * 4))
    assert a.drained and b.drained
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    np.testing.assert_array_equal(a.first_start_s, b.first_start_s)
    assert (a.preemptions, a.lost_gpu_s, a.runs) == (b.preemptions, b.lost_gpu_s, b.runs)


# -- data and generator ---------------------------------------------------------------------------


def test_the_table_covers_gavel_s_mix() -> None:
    tp = load()
    assert len(tp.job_types) == 26
    assert sum(max(tp.scale_factors(t)) > 1 for t in tp.job_types) == 19  # Gavel's distributed templates
    assert tp.source["commit"] and "MIT" in tp.source["licence"]
    s = tp.speeds("ResNet-50 (batch size 128)", 4)
    assert s[V100] == 1.0 and s[K80] == 0.0 and s[P100] > 0  # not runnable on 4 K80s in Gavel's measurements


@pytest.mark.skipif(not GAVEL_MIRROR.exists() or shutil.which("git") is None, reason="no Gavel mirror here")
def test_the_table_matches_gavel_s_file() -> None:
    raw = json.loads(subprocess.run(["git", "-C", str(GAVEL_MIRROR), "show", f"HEAD:{GAVEL_PATH}"],
                                    check=True, capture_output=True, text=True).stdout)
    tp = load()
    for key, t, sf in [("('ResNet-18 (batch size 16)', 1)", "k80", 1), ("('LM (batch size 80)', 8)", "v100", 8),
                       ("('Recommendation (batch size 512)', 1)", "p100", 1), ("('A3C', 1)", "v100", 1)]:
        job = key.split("'")[1]
        assert tp.table[(job, sf)][t] == raw[t][key]["null"]
    shipped = json.loads(TABLE_PATH.read_text())
    assert extract(raw, tp.source["commit"], tp.source["read_on"]) == shipped  # the file rebuilds exactly


def test_the_generator_is_deterministic_per_seed() -> None:
    a, b, c = generate(50, 7, 2.0), generate(50, 7, 2.0), generate(50, 8, 2.0)
    assert a == b and a.jobs != c.jobs
    slow = generate(50, 7, 1.0)  # the same jobs at half the rate: arrivals twice as far apart
    assert slow.kinds == a.kinds and [j.duration_s for j in slow.jobs] == [j.duration_s for j in a.jobs]
    assert slow.jobs[-1].submit_s == pytest.approx(2 * a.jobs[-1].submit_s)


def test_the_generator_draws_gavel_s_distributions() -> None:
    mix = generate(4000, 1, 10.0)
    sizes = np.array([j.gpus for j in mix.jobs])
    for sf, p in ((1, 0.7), (2, 0.1), (4, 0.15), (8, 0.05)):
        assert abs((sizes == sf).mean() - p) < 0.025
    minutes = np.array([j.duration_s for j in mix.jobs]) / 60
    assert minutes.min() >= 10**1.5 - 1e-6 and minutes.max() <= 10**4 + 1e-6
    assert abs((minutes > 1000).mean() - 0.2) < 0.025
    multi = {mix.kinds[j.name][0] for j in mix.jobs if j.gpus > 1}
    assert not any(t.startswith(("Recommendation", "A3C", "CycleGAN")) for t in multi)
    assert mix.jobs[0].submit_s == 0.0


# -- the Gavel-like policy ------------------------------------------------------------------------


def test_max_min_gives_the_fast_gpu_to_the_job_that_gains_most() -> None:
    x = max_min_allocation(np.array([[1.0, 0.1], [1.0, 1.0]]), np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    np.testing.assert_allclose(x, [[1.0, 0.0], [0.0, 1.0]], atol=1e-6)


def test_gavel_starts_the_gainer_on_the_v100_and_the_other_on_the_k80() -> None:
    fleet = Fleet((K80, V100), 1)
    gainer = TraceJob("gainer", 0.0, H, 1, speeds={V100: 1.0, K80: 0.1})
    flat = TraceJob("flat", 0.0, H, 1, speeds={V100: 1.0, K80: 1.0})
    d = GavelLike(fleet).cycle(0.0, [flat, gainer], [], np.array([1, 1]), 1)
    assert {j.name: nodes for j, nodes in d.starts} == {"gainer": {1: 1}, "flat": {0: 1}}


def test_gavel_decisions_pass_the_simulator_and_drain() -> None:
    fleet = mixed_fleet(6, 4)
    jobs = generate(30, 2, rate_for_load(1.5, fleet.total_gpus)).jobs
    cfg = SimConfig(nodes=6, gpus_per_node=4, cycle_s=360.0, checkpoint_h=0.1, node_models=fleet.node_models)
    policy = GavelLike(fleet)
    res = simulate(jobs, policy, cfg)
    assert res.drained and res.invalid_decisions == 0 and policy.resets > 1
    assert res.lost_gpu_s == pytest.approx(0.0, abs=1e-6)  # preemptions only at round ends, checkpointed there


# -- our optimizer on the fleet, the report, the command line ------------------------------------


def test_our_requests_carry_models_speeds_and_memory_needs() -> None:
    fleet = Fleet((V100, P100, K80), 4)
    ok = TraceJob("ok", 0.0, H, 1, estimate_s=H, speeds={V100: 1.0, P100: 0.8, K80: 0.3})
    big = TraceJob("big", 0.0, H, 4, estimate_s=H, speeds={V100: 1.0, P100: 0.9, K80: 0.0})
    assert gpu_memory_need(ok) is None and gpu_memory_need(big) == 16.0
    free = np.array([4, 4, 4])
    aware = FleetOurs(fleet, speeds=True, name="ours").request(0.0, [ok, big], [], free, 4)
    blind = FleetOurs(fleet, speeds=False, name="agnostic").request(0.0, [ok, big], [], free, 4)
    assert [n["gpu_model"] for n in aware["cluster"]["nodes"]] == [V100, P100, K80]
    assert aware["jobs"][1]["speeds"] == {V100: 1.0, P100: 0.9, K80: MIN_SPEED}
    assert all("speeds" not in j for j in blind["jobs"])
    assert aware["jobs"][1]["tasks"][0]["gpu_memory_gib"] == blind["jobs"][1]["tasks"][0]["gpu_memory_gib"] == 16.0


def test_ours_puts_the_memory_bound_job_off_the_k80() -> None:
    fleet = Fleet((K80, V100), 4)
    big = TraceJob("big", 0.0, H, 4, estimate_s=H, speeds={V100: 1.0, K80: 0.0})
    d = FleetOurs(fleet, speeds=True, name="ours", time_limit_s=0.5).cycle(0.0, [big], [], np.array([4, 4]), 4)
    assert [nodes for _, nodes in d.starts] == [{1: 4}]


def test_jain() -> None:
    assert jain(np.array([1.0, 1.0, 1.0])) == pytest.approx(1.0)
    assert jain(np.array([1.0, 0.0])) == pytest.approx(0.5)


def test_the_command_line_prints_the_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    assert main(["--jobs", "4", "--nodes", "6", "--policies", "agnostic,gavel,ours", "--time-limit", "0.3",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| agnostic" in text and "| gavel" in text and "| ours" in text and "Jain" in text
    rows = json.loads(out.read_text())["rows"]
    assert [r["policy"] for r in rows] == ["agnostic", "gavel", "ours"]
    assert all(r["done"] == 4 for r in rows) and rows[0]["jct_vs_agnostic"] == 1.0
    # the agnostic loop is called when something changed; with speeds on a mixed fleet the call is LAS's, whose
    # classes move with attained service: the simulator calls it every round
    assert rows[0]["plan_calls"] <= 20 and rows[2]["plan_calls"] >= rows[0]["plan_calls"]
    assert main(["--policies", "nope"]) == 2
    assert main(["--nodes", "4"]) == 2  # a mixed fleet needs thirds
    assert main(["--nodes", "3", "--jobs", "100", "--policies", "gavel"]) == 2  # an 8-GPU job fits no model
