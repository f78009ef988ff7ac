"""The report and the annotation: who is idle, who over-declares, what a MIG instance would save."""

from __future__ import annotations

import builtins
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from placement_models import PlacementRequest
from usage_synth import gpu_rows, interleave, node, request, write_csv

from placement import plan
from placement.usage import report
from placement.usage.annotate import annotate, idle_free_cards, observations, reclaimed
from placement.usage.metrics import read_usage
from placement.usage.report import Options, analyse

N = 400  # samples per GPU


def cluster_request() -> dict[str, Any]:
    """n1 and n2, four H100s each. 'serve' (running) holds n1 GPU 0; 'inf' and 'nb' are pending."""
    running = [{"job": "serve", "team": "web", "pods": [{"task": "s", "node": "n1", "gpus": [0]}]}]
    jobs = [{"name": "inf", "team": "ml", "tasks": [{"name": "w", "gpus": 1, "gpu_memory_gib": 32}]},
            {"name": "nb", "team": "ml", "right_size": True, "tasks": [{"name": "w", "gpus": 1}]}]
    teams = [{"name": "web"}, {"name": "ml"}, {"name": "research"}]
    data = request([node("n1"), node("n2")], jobs, running, allow_mig_changes=True)
    data["teams"] = teams
    return data


def cluster_metrics(path: Path) -> Path:
    """n1/gpu0: serve at 5 %, 1 GiB. n1/gpu1: nobody, 3 %. n1/gpu2: inf-0 at 60 %, 8 GiB. n1/gpu3: train-0
    (not in the request) at 90 %, 70 GiB. n2/gpu1-3: big at 80 %, 40 GiB. nb-0 at 8 %, 4 GiB on n3/gpu0, a
    node the request does not have (it ran there last week; DCGM's modelName names its GPU)."""
    rows = [gpu_rows("n1", 0, np.full(N, 5.0), mem=1.0, pod="serve-0", namespace="web"),
            gpu_rows("n1", 1, np.full(N, 3.0), mem=0.0),
            gpu_rows("n1", 2, np.full(N, 60.0), mem=8.0, pod="inf-0", namespace="ml"),
            gpu_rows("n1", 3, np.full(N, 90.0), mem=70.0, pod="train-0", namespace="research"),
            gpu_rows("n3", 0, np.full(N, 8.0), mem=4.0, pod="nb-0", namespace="ml", model="NVIDIA H100 80GB HBM3"),
            *(gpu_rows("n2", g, np.full(N, 80.0), mem=40.0, pod=f"big-{g}", namespace="research")
              for g in (1, 2, 3))]
    return write_csv(path, interleave(*rows))


@pytest.fixture
def analysis(tmp_path: Path) -> report.Analysis:
    req = PlacementRequest.model_validate(cluster_request())
    return analyse(read_usage(cluster_metrics(tmp_path / "m.csv")), req, Options())


def test_reclaim_candidates_say_who_holds_them(analysis: report.Analysis) -> None:
    idle = {g.info.name: g for g in analysis.idle}
    assert set(idle) == {"n1/gpu0", "n1/gpu1", "n3/gpu0"}
    assert idle["n1/gpu0"].held_by == "serve" and not idle["n1/gpu0"].free_in_request
    assert idle["n1/gpu1"].free_in_request and idle["n1/gpu1"].jobs == []
    assert not idle["n3/gpu0"].in_request and idle["n3/gpu0"].jobs == ["nb"]
    assert idle_free_cards(analysis) == [("n1", 1)]


def test_jobs_teams_and_right_sizing(analysis: report.Analysis) -> None:
    jobs = {j.name: j for j in analysis.jobs}
    assert set(jobs) == {"serve", "inf", "nb", "train", "big"}  # pods matched to request names, else stems
    inf = jobs["inf"]
    assert (inf.state, inf.team, inf.declared_gib, inf.declared_from) == ("pending", "ml", 32.0, "gpu_memory_gib")
    assert inf.memory_share == pytest.approx(0.25)
    assert inf.unused == pytest.approx(0.75)
    # 8 GiB × 1.25 fits 1g.10gb, but 60 % GPU util × 1.25 needs 75 % of the SMs and 1g has 1/7: no saving.
    assert inf.suggestion.profile == "1g.10gb" and inf.suggestion.gpus_saved == 0.0
    assert inf.suggestion.note == "too busy for it: 60% GPU util × 1.25 needs 75% of the SMs, 1g.10gb has 1/7"
    nb = jobs["nb"].suggestion  # 4 GiB and 8 %: 1g.10gb holds 5 GiB and 1/7 ≥ 10 % of the SMs
    assert (nb.profile, nb.gpus_saved, nb.note) == ("1g.10gb", 0.875, "opted in (right_size): the next plan may "
                                                                     "move it")
    serve = jobs["serve"].suggestion
    assert serve.note == "running: resubmitted with right_size: true, the plan could move it"
    assert jobs["train"].state == "not in request" and jobs["train"].declared_from == "whole GPU"
    assert jobs["train"].memory_share == pytest.approx(70 / 80)
    assert {j.name for j in analysis.right_size} == {"serve", "inf", "nb"}
    assert [j.name for j in analysis.over_declared] == ["inf"]
    teams = {t.name: t for t in analysis.teams}
    assert teams["research"].gpus == 4 and teams["research"].stats.mean_sm == pytest.approx(82.5)
    assert teams["(unknown)"].gpus == 1  # the free card nobody ran on
    nodes = {n.name: n for n in analysis.nodes}
    assert nodes["n1"].stats.mean_sm == pytest.approx((5 + 3 + 60 + 90) / 4)


def test_without_a_request_namespaces_are_teams_and_pod_stems_jobs(tmp_path: Path) -> None:
    a = analyse(read_usage(cluster_metrics(tmp_path / "m.csv")))
    assert {j.name for j in a.jobs} == {"serve", "inf", "nb", "train", "big"}
    assert {t.name for t in a.teams} == {"web", "ml", "research", "(unknown)"}
    assert all(g.held_by is None and not g.in_request for g in a.gpus)


def test_markdown_and_html_carry_the_same_tables(analysis: report.Analysis) -> None:
    parts = report.blocks(analysis, plot_note=report.MISSING_MATPLOTLIB)
    md, page = report.markdown(parts), report.to_html(parts)
    assert "## Reclaim: cards idle most of the window" in md
    assert "| n1 | n1/gpu1 | H100-SXM5-80GB | 3.0 | 3 | 100% | 1.7 | free | – |" in md  # 400 × 15 s
    assert "| nb | ml | 1 | 80.0 | whole GPU | 4.0 | 5% | 8.0 | 1g.10gb | 0.88 | opted in" in md
    assert "would free about 1.8 GPUs" in md  # nb and serve; inf is too busy
    assert "Plots skipped: matplotlib is not installed" in md
    assert page.count("<table>") == md.count("\n|---")
    assert "<td>1g.10gb</td>" in page and "Plots skipped" in page


def test_tables_are_capped(analysis: report.Analysis) -> None:
    capped = report.markdown(report.blocks(analyse(analysis.usage, None, Options(max_rows=2))))
    assert "6 more GPUs not shown" in capped


def test_plots_are_skipped_plainly_without_matplotlib(analysis: report.Analysis, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    images, note = report.plots(analysis, tmp_path / "plots")
    assert images == {} and note == report.MISSING_MATPLOTLIB
    assert not (tmp_path / "plots").exists()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                    reason="matplotlib (gpu-placement-planner[report]) absent")
def test_plots_are_pngs_when_matplotlib_is_there(analysis: report.Analysis, tmp_path: Path) -> None:
    images, note = report.plots(analysis, tmp_path / "plots")
    nodes = sorted(g.name for g in analysis.nodes)  # every node of the metrics, n3 too (fewer than per_node)
    assert sorted(images) == sorted(
        ["SM utilisation per node over time", "SM utilisation histogram per team"]
        + [f"SM utilisation of {n}'s GPUs" for n in nodes]
    )
    for path in images.values():
        assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert note == f"{len(nodes) + 2} plots in {tmp_path / 'plots'}."
    few, _ = report.plots(analysis, tmp_path / "few", per_node=1)
    assert len(few) == 3  # per_node caps the per-GPU heat maps


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="idle-share must be in"):
        Options(idle_share=1.5).check()


# --------------------------------------------------------------------------------------------
# annotate, and the reclaim what-if request


def test_annotate_writes_observations_the_solver_reads(analysis: report.Analysis) -> None:
    seen = observations(analysis)
    assert seen["inf"] == (8.0, 0.6) and seen["serve"] == (1.0, 0.05) and seen["nb"] == (4.0, 0.08)
    out = annotate(cluster_request(), analysis)
    assert out.pending == ["inf", "nb"] and out.running == ["serve"] and out.unseen_right_size == []
    job = out.data["jobs"][0]
    assert (job["observed_gpu_memory_gib"], job["observed_sm_util"]) == (8.0, 0.6)
    assert out.data["cluster"]["running"][0]["observed_gpu_memory_gib"] == 1.0
    # Teams dropped: the fairness term counts whole GPUs only, so an under-served team would rather keep
    # nb on a whole GPU than right-size it on an idle cluster.
    p = plan({**out.data, "teams": []})
    assert p.objective.terms["usage.over_declared"] == pytest.approx(-0.75 * 0.5)  # inf: declared 32, used 8
    # nb opted in and was seen at 4 GiB and 8 %: 1g.10gb holds 5 GiB and 1/7 ≥ 8 % × 1.25 of the SMs.
    assert {(r.job, r.profiles[0]) for r in p.right_sized} == {("nb", "1g.10gb")}


def test_annotate_rounds_peaks_up_to_a_mib(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "m.csv", gpu_rows("n1", 0, [50, 50], mem=[7.5, 8.0001], pod="inf-0"))
    assert observations(analyse(read_usage(path)))["inf"][0] == pytest.approx(8.0 + 1 / 1024)


def test_annotate_lists_opted_in_jobs_it_has_no_metrics_for(tmp_path: Path) -> None:
    data = cluster_request()
    data["jobs"].append({"name": "later", "right_size": True, "team": "ml", "tasks": [{"name": "w", "gpus": 1}]})
    a = analyse(read_usage(cluster_metrics(tmp_path / "m.csv")), PlacementRequest.model_validate(data))
    assert annotate(data, a).unseen_right_size == ["later"]


def test_reclaimed_request_takes_idle_free_cards_out_of_service(analysis: report.Analysis) -> None:
    req = PlacementRequest.model_validate(cluster_request())
    changed = reclaimed(req, idle_free_cards(analysis))
    assert changed.cluster.nodes[0].unhealthy_gpus == [1]
    assert changed.cluster.nodes[1].unhealthy_gpus == []
