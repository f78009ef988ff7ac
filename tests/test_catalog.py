"""The GPU catalog: MIG geometry per model, checked against docs/hardware.md and the profile table.

Expected values are copied from docs/hardware.md §1-3 (real `nvidia-smi mig -lgipp` dumps and
mig-parted's configs), not derived from the catalog under test. The profile table
(tests/data/mig_profiles.json) is a copy, shipped with the tests, of the hardware team's table of
GPU-instance profiles: the catalog is checked against it in every checkout.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from placement import catalog, devices

#: The hardware team's MIG profile table, shipped with the tests.
PROFILE_TABLE = Path(__file__).resolve().parent / "data" / "mig_profiles.json"

#: docs/hardware.md §1.2, the real -lgipp table of every 8-slice GPU: kind -> (memory slices, starts, max).
EIGHT_SLICE = {
    "1g": (1, (0, 1, 2, 3, 4, 5, 6), 7),
    "1g+me": (1, (0, 1, 2, 3, 4, 5, 6), 1),
    "1g.2s": (2, (0, 2, 4, 6), 4),
    "2g": (2, (0, 2, 4), 3),
    "3g": (4, (0, 4), 2),
    "4g": (4, (0,), 1),
    "7g": (8, (0,), 1),
}
A30 = {"1g.6gb": (1, (0, 1, 2, 3), 4), "1g.6gb+me": (1, (0, 1, 2, 3), 1), "2g.12gb": (2, (0, 2), 2),
       "2g.12gb+me": (2, (0, 2), 1), "4g.24gb": (4, (0,), 1)}


def _profile_table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(PROFILE_TABLE.read_text())
    return table


def test_the_listed_models_are_known_and_mig_capable_where_they_should_be() -> None:
    mig = {"A100-SXM4-40GB", "A100-SXM4-80GB", "A30-24GB", "H100-SXM5-80GB", "H100-NVL-94GB", "H100-96GB",
           "H200-141GB", "B200-180GB", "GB200-186GB"}
    assert mig <= set(catalog.mig_models())
    for name in ("L40S-48GB", "A10-24GB", "T4-16GB", "V100-SXM2-32GB"):
        model = catalog.lookup(name)
        assert model is not None and model.mig is None


def test_h100_profiles_follow_the_real_lgipp_dump() -> None:
    geo = catalog.mig_geometry("H100-SXM5-80GB")
    assert geo is not None and geo.memory_slices == 8 and geo.status == "V"
    names = {"1g": "1g.10gb", "1g+me": "1g.10gb+me", "1g.2s": "1g.20gb", "2g": "2g.20gb", "3g": "3g.40gb",
             "4g": "4g.40gb", "7g": "7g.80gb"}
    for kind, (size, starts, most) in EIGHT_SLICE.items():
        p = geo.profile(names[kind])
        assert p is not None and p.kind == kind
        assert (p.memory_slices, p.starts, p.max_count) == (size, starts, most)
    assert [p.name for p in geo.profiles if p.media] == ["1g.10gb+me", "7g.80gb"]


def test_a30_has_the_four_slice_geometry() -> None:
    geo = catalog.mig_geometry("NVIDIA-A30")
    assert geo is not None and (geo.memory_slices, geo.max_instances) == (4, 4)
    assert {p.name: (p.memory_slices, p.starts, p.max_count) for p in geo.profiles} == A30


def test_every_model_matches_the_profile_table() -> None:
    table = _profile_table()
    geometries = {"8slice": "8-slice", "4slice_A30": "4-slice"}
    for shared_name, ours in geometries.items():
        expected = Counter((p["mem_slices"], tuple(s for s, _ in p["placements"]), p["max"])
                           for p in table["geometries"][shared_name]["profiles"].values())
        for model in catalog.mig_models():
            geo = catalog.mig_geometry(model)
            assert geo is not None
            if geo.geometry == ours:
                got = Counter((p.memory_slices, p.starts, p.max_count) for p in geo.profiles)
                assert got == expected, model
    h100 = table["gpus"]["H100-80GB"]["names"]
    geo = catalog.mig_geometry("H100-80GB")
    assert geo is not None
    assert {p.name for p in geo.profiles} == set(h100.values())


def test_profile_memory_is_the_slice_fraction_of_the_gpu_within_rounding() -> None:
    for model in catalog.mig_models():
        found = catalog.lookup(model)
        assert found is not None and found.mig is not None
        for p in found.mig.profiles:
            fraction = p.memory_slices / found.mig.memory_slices * found.memory_gib
            assert abs(p.memory_gib - fraction) <= 0.1 * fraction + 1, (model, p.name)


def test_gfd_product_names_and_suffixes_resolve() -> None:
    assert catalog.lookup("NVIDIA-H100-80GB-HBM3").name == "H100-SXM5-80GB"  # type: ignore[union-attr]
    assert catalog.lookup("A100-SXM4-40GB-MIG-1g.5gb").name == "A100-SXM4-40GB"  # type: ignore[union-attr]
    assert catalog.lookup("NVIDIA-A30-SHARED").name == "A30-24GB"  # type: ignore[union-attr]
    assert catalog.lookup("nvidia-h200").name == "H200-141GB"  # type: ignore[union-attr]
    assert catalog.lookup("H100-SXM5-80GB-MIG-INVALID") is not None
    assert catalog.lookup("H100-80GB-TURBO") is None


def test_profile_names_accept_resource_names_and_driver_aliases() -> None:
    h100 = catalog.mig_geometry("H100-SXM5-80GB")
    a100 = catalog.mig_geometry("A100-80GB")
    assert h100 is not None and a100 is not None
    assert h100.profile("nvidia.com/mig-1g.10gb.me").name == "1g.10gb+me"  # type: ignore[union-attr]
    assert h100.profile("MIG-3G.40GB").name == "3g.40gb"  # type: ignore[union-attr]
    assert a100.profile("3g.39gb").name == "3g.40gb"  # type: ignore[union-attr]  (mig-parted#31)
    assert h100.profile("3g.39gb") is None
    assert "1g.5gb" in catalog.profile_names() and "5g.50gb" not in catalog.profile_names()


def test_auto_picks_the_smallest_profile_with_enough_memory() -> None:
    h100 = catalog.mig_geometry("H100-SXM5-80GB")
    a100 = catalog.mig_geometry("A100-SXM4-40GB")
    assert h100 is not None and a100 is not None
    assert h100.smallest_fitting(10).name == "1g.10gb"  # type: ignore[union-attr]
    assert h100.smallest_fitting(15).name == "1g.20gb"  # type: ignore[union-attr]  (2 slices, 1 compute)
    assert h100.smallest_fitting(41).name == "7g.80gb"  # type: ignore[union-attr]
    assert h100.smallest_fitting(81) is None
    assert a100.smallest_fitting(8).name == "1g.10gb"  # type: ignore[union-attr]
    assert a100.smallest_fitting(15).name == "3g.20gb"  # type: ignore[union-attr]


def test_mig_parted_templates_are_legal_layouts() -> None:
    """all-balanced: 2×1g + 2g + 3g on 7-slot GPUs, 2×1g + 2g on A30 (docs/hardware.md §3)."""
    h100 = catalog.mig_geometry("H100-SXM5-80GB")
    a30 = catalog.mig_geometry("A30-24GB")
    assert h100 is not None and a30 is not None
    assert h100.templates["all-balanced"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert h100.templates["all-1g"] == {"1g.10gb": 7}
    assert a30.templates["all-balanced"] == {"1g.6gb": 2, "2g.12gb": 1}
    for geo in (h100, a30):
        for counts in geo.templates.values():
            sets = devices.completions(geo.model, (), tuple(sorted(counts)))
            assert any(Counter(n for n, _ in s) == Counter(counts) for s in sets), counts


def test_the_fourteen_maximal_layouts() -> None:
    """docs/hardware.md §1.4: layouts of 1g/2g/3g/4g/7g to which no instance can be added come in exactly
    14 profile mixes, and 3g at start 4 leaves room for four 1g where start 0 leaves three."""
    geo = catalog.mig_geometry("H100-SXM5-80GB")
    assert geo is not None
    names = ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
    sets = {frozenset(s) for s in devices.completions(geo.model, (), names)}
    maximal = [s for s in sets if not any(s < o for o in sets)]
    mixes = {tuple(sorted(Counter(n for n, _ in s).items())) for s in maximal}
    assert len(mixes) == 14
    assert (("1g.10gb", 7),) in mixes and (("7g.80gb", 1),) in mixes and (("3g.40gb", 2),) in mixes
    with_3g = {s for s in maximal if Counter(n for n, _ in s) in (Counter({"1g.10gb": 4, "3g.40gb": 1}),
                                                                  Counter({"1g.10gb": 3, "3g.40gb": 1}))}
    assert {(("3g.40gb", 4) in s, len(s) - 1) for s in with_3g} == {(True, 4), (False, 3)}
    # compute slices never exceed 7: the memory-slice rule implies the SM budget (docs/hardware.md §1.3)
    g = {p.name: p.compute_slices for p in geo.profiles}
    assert max(sum(g[n] for n, _ in s) for s in devices.completions(geo.model, (), tuple(g))) == 7


def test_lookups_are_cached_and_still_accept_aliases() -> None:
    model = catalog.lookup("H100-SXM5-80GB")
    assert model is not None
    assert catalog.lookup("h100-sxm5-80gb") is model
    assert catalog.lookup("H100-SXM5-80GB-MIG-1g.10gb") is model  # GFD product suffix
    assert catalog.mig_geometry("H100-SXM5-80GB") is model.mig
    assert catalog.lookup("no-such-gpu") is None and catalog.mig_geometry(None) is None
