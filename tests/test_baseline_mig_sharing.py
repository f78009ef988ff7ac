"""The greedy's choices for pods sharing a MIG instance (baseline/mig_sharing.py): the fullest shared instance
that still fits, else the cheapest new shared instance, within the budget of MIG changes."""

from __future__ import annotations

from typing import Any

from placement_models import PlacementRequest, Task

from placement import problem as problem_mod
from placement.baseline import mig_sharing
from placement.baseline.device_state import NodeState
from placement.devices import DeviceView
from placement.devices.view import SHARE_PARTS

H100 = "H100-SXM5-80GB"
TS = {"mode": "time-slicing", "replicas": 4}


def _view(mig: dict[str, Any], running: list[dict[str, Any]] | None = None, gpus: int = 2) -> DeviceView:
    request = {"cluster": {"nodes": [{"name": "n1", "gpu_model": H100, "gpus": gpus, "cpu": 8, "memory_gib": 64,
                                      "mig": mig}], "running": running or []},
               "policy": {"allow_mig_changes": True}}
    return problem_mod.build(PlacementRequest.model_validate(request)).device_view()


def _share(share: float, **extra: Any) -> Task:
    return Task(name="t", mig_profile="1g.10gb", gpu_share=share, **extra)


def _pod(start: int, share: float) -> dict[str, Any]:
    return {"job": f"r{start}-{share}", "pods": [{"task": "t", "node": "n1", "gpu_share": share,
                                                  "mig": {"gpu": 0, "profile": "1g.10gb", "start": start}}]}


def test_best_fit_takes_the_fullest_shared_instance_that_still_fits() -> None:
    view = _view({"0": [{"profile": "1g.10gb", "start": 0, "sharing": TS}, {"profile": "1g.10gb", "start": 1,
                                                                           "sharing": TS}]},
                 [_pod(0, 0.25), _pod(1, 0.5)])
    state = NodeState(view, 0)
    p = view.geometry(0).profile("1g.10gb")  # type: ignore[union-attr]
    fresh = view.fresh_instance(0, "1g.10gb")
    assert mig_sharing.best_fit(state, 0, _share(0.5), p, fresh)[2:] == (0, 1)  # type: ignore[index]
    assert mig_sharing.best_fit(state, 0, _share(0.75), p, fresh)[2:] == (0, 0)  # type: ignore[index]
    assert mig_sharing.best_fit(state, 0, _share(1.0), p, fresh) is None


def test_a_new_instance_comes_from_a_gpu_already_changed_before_one_that_changes_another() -> None:
    layout = [{"profile": "1g.10gb", "start": s} for s in range(7)]
    view = _view({"0": layout, "1": layout})  # idle partitioned GPUs: in whole-GPU capacity (free_ok)
    state = NodeState(view, 0)
    geo = view.geometry(0)
    assert geo is not None
    p = geo.profile("1g.10gb")
    assert p is not None
    state.mig[1].shared.add(3)  # GPU 1 already changes in this plan
    state.mig[1].busy.add(3)
    state.in_w.discard(1)
    _, _, gpu, _ = mig_sharing.new_instance(state, 0, geo, p, True, budget=True)  # type: ignore[misc]
    assert gpu == 1
    state.mig[1].busy.update(range(7))
    _, _, gpu, _ = mig_sharing.new_instance(state, 0, geo, p, True, budget=True)  # type: ignore[misc]
    assert gpu == 0
    assert mig_sharing.new_instance(state, 0, geo, p, True, budget=False) is None  # no change left to spend


def test_take_makes_an_instance_shared_then_loads_it() -> None:
    view = _view({"0": [{"profile": "1g.10gb", "start": 0}]}, gpus=1)
    state = NodeState(view, 0)
    fresh = view.fresh_instance(0, "1g.10gb")
    mig_sharing.take(state, 0, 0, fresh, _share(0.25, gpu_memory_gib=3))  # 3 of its 10 GiB
    assert state.mig[0].shared == {0} and 0 in state.mig[0].busy and state.mig[0].changed()
    assert state.instances[0, 0] == [fresh.replicas - 1, SHARE_PARTS * 3 // 4, SHARE_PARTS * 7 // 10]
    mig_sharing.take(state, 0, 0, fresh, _share(0.25))
    assert state.instances[0, 0] == [fresh.replicas - 2, SHARE_PARTS // 2, SHARE_PARTS * 9 // 20]
