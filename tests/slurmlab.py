"""Helpers for the tests that run a real Slurm (placement.slurm.lab): the shared lab, waits, and the checks
every scenario ends with (no GPU index given twice, every started job whole as asked)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from placement.slurm.lab import SlurmLab, missing
from placement.slurm.syntax import expand_hostlist, gres_items


def start_lab(root: Any, nodes: int = 4) -> SlurmLab:
    """A lab with a quick backfill (the placer's tests wait for Slurm's starts, not its intervals)."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    return SlurmLab(root, nodes=nodes, scheduler_parameters="bf_interval=1").start()


def squeue(lab: SlurmLab) -> list[dict[str, Any]]:
    return json.loads(lab.run(["squeue", "--json"]).stdout)["jobs"]


def wait_for(what: Callable[[], bool], timeout_s: float = 15.0, step_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(step_s)
    return what()


def released_started(lab: SlurmLab) -> bool:
    """No job is pending released (not held): what the placer let go has started."""
    return not [j for j in squeue(lab) if j["job_state"] == "PENDING" and j["priority"]]


def clean(lab: SlurmLab) -> None:
    """Cancel every job and wait until every node is idle again (a completing node keeps its GPUs)."""
    ids = [str(j["job_id"]) for j in squeue(lab) if j["job_state"] in ("PENDING", "RUNNING", "SUSPENDED")]
    if ids:
        lab.run(["scancel", *ids])
    assert wait_for(lambda: lab.idle_nodes() == set(lab.node_names()), 30), "nodes did not come back idle"


def gpu_use(lab: SlurmLab, jobs: list[dict[str, Any]] | None = None) -> dict[tuple[str, int], list[int]]:
    """(node, GPU index) -> jobs holding it, from squeue's gres_detail (of `jobs`, one squeue snapshot; default:
    a fresh one)."""
    use: dict[tuple[str, int], list[int]] = {}
    for j in squeue(lab) if jobs is None else jobs:
        if j["job_state"] not in ("RUNNING", "COMPLETING"):
            continue
        for host, detail in zip(expand_hostlist(j["nodes"]), j["gres_detail"], strict=False):
            for _, _, idx in gres_items(detail):
                for i in idx or []:
                    use.setdefault((host, i), []).append(j["job_id"])
    return use


def assert_sound(lab: SlurmLab, asks: dict[str, tuple[int, int]]) -> int:
    """No GPU index held twice; every running job of `asks` (id -> (nodes, GPUs per node)) has exactly that.
    Returns the GPUs busy. One squeue snapshot for both (a job the placer starts between two reads would show
    running with no GPUs); a job Slurm lists running before its gres_detail is filled is read again."""
    for _ in range(20):
        jobs = squeue(lab)
        if all(j.get("gres_detail") for j in jobs if j["job_state"] == "RUNNING" and str(j["job_id"]) in asks):
            break
        time.sleep(0.1)
    use = gpu_use(lab, jobs)
    assert {k: v for k, v in use.items() if len(v) > 1} == {}
    for j in jobs:
        jid = str(j["job_id"])
        if j["job_state"] != "RUNNING" or jid not in asks:
            continue
        nodes, per_node = asks[jid]
        hosts = expand_hostlist(j["nodes"])
        assert len(hosts) == nodes, (jid, hosts)
        for host in hosts:
            held = [i for (h, i), jobs in use.items() if h == host and int(jid) in jobs]
            assert len(held) == per_node, (jid, host, held)
    return len(use)
