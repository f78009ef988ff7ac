"""openb with departures (placement.bench.openb.loop): lifetimes, exact start times after a departure,
FIFO-with-backfill retry order, the independent capacity audit, load compression, and the command line.

Everything runs on tiny synthetic CSVs written to tmp_path; times are seconds, the cycle is 60 s.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from openb_helpers import node_row, pod_row, write_data

from placement.bench.openb.cli import main
from placement.bench.openb.cluster import ClusterState
from placement.bench.openb.loop import LoopPod, audit, loop_trace_from_rows, simulate
from placement.bench.openb.loop_load import GAP_CAP_S, compress, offered_load, subset_nodes
from placement.bench.openb.registry import make_policy
from placement.bench.openb.trace import Pod, nodes_from_rows

TIME_FIELDS = ["creation_time", "deletion_time", "scheduled_time"]


def timed(name: str, cpu: int, num: int, milli: int, arrive: int, leave: int | None, spec: str = "",
          scheduled: int | None = None) -> dict[str, str]:
    row = pod_row(name, cpu, num, milli, spec)
    row["creation_time"] = str(arrive)
    row["deletion_time"] = "" if leave is None else str(leave)
    row["scheduled_time"] = str(arrive if scheduled is None else scheduled)
    return row


def run(node_rows: list[dict[str, str]], pod_rows: list[dict[str, str]], policy: str = "fgd", cycle_s: float = 60.0):
    nodes = nodes_from_rows(node_rows)
    lt = loop_trace_from_rows("t", pod_rows)
    res = simulate(nodes, lt.trace, lt.pods, make_policy(policy, 42), seed=42, cycle_s=cycle_s)
    starts = {p.pod.name: s for p, s in zip(lt.pods, res.start.tolist(), strict=True)}
    return res, starts


PEERS_AND_OURS = ["fgd", "bestfit", "bench-cpsat-online"]

# ----------------------------------------------------------------------------------- reading the times


def test_lifetime_from_scheduled_else_creation_else_end_of_trace() -> None:
    lt = loop_trace_from_rows(
        "t",
        [
            timed("a", 1000, 1, 1000, 0, 500, scheduled=100),  # scheduled known: 500 − 100
            {**timed("b", 1000, 1, 1000, 50, 300), "scheduled_time": ""},  # no scheduled: 300 − 50
            timed("c", 1000, 1, 1000, 200, None),  # no deletion: runs to the end of the trace (500)
        ],
    )
    life = {p.pod.name: p.lifetime for p in lt.pods}
    assert life == {"a": 400.0, "b": 250.0, "c": 300.0}
    assert [p.pod.name for p in lt.pods] == ["a", "b", "c"]  # arrival order


# ------------------------------------------------------------------------------------------- the loop


@pytest.mark.parametrize("policy", PEERS_AND_OURS)
def test_departure_frees_the_gpu_and_the_waiting_pod_starts_at_the_next_tick(policy: str) -> None:
    nodes = [node_row("n0", 64000, 1)]
    pods = [timed("a", 1000, 1, 1000, 0, 100), timed("b", 1000, 1, 1000, 10, 160)]
    res, start = run(nodes, pods, policy)
    # a leaves at 100; ticks fall at 0 + k·60, so b starts at 120, not at 100 and not at 10.
    assert start == {"a": 0.0, "b": 120.0}
    assert res.invalid == 0 and res.never_started == 0 and res.waiting_end == 1


@pytest.mark.parametrize("policy", PEERS_AND_OURS)
def test_fifo_retry_with_backfill(policy: str) -> None:
    nodes = [node_row("n0", 64000, 2)]
    pods = [
        timed("a", 1000, 1, 1000, 0, 100),  # one GPU until 100
        timed("x", 1000, 1, 1000, 1, 1001),  # the other GPU until 1001
        timed("b", 1000, 2, 1000, 10, 60),  # waits: needs both GPUs
        timed("c", 1000, 1, 1000, 20, 70),  # waits: both busy
        timed("d", 1000, 1, 1000, 30, 80),  # waits, behind c
    ]
    res, start = run(nodes, pods, policy)
    # Tick 120: b is tried first and does not fit (x holds a GPU); c, next in arrival order, backfills;
    # d finds no GPU left. c leaves at 120 + 50 = 170: tick 180 starts d (b still does not fit).
    # x leaves at 1001, d at 180 + 50 = 230: b starts at tick 1020.
    assert start == {"a": 0.0, "x": 1.0, "b": 1020.0, "c": 120.0, "d": 180.0}
    assert res.invalid == 0


def test_fifo_takes_the_oldest_before_a_younger_pod_that_would_pack_better() -> None:
    nodes = [node_row("n0", 64000, 1)]
    pods = [timed("a", 1000, 1, 1000, 0, 100), timed("b", 1000, 1, 600, 10, 200), timed("c", 1000, 1, 400, 20, 200)]
    _, start = run(nodes, pods, "bestfit")
    # At tick 120 b (older) goes first; c fits beside it on the same GPU (600 + 400 = 1000).
    assert start["b"] == 120.0 and start["c"] == 120.0
    pods[1] = timed("b", 1000, 1, 1000, 10, 200)  # now b takes the whole GPU and c waits for it
    _, start = run(nodes, pods, "bestfit")
    # b lives 200 − 10 = 190 s from its start at 120: it leaves at 310, and c starts at the next tick.
    assert start["b"] == 120.0 and start["c"] == 360.0


def test_batch_policy_decides_at_ticks_only_and_stays_valid() -> None:
    nodes = [node_row("n0", 64000, 2), node_row("n1", 32000, 1, model="B")]
    pods = [timed(f"p{i}", 8000, 1, 500 if i % 2 else 1000, 5 * i, 5 * i + 200, spec="B" if i % 3 == 0 else "")
            for i in range(12)]
    res, start = run(nodes, pods, "bench-cpsat-batch50")
    assert res.invalid == 0
    assert all(math.isnan(s) or s % 60 == 0 for s in start.values())  # only at ticks
    assert res.never_started == 0 and res.unfit == 0


# ------------------------------------------------------------------------------------ capacity audit


def test_audit_flags_an_overfull_gpu_a_wrong_model_and_a_state_mismatch() -> None:
    nodes = nodes_from_rows([node_row("n0", 64000, 2, model="A")])
    big = Pod("big", 1000, 1024, 1, 700)
    assert audit(nodes, [(big, (0, (0,))), (big, (0, (1,)))]) == []
    bad = audit(nodes, [(big, (0, (0,))), (Pod("b2", 1000, 1024, 1, 400), (0, (0,)))])
    assert len(bad) == 1 and "over-full" in bad[0]
    wrong = audit(nodes, [(Pod("v", 1000, 1024, 1, 500, spec=("V100",)), (0, (1,)))])
    assert any("outside" in b for b in wrong)
    state = ClusterState(nodes)  # nothing placed in it, yet one pod is said to run: mismatch
    assert any("disagree" in b for b in audit(nodes, [(big, (0, (0,)))], state))


class Overfilling:
    """A deliberately broken policy: always GPU 0 of node 0, whether it fits or not."""

    name = "overfill"

    def prepare(self, ctx) -> None:
        pass

    def choose(self, state, pod):
        return 0, (0,)


def test_an_overfull_decision_is_refused_and_counted_invalid() -> None:
    nodes = nodes_from_rows([node_row("n0", 64000, 2)])
    lt = loop_trace_from_rows("t", [timed("a", 1000, 1, 800, 0, 500), timed("b", 1000, 1, 800, 10, 500)])
    res = simulate(nodes, lt.trace, lt.pods, Overfilling(), cycle_s=60)
    assert res.invalid >= 1 and "idle milli" in res.invalid_notes[0]
    assert res.start[1] == 540.0  # b was not bound beside a; it starts at the tick after a leaves (500)


class Cheating(Overfilling):
    """Worse: tells the cluster GPU 0 is idle again before binding there, so ``place`` accepts it."""

    name = "cheat"

    def choose(self, state, pod):
        state.idle[0, 0] = 1000
        return 0, (0,)


def test_the_audit_catches_what_the_state_was_tricked_into_accepting() -> None:
    nodes = nodes_from_rows([node_row("n0", 64000, 2)])
    lt = loop_trace_from_rows("t", [timed("a", 1000, 1, 800, 0, 500), timed("b", 1000, 1, 800, 10, 500),
                                    timed("c", 1000, 1, 800, 2000, 2100)])
    res = simulate(nodes, lt.trace, lt.pods, Cheating(), cycle_s=60)
    assert res.invalid >= 1 and any("over-full" in n for n in res.invalid_notes)


# -------------------------------------------------------------------------------------- contention


def _spread(n: int, gap: int, life: int, milli: int = 1000) -> list[LoopPod]:
    return [LoopPod(Pod(f"p{i}", 1000, 1024, 1, milli), float(i * gap), float(life)) for i in range(n)]


@pytest.mark.parametrize("target", [0.3, 0.8, 1.5])
def test_compression_reaches_the_offered_load_asked_and_keeps_lifetimes(target: float) -> None:
    pods = _spread(40, 600, 1800)  # real time: 3 GPUs' worth of pods on average
    capacity = 10 * 1000
    out, c = compress(pods, capacity, target)
    assert offered_load(out, capacity) == pytest.approx(target, rel=1e-6)
    assert [p.lifetime for p in out] == [p.lifetime for p in pods]
    gaps = {round(b.arrival - a.arrival, 6) for a, b in zip(out, out[1:], strict=False)}
    assert gaps == {round(600 * c, 6)}  # one factor for every gap


def test_compression_caps_long_idle_gaps_and_refuses_an_unreachable_load() -> None:
    pods = _spread(3, 100, 50)
    pods.append(LoopPod(Pod("late", 1000, 1024, 1, 1000), 100 + 10 * GAP_CAP_S, 50.0))
    out, c = compress(pods, 1000, 0.2)
    assert out[-1].arrival - out[-2].arrival == pytest.approx(GAP_CAP_S * c)
    with pytest.raises(ValueError, match="--load 50 is out of reach"):
        compress(pods, 1000, 50)


def test_node_subset_keeps_every_model_and_the_mix() -> None:
    rows = [node_row(f"a{i:02}", 64000, 8, "A") for i in range(20)] + [node_row("b0", 32000, 2, "B")]
    sub = subset_nodes(nodes_from_rows(rows), 0.25)
    assert sub.size == 6 and sub.models == ("A", "B") and sorted(set(sub.model.tolist())) == [0, 1]
    assert sub.names[:5] == ("a00", "a04", "a08", "a12", "a16")


# ------------------------------------------------------------------------------------ command line


def _tiny(tmp_path: Path) -> Path:
    folder = write_data(tmp_path / "data", [node_row("n0", 64000, 2), node_row("n1", 64000, 1, "B")], {})
    pods = [timed(f"p{i:02}", 4000, 1, [1000, 500, 250][i % 3], 30 * i, 30 * i + 400) for i in range(20)]
    with (folder / "openb_pod_list_tiny.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(pods[0]))
        w.writeheader()
        w.writerows(pods)
    return folder


def test_cli_departures_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, out = _tiny(tmp_path), tmp_path / "loop.json"
    argv = ["--protocol", "departures", "--data", str(folder), "--trace", "tiny", "--policies",
            "fgd,bestfit,cpsat-online", "--load", "1.2", "--cycle-s", "30", "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "| policy" in text and "| fgd" in text and "offered load 1.200" in text
    got = json.loads(out.read_text())
    assert [r["policy"] for r in got["rows"]] == ["fgd", "bestfit", "bench-cpsat-online"]  # the old name, renamed
    assert all(r["invalid"] == 0 and r["started"] + r["never_started"] == 20 for r in got["rows"])
    assert any(r["wait_max_h"] > 0 for r in got["rows"])  # contended: someone waited


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--cycle-s", "0"], "--cycle-s"),
        (["--load", "-1"], "--load"),
        (["--node-frac", "1.5"], "--node-frac"),
        (["--limit-pods", "0"], "--limit-pods"),
        (["--policies", "nope"], "--policies"),
        (["--load", "500"], "--load"),
    ],
)
def test_cli_rejects_bad_input_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra, option) -> None:
    argv = ["--protocol", "departures", "--data", str(_tiny(tmp_path)), "--trace", "tiny", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and option in err


def test_cli_departure_options_are_refused_under_the_arrival_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data", str(_tiny(tmp_path)), "--trace", "tiny", "--load", "1"]) == 2
    assert "error: --load only applies to --protocol departures" in capsys.readouterr().err
