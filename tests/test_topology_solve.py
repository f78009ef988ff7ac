"""Topology end to end: wire fields, the compile module, the greedy, decode's GPU choice, verify.

Every expected answer is worked out by hand in the comment beside it from the definitions of
the topology fields (required / preferred / slice, BestFit, docs/hardware.md §5.2 link counts), never read back
from the solver. Solver runs use `policy.deterministic` so the same request gives the same plan.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, Plan
from pydantic import ValidationError

import placement
from placement import candidates
from placement import problem as problem_mod
from placement.baseline import greedy
from placement.verify import topology_report, verify

H100 = "H100-SXM5-80GB"
GB200 = "GB200-186GB"
V100 = "V100-SXM2-32GB"

# DGX-1 V100 GPU block of `nvidia-smi topo -m` (docs/hardware.md §5.2), with the CPU affinity column.
DGX1_TOPO = """\
        GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7 CPU Affinity
GPU0     X   NV1  NV1  NV2  NV2  SYS  SYS  SYS  0-19
GPU1    NV1   X   NV2  NV1  SYS  NV2  SYS  SYS  0-19
GPU2    NV1  NV2   X   NV2  SYS  SYS  NV1  SYS  0-19
GPU3    NV2  NV1  NV2   X   SYS  SYS  SYS  NV1  0-19
GPU4    NV2  SYS  SYS  SYS   X   NV1  NV1  NV2  20-39
GPU5    SYS  NV2  SYS  SYS  NV1   X   NV2  NV1  20-39
GPU6    SYS  SYS  NV1  SYS  NV1  NV2   X   NV2  20-39
GPU7    SYS  SYS  SYS  NV1  NV2  NV1  NV2   X   20-39
"""


def _node(name: str, gpus: int = 8, model: str = H100, **topology: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": model, "gpus": gpus, "cpu": 128, "memory_gib": 1024, "topology": topology}


def _tray(domain: int, tray: int) -> dict[str, Any]:
    """A GB200 NVL72 compute tray: 4 GPUs; 18 trays form one NVLink domain, one rack."""
    return _node(f"gb{domain}-{tray:02d}", 4, GB200, nvlink="nvswitch", nvlink_domain=f"uuid.{domain}",
                 rack=f"r{domain}")


def _busy(node: str, gpus: list[int], job: str | None = None) -> dict[str, Any]:
    return {"job": job or f"run-{node}", "pods": [{"task": "w", "node": node, "gpus": gpus}]}


def _job(name: str, replicas: int, gpus: int, topology: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    job: dict[str, Any] = {"name": name, "tasks": [{"name": "w", "replicas": replicas, "gpus": gpus}], **extra}
    if topology is not None:
        job["topology"] = topology
    return job


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], running: list[dict[str, Any]] | None = None,
             **cluster: Any) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "running": running or [], **cluster}, "jobs": jobs,
            "policy": {"deterministic": True, "time_limit_s": 2, "workers": 1}}


def _nodes_of(plan: Plan, job: str) -> list[str]:
    """Nodes of a job's pods in pod order (one task per job in these tests)."""
    return [a.node for a in sorted((a for a in plan.assignments if a.job == job), key=lambda a: a.pod)]


def _solve(req: dict[str, Any]) -> Plan:
    plan = placement.plan(req)
    assert verify(PlacementRequest.model_validate(req), plan) == []
    return plan


# --------------------------------------------------------------------------------------- NVL72


def _nvl72(busy_trays: dict[int, int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [_tray(d, i) for d in range(4) for i in range(18)]
    running = [_busy(f"gb{d}-{i:02d}", [0, 1, 2, 3]) for d, k in busy_trays.items() for i in range(k)]
    return nodes, running


def test_nvl72_64_gpu_gang_fits_only_one_domain() -> None:
    # Busy trays 5, 5, 1, 5: free GPUs 52, 52, 68, 52. A 64-GPU gang (16 trays × 4) with
    # required nvlink_domain fits only uuid.2 (17 free trays).
    nodes, running = _nvl72({0: 5, 1: 5, 2: 1, 3: 5})
    req = _request(nodes, [_job("big", 16, 4, {"required": "nvlink_domain"})], running)
    plan = _solve(req)
    where = _nodes_of(plan, "big")
    assert len(where) == 16 and len(set(where)) == 16
    assert {n.split("-")[0] for n in where} == {"gb2"}
    assert where == sorted(where)  # ranks follow the trays of the domain in order
    assert all(a.gpus == [0, 1, 2, 3] for a in plan.assignments)
    # The greedy (BestFit) finds the same single domain.
    problem = problem_mod.build(PlacementRequest.model_validate(req))
    counts = greedy(problem).counts
    assert {problem.nodes[n].name.split("-")[0] for (_, n), k in counts.items() if k} == {"gb2"}
    report = topology_report(PlacementRequest.model_validate(req), plan)
    assert report["multi_node_gangs"] == 1
    assert report["domains_per_multi_node_gang"] == {"nvlink_domain": 1.0, "rack": 1.0, "block": 1.0}


def test_nvl72_gang_waits_when_no_domain_has_room() -> None:
    # Every domain has 5 busy trays: 52 free GPUs each, 208 in all; the 64-GPU gang needs one domain.
    nodes, running = _nvl72({0: 5, 1: 5, 2: 5, 3: 5})
    plan = _solve(_request(nodes, [_job("big", 16, 4, {"required": "nvlink_domain"})], running))
    assert plan.assignments == []
    (pending,) = plan.pending
    assert "no nvlink_domain with 64 free GPUs" in pending.reason
    assert "the most in one nvlink_domain is 52 (uuid.0)" in pending.reason


# -------------------------------------------------------------------------- required racks


def _two_racks() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Racks r0 = {a0, a1}, r1 = {b0, b1} of 8-GPU nodes; a1 and b1 half busy: 12 free GPUs per rack."""
    nodes = [_node("a0", rack="r0"), _node("a1", rack="r0"), _node("b0", rack="r1"), _node("b1", rack="r1")]
    return nodes, [_busy("a1", [0, 1, 2, 3]), _busy("b1", [0, 1, 2, 3])]


def test_rack_required_gang_is_refused_with_a_reason() -> None:
    nodes, running = _two_racks()
    plan = _solve(_request(nodes, [_job("g", 2, 8, {"required": "rack"})], running))
    assert plan.assignments == []
    (pending,) = plan.pending
    # 2 × 8 GPUs = 16 > 12 free in either rack.
    assert pending.reason.startswith("topology: required rack: no rack with 16 free GPUs for the gang")
    assert "the most in one rack is 12 (r0)" in pending.reason


def test_same_gang_without_topology_spans_the_racks() -> None:
    # Control: the two whole nodes a0 and b0 hold it once no single rack is required.
    nodes, running = _two_racks()
    plan = _solve(_request(nodes, [_job("g", 2, 8)], running))
    assert sorted(_nodes_of(plan, "g")) == ["a0", "b0"]


def test_rack_with_enough_gpus_but_fragmented_is_named_so() -> None:
    # r0 = a0 (4 busy) + a1 (4 busy) + a2 (empty): 16 free GPUs, but only one node fits an 8-GPU pod;
    # r1 = b0 (empty). The gang fits across the racks (a2 + b0), so the rack is what binds.
    nodes = [_node("a0", rack="r0"), _node("a1", rack="r0"), _node("a2", rack="r0"), _node("b0", rack="r1")]
    running = [_busy("a0", [0, 1, 2, 3]), _busy("a1", [4, 5, 6, 7])]
    plan = _solve(_request(nodes, [_job("g", 2, 8, {"required": "rack"})], running))
    assert "no rack can hold the gang: those with 16 free GPUs are too fragmented" in plan.pending[0].reason
    assert plan.pending[0].constraint == "topology"
    # Without b0 it fits nowhere, rack or not: the cluster is too small for it, in pieces too small for its pods.
    plan = _solve(_request(nodes[:3], [_job("g", 2, 8, {"required": "rack"})], running))
    assert plan.pending[0].constraint == "gang_size"
    assert plan.pending[0].reason.endswith("needs 16 GPUs; matching nodes have 8 free (16 on all nodes it may use, "
                                           "in pieces too small for its pods)"), plan.pending[0].reason


def test_greedy_uses_the_fullest_rack_that_fits() -> None:
    # Free 8-GPU nodes per rack: r0 4 (32 GPUs), r1 2 (16), r2 3 (24); BestFit for 2 × 8 GPUs = r1.
    nodes = [_node(f"{r}{i}", rack=r) for r, k in (("x", 4), ("y", 2), ("z", 3)) for i in range(k)]
    req = PlacementRequest.model_validate(_request(nodes, [_job("g", 2, 8, {"required": "rack"})]))
    problem = problem_mod.build(req)
    placed = {problem.nodes[n].name for (_, n), k in greedy(problem).counts.items() if k}
    assert placed == {"y0", "y1"}


def test_required_block_with_preferred_rack() -> None:
    # Block b0 = r0 (x0, x1) + r1 (y0); block b1 = r2 (z0, z1, z2); all empty. A 2 × 8 gang:
    # racks holding 16 GPUs are r0 (16) and r2 (24): the greedy takes the fullest, r0.
    nodes = [_node(n, rack=r, block=b) for n, r, b in
             (("x0", "r0", "b0"), ("x1", "r0", "b0"), ("y0", "r1", "b0"), ("z0", "r2", "b1"), ("z1", "r2", "b1"),
              ("z2", "r2", "b1"))]
    req = _request(nodes, [_job("g", 2, 8, {"required": "block", "preferred": "rack"})])
    problem = problem_mod.build(PlacementRequest.model_validate(req))
    assert {problem.nodes[n].name for (_, n), k in greedy(problem).counts.items() if k} == {"x0", "x1"}
    plan = _solve(req)
    assert len({n[0] for n in _nodes_of(plan, "g")}) == 1 and plan.objective.terms["topology.spread"] == 0.0
    # Three pods: no rack holds 24 GPUs but r2; b0 holds them over two racks, b1 in r2 alone.
    req["jobs"][0]["tasks"][0]["replicas"] = 3
    assert sorted(_nodes_of(_solve(req), "g")) == ["z0", "z1", "z2"]


# -------------------------------------------------------------------------- preferred, ranks


def test_preferred_rack_keeps_the_gang_together_and_ranks_follow_racks() -> None:
    # Input order interleaves the racks: n0 r0, n1 r1, n2 r0, n3 r1, all empty. A plain best fit
    # ties on index and takes n0, n1 (two racks); preferred rack keeps both pods in one rack.
    nodes = [_node(f"n{i}", rack=f"r{i % 2}") for i in range(4)]
    plan = _solve(_request(nodes, [_job("g", 2, 8, {"preferred": "rack"})]))
    where = _nodes_of(plan, "g")
    assert where in (["n0", "n2"], ["n1", "n3"])
    assert plan.objective.terms["topology.spread"] == 0.0


def test_consecutive_ranks_share_a_rack() -> None:
    # 4 pods fill all four nodes: pods 0, 1 in r0 (n0, n2), pods 2, 3 in r1 (n1, n3).
    nodes = [_node(f"n{i}", rack=f"r{i % 2}") for i in range(4)]
    plan = _solve(_request(nodes, [_job("g", 4, 8)]))
    assert _nodes_of(plan, "g") == ["n0", "n2", "n1", "n3"]


def test_spread_counts_domains_beyond_the_minimum() -> None:
    # 3 pods of 8 GPUs, racks of 2 empty nodes: at least 2 racks (m = 2), the plan uses exactly 2.
    nodes = [_node(f"{r}{i}", rack=r) for r in ("p", "q") for i in range(2)]
    plan = _solve(_request(nodes, [_job("g", 3, 8, {"preferred": "rack"})]))
    assert len(_nodes_of(plan, "g")) == 3
    assert plan.objective.terms["topology.spread"] == 0.0


def test_gang_without_topology_avoids_a_free_split_across_nvlink_domains() -> None:
    # dA = a0 (2 of 4 GPUs free), a1 (empty); dB = b0 (2 free), b1 (full). 2 pods × 2 GPUs:
    # (a0, b0) breaks no whole node but spans 2 NVLink domains: 0.3 × 0.5 = 0.15; (a0, a1) breaks a1:
    # fragmentation 0.1. The implicit NVLink preference picks one domain; without it the split won.
    nodes = [_node(n, 4, GB200, nvlink="nvswitch", nvlink_domain=d) for n, d in
             (("a0", "dA"), ("a1", "dA"), ("b0", "dB"), ("b1", "dB"))]
    running = [_busy("a0", [0, 1]), _busy("b0", [0, 1]), _busy("b1", [0, 1, 2, 3])]
    req = _request(nodes, [_job("g", 2, 2)], running)
    plan = _solve(req)
    assert {n[0] for n in _nodes_of(plan, "g")} == {"a"}
    assert plan.objective.terms["topology.spread"] == 0.0 and plan.objective.terms["fragmentation"] == -0.1
    req["policy"]["weights"] = {"topology": 0.0}
    assert sorted(_nodes_of(_solve(req), "g")) == ["a0", "b0"]


# ------------------------------------------------------------------------------ keep whole


def test_keep_whole_leaves_the_empty_domain_empty() -> None:
    # Domains (2 trays each): dB = b0, b1 empty; dA = a0 busy, a1 empty. Nodes listed b first, so a
    # topology-blind best fit ties on index and breaks dB; the solver puts the 4-GPU job on a1.
    nodes = [_node(n, 4, GB200, nvlink="nvswitch", nvlink_domain=d) for n, d in
             (("b0", "dB"), ("b1", "dB"), ("a0", "dA"), ("a1", "dA"))]
    req = _request(nodes, [_job("j", 1, 4)], [_busy("a0", [0, 1, 2, 3])])
    problem = problem_mod.build(PlacementRequest.model_validate(req))
    assert [problem.nodes[n].name for (_, n), k in greedy(problem).counts.items() if k] == ["b0"]
    plan = _solve(req)
    assert _nodes_of(plan, "j") == ["a1"]
    assert plan.objective.terms["topology.keep_whole"] == 0.0  # 0.5 had it broken dB
    assert plan.solver.baseline_objective == pytest.approx(4 - 0.1 - 0.5)
    report = topology_report(PlacementRequest.model_validate(req), plan)
    assert report["empty_domains"]["nvlink_domain"] == 1


# ------------------------------------------------------------------------------------ slices


def test_slices_keep_each_group_in_one_domain() -> None:
    # NVLink domains of 2 trays (4 GPUs each): dA, dC empty, dB one tray busy. 4 pods × 4 GPUs in
    # slices of 2 per domain: a slice needs 2 free trays, so dA and dC, never dB's lone tray.
    nodes = [_node(f"{d}{i}", 4, GB200, nvlink="nvswitch", nvlink_domain=d) for d in ("a", "b", "c") for i in (0, 1)]
    req = _request(nodes, [_job("tp", 4, 4, {"slice": {"size": 2, "required": "nvlink_domain"}})],
                   [_busy("b0", [0, 1, 2, 3])])
    plan = _solve(req)
    where = _nodes_of(plan, "tp")
    assert sorted(where) == ["a0", "a1", "c0", "c1"]
    assert {where[0][0], where[1][0]} in ({"a"}, {"c"}) and where[2][0] == where[3][0]
    problem = problem_mod.build(PlacementRequest.model_validate(req))
    assert {problem.nodes[n].name for (_, n), k in greedy(problem).counts.items() if k} == {"a0", "a1", "c0", "c1"}


def test_slice_on_nodes_groups_one_gpu_pods() -> None:
    # 8 one-GPU pods in slices of 4 per node; nodes with 6, 4 and 3 free GPUs: the groups go to the
    # nodes with 6 and 4 free (the 3-GPU node cannot take a whole group).
    nodes = [_node(n) for n in ("u", "v", "w")]
    running = [_busy("u", [0, 1]), _busy("v", [0, 1, 2, 3]), _busy("w", [0, 1, 2, 3, 4])]
    plan = _solve(_request(nodes, [_job("dp", 8, 1, {"slice": {"size": 4, "required": "node"}})], running))
    where = _nodes_of(plan, "dp")
    assert sorted(set(where)) == ["u", "v"] and len(set(where[:4])) == len(set(where[4:])) == 1


# ------------------------------------------------------------------------ GPUs in a node


def _dgx1(**extra: Any) -> dict[str, Any]:
    return _node("dgx", 8, V100, nvlink="hybrid-cube-mesh", **extra)


def test_dgx1_quad_and_pairs_in_one_node() -> None:
    # Pods of 2, 4, 2 GPUs on an empty DGX-1: the quad first takes {0,1,2,3} (9 links); of
    # {4,5,6,7} the first 2-link pair is 4-7 (job a), then 5-6 (also 2 links) for job c.
    plan = _solve(_request([_dgx1()], [_job("a", 1, 2), _job("b", 1, 4), _job("c", 1, 2)]))
    gpus = {a.job: a.gpus for a in plan.assignments}
    assert gpus == {"b": [0, 1, 2, 3], "a": [4, 7], "c": [5, 6]}
    assert plan.objective.terms["topology.bandwidth"] == 0.0  # every pod got an ideal set


def test_dgx1_with_busy_gpu_takes_the_other_quad() -> None:
    # GPU 0 held: the only fully linked quad left is {4,5,6,7}; of {1,2,3} the pair 1-2 has 2 links.
    plan = _solve(_request([_dgx1()], [_job("q", 1, 4), _job("p", 1, 2)], [_busy("dgx", [0])]))
    assert {a.job: a.gpus for a in plan.assignments} == {"q": [4, 5, 6, 7], "p": [1, 2]}


def test_bandwidth_term_reports_a_shortfall() -> None:
    # Free {4,5,6} only: 4-5 NV1, 4-6 NV1, 5-6 NV2 = 4 links = 100 GB/s; the best triangle on an
    # empty DGX-1 has 5 links = 125 GB/s. Shortfall 1 - 100/125 = 0.2, term -0.5 × 0.2 = -0.1.
    plan = _solve(_request([_dgx1()], [_job("t", 1, 3)], [_busy("dgx", [0, 1, 2, 3, 7])]))
    assert plan.assignments[0].gpus == [4, 5, 6]
    assert plan.objective.terms["topology.bandwidth"] == pytest.approx(-0.1)


def test_topo_matrix_per_node_and_per_class() -> None:
    # The DGX-1 matrix given once as a class and once inline: 4-GPU pods get the two quads.
    nodes = [_node("c", 8, V100, topo_matrix="dgx1"), _node("i", 8, V100, topo_matrix=DGX1_TOPO)]
    req = _request(nodes, [_job("q", 4, 4)], topo_matrices={"dgx1": DGX1_TOPO})
    plan = _solve(req)
    by_node = sorted((a.node, a.gpus) for a in plan.assignments)
    assert by_node == [("c", [0, 1, 2, 3]), ("c", [4, 5, 6, 7]), ("i", [0, 1, 2, 3]), ("i", [4, 5, 6, 7])]


def test_no_graph_no_bandwidth_term() -> None:
    plan = _solve(_request([_node("plain")], [_job("j", 1, 2)]))
    assert plan.assignments[0].gpus == [0, 1] and "topology.bandwidth" not in plan.objective.terms


# ------------------------------------------------------------------------------ bad input

BASE = _request([_node("n", rack="r")], [_job("j", 2, 1)])


def _invalid(mutate: Any) -> list[tuple[tuple[Any, ...], str]]:
    req = copy.deepcopy(BASE)
    mutate(req)
    with pytest.raises(ValidationError) as info:
        placement.plan(req)
    return [(e["loc"], e["msg"]) for e in info.value.errors()]


@pytest.mark.parametrize(("mutate", "loc", "phrase"), [
    (lambda r: r["jobs"][0].update(topology={"required": "zone"}), ("jobs", 0, "topology", "required"),
     "unknown topology level 'zone'"),
    (lambda r: r["jobs"][0].update(topology={"preferred": "spine"}), ("jobs", 0, "topology", "preferred"),
     "levels: node, nvlink_domain, rack, block"),
    (lambda r: r["jobs"][0].update(topology={"slice": {"size": 3, "required": "rack"}}),
     ("jobs", 0, "topology", "slice", "size"), "not a multiple of the slice size 3"),
    (lambda r: r["jobs"][0].update(topology={"slice": {"size": 0, "required": "rack"}}),
     ("jobs", 0, "topology", "slice", "size"), "greater than or equal to 1"),
    (lambda r: r["jobs"][0].update(topology={"require": "rack"}), ("jobs", 0, "topology", "require"),
     "Extra inputs"),
    (lambda r: r["cluster"].update(topology_levels=["rack", "rack"]), ("cluster", "topology_levels", 1),
     "listed twice"),
    (lambda r: r["cluster"].update(topology_levels=["node"]), ("cluster", "topology_levels", 0), "reserved"),
    (lambda r: r["cluster"]["nodes"][0]["topology"].update(topo_matrix="dgx1"),
     ("cluster", "nodes", 0, "topology", "topo_matrix"), "neither"),
    (lambda r: r["cluster"]["nodes"][0]["topology"].update(topo_matrix="GPU0 GPU1\nGPU0 X NV1\n"),
     ("cluster", "nodes", 0, "topology", "topo_matrix"), "without rows GPU1"),
    (lambda r: r["cluster"]["nodes"][0]["topology"].update(topo_matrix=DGX1_TOPO.replace("GPU7", "GPU8", 1)),
     ("cluster", "nodes", 0, "topology", "topo_matrix"), "line 1: header GPU columns"),
    (lambda r: r["cluster"]["nodes"][0].update(gpus=4, topology={"topo_matrix": DGX1_TOPO}),
     ("cluster", "nodes", 0, "topology", "topo_matrix"), "the matrix has 8 GPUs, the node 4"),
    (lambda r: r["cluster"]["nodes"][0].update(gpus=4, topology={"nvlink": "hybrid-cube-mesh"}),
     ("cluster", "nodes", 0, "topology", "nvlink"), "8-GPU DGX-1"),
    (lambda r: r["cluster"]["nodes"].extend([_node("m", nvlink_domain="c", rack="r2"),
                                             _node("o", nvlink_domain="c", rack="r3")]),
     ("cluster", "topology_levels"), "nvlink_domain 'c' lies in several rack domains"),
])
def test_bad_topology_input_names_its_path(mutate: Any, loc: tuple[Any, ...], phrase: str) -> None:
    errors = _invalid(mutate)
    assert any(where == loc and phrase in msg for where, msg in errors), errors


def test_levels_are_configurable_and_read_node_labels() -> None:
    # A spine level read from a node label, above the racks: the gang may span racks, not spines.
    spine = "network.topology.nvidia.com/spine"
    nodes = [dict(_node(n, rack=r), labels={spine: s}) for n, r, s in
             (("a", "r0", "s0"), ("b", "r1", "s1"), ("c", "r2", "s1"))]
    req = _request(nodes, [_job("g", 2, 8, {"required": spine})], topology_levels=["rack", spine])
    assert sorted(_nodes_of(_solve(req), "g")) == ["b", "c"]


# ------------------------------------------------------------------------------------ verify


def _verify(req: dict[str, Any], assignments: list[tuple[str, int, str, list[int]]]) -> list[str]:
    jobs = {a[0] for a in assignments}
    plan = Plan.model_validate({
        "status": "feasible",
        "assignments": [{"job": j, "task": "w", "pod": p, "node": n, "gpus": g} for j, p, n, g in assignments],
        "pending": [{"job": job["name"], "reason": "x"} for job in req["jobs"] if job["name"] not in jobs],
    })
    return [v for v in verify(PlacementRequest.model_validate(req), plan) if v.startswith("topology")]


def test_verify_required_level() -> None:
    nodes, _ = _two_racks()
    nodes.append(_node("stray"))  # no labels at all: a rack of its own
    req = _request(nodes, [_job("g", 2, 8, {"required": "rack"})])
    assert _verify(req, [("g", 0, "a0", list(range(8))), ("g", 1, "a1", list(range(8)))]) == []
    assert _verify(req, [("g", 0, "a0", list(range(8))), ("g", 1, "b0", list(range(8)))]) == [
        "topology.required: job g must sit in one rack but uses 2: r0 (1 pods), r1 (1 pods)"]
    assert _verify(req, [("g", 0, "a0", list(range(8))), ("g", 1, "stray", list(range(8)))]) == [
        "topology.required: job g must sit in one rack but uses 2: <<stray>> (1 pods), r0 (1 pods)"]


def test_verify_slices() -> None:
    nodes = [_node(f"{d}{i}", 4, GB200, nvlink_domain=d) for d in ("a", "b") for i in (0, 1)]
    req = _request(nodes, [_job("tp", 4, 4, {"slice": {"size": 2, "required": "nvlink_domain"}})])
    g = [0, 1, 2, 3]
    good = [("tp", 0, "a0", g), ("tp", 1, "a1", g), ("tp", 2, "b0", g), ("tp", 3, "b1", g)]
    assert _verify(req, good) == []
    crossed = [("tp", 0, "a0", g), ("tp", 1, "b0", g), ("tp", 2, "a1", g), ("tp", 3, "b1", g)]
    assert _verify(req, crossed) == [
        "topology.slice: tp/w pods 0..1 must sit in one nvlink_domain but use a, b",
        "topology.slice: tp/w pods 2..3 must sit in one nvlink_domain but use a, b"]
    req["jobs"][0]["min_available"] = 3
    partial = [("tp", 0, "a0", g), ("tp", 1, "a1", g), ("tp", 2, "b0", g)]
    assert _verify(req, partial) == ["topology.slice: tp/w pods 2..3 form a slice of 2 but 1 are placed"]


def test_topology_report_by_hand() -> None:
    # Domains d0 = {x0, x1}, d1 = {y0, y1} (4-GPU trays); racks: d0 in r0, d1 in r1.
    nodes = [_node(n, 4, GB200, nvlink_domain=d, rack=r) for n, d, r in
             (("x0", "d0", "r0"), ("x1", "d0", "r0"), ("y0", "d1", "r1"), ("y1", "d1", "r1"))]
    req = _request(nodes, [_job("s1", 1, 2), _job("s2", 2, 2), _job("m", 2, 4)])
    plan = Plan.model_validate({"status": "feasible", "assignments": [
        {"job": "s1", "task": "w", "pod": 0, "node": "x0", "gpus": [0, 1]},
        {"job": "s2", "task": "w", "pod": 0, "node": "x0", "gpus": [2, 3]},
        {"job": "s2", "task": "w", "pod": 1, "node": "y0", "gpus": [0, 1]},
        {"job": "m", "task": "w", "pod": 0, "node": "x1", "gpus": [0, 1, 2, 3]},
        {"job": "m", "task": "w", "pod": 1, "node": "y1", "gpus": [0, 1, 2, 3]}]})
    report = topology_report(PlacementRequest.model_validate(req), plan)
    # Small gangs (≤ 8 GPUs): s1 (2), s2 (4), m (8); inside one NVLink domain: s1 only.
    assert (report["small_gangs"], report["small_in_one_nvlink"], report["small_in_one_nvlink_share"]) == (3, 1, 0.3333)
    # Multi-node: s2 and m, both over 2 domains and 2 racks; blocks are per rack (unlabelled).
    assert report["multi_node_gangs"] == 2
    assert report["domains_per_multi_node_gang"] == {"nvlink_domain": 2.0, "rack": 2.0, "block": 2.0}
    assert report["empty_domains"] == {"nvlink_domain": 0, "rack": 0, "block": 0}


# ------------------------------------------------------------------------ candidate trimming


def test_trimmed_candidates_hold_whole_domains() -> None:
    # 12 racks of 4 nodes; a rack-required gang keeps at most 8 whole racks once lists are trimmed.
    nodes = [_node(f"n{r:02d}{i}", rack=f"r{r:02d}") for r in range(12) for i in range(4)]
    req = PlacementRequest.model_validate(_request(nodes, [_job("g", 3, 8, {"required": "rack"}), _job("s", 1, 1)]))
    problem = problem_mod.build(req)
    base = greedy(problem)
    lists = candidates.select(problem, base, max_pairs=10)
    racks = {problem.nodes[n].topology.rack for n in lists[0]}
    assert len(racks) == 8 and lists[0].size == 32  # 8 whole racks of 4 nodes
    assert {n for (t, n), k in base.counts.items() if t == 0 and k} <= set(lists[0].tolist())


# ---------------------------------------------------------------------------- hypothesis


@st.composite
def _clusters(draw: st.DrawFn) -> dict[str, Any]:
    """2-8 nodes, every rack and block labelled (block = rack // 2), NVLink domains on some nodes
    (domain c{k} always inside rack k // 2, so labels nest); random busy GPUs; 1-3 jobs with a
    random required level or slice."""
    n = draw(st.integers(2, 8))
    nodes, running = [], []
    for i in range(n):
        k = draw(st.integers(0, 3))
        clique = f"c{k}" if draw(st.booleans()) else None
        nodes.append(_node(f"n{i}", 4, GB200, nvlink_domain=clique, rack=f"r{k // 2}", block=f"b{k // 4}"))
        busy = draw(st.integers(0, 4))
        if busy:
            running.append(_busy(f"n{i}", list(range(busy))))
    jobs = []
    for j in range(draw(st.integers(1, 3))):
        level = draw(st.sampled_from(["node", "nvlink_domain", "rack", "block"]))
        gpus = draw(st.sampled_from([1, 2, 4]))
        replicas = draw(st.integers(1, 4))
        spec = {"required": level} if draw(st.booleans()) else {"slice": {"size": 1 + (replicas % 2 == 0),
                                                                          "required": level}}
        jobs.append(_job(f"j{j}", replicas, gpus, spec))
    return _request(nodes, jobs, running)


def _domain(node: dict[str, Any], level: str) -> str:
    """Domain of a node in the `_clusters` instances: labels are complete except NVLink domains."""
    topo = node["topology"]
    return node["name"] if level == "node" or topo.get(level) is None else topo[level]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_clusters())
def test_random_hierarchies_required_levels_always_hold(req: dict[str, Any]) -> None:
    req["policy"]["time_limit_s"] = 0.5
    plan = placement.plan(req)  # plan() itself passes every plan through verify
    nodes = {n["name"]: n for n in req["cluster"]["nodes"]}
    for job in req["jobs"]:
        pods = sorted((a for a in plan.assignments if a.job == job["name"]), key=lambda a: a.pod)
        spec = job["topology"]
        if "required" in spec:
            assert len({_domain(nodes[a.node], spec["required"]) for a in pods}) <= 1
        else:
            size, level = spec["slice"]["size"], spec["slice"]["required"]
            assert len(pods) % size == 0
            for g in range(0, len(pods), size):
                assert len({_domain(nodes[a.node], level) for a in pods[g:g + size]}) == 1
    # The greedy alone (the hint and fallback) honours them too.
    problem = problem_mod.build(PlacementRequest.model_validate(req))
    counts = greedy(problem).counts
    for j, job in enumerate(req["jobs"]):
        level = job["topology"].get("required")
        used = {_domain(nodes[problem.nodes[n].name], level) for (t, n), k in counts.items()
                if k and problem.tasks[t].job == j} if level else set()
        assert len(used) <= 1
    assert np.all(greedy(problem).usage(problem)[:, 0] <= problem.free[:, 0])
