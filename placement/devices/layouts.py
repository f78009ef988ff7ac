"""Legal MIG layouts: which instances may share one GPU, and every layout worth considering.

Instances occupy consecutive memory slices from a legal start, no two share a slice, per-profile
counts are capped, and at most one media (`+me`) instance runs per GPU (the catalog's MIG
geometries hold the numbers). `configs` enumerates, per GPU situation (the instances running pods
hold, the free ones, the profiles pending pods want), every layout worth considering, reduced to
the Pareto-maximal supplies of wanted instances: exact for pods that only care *how many*
instances of a profile a node offers, and small (a few dozen per situation, cached).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from placement import catalog
from placement.catalog import MigGeometry, MigProfile

#: One MIG instance: (profile name, first memory slice). A layout is a tuple of them, sorted by start.
Instance = tuple[str, int]
Layout = tuple[Instance, ...]


def geometry_of(model: str) -> MigGeometry:
    found = catalog.lookup(model)
    assert found is not None and found.mig is not None, model
    return found.mig


def sort_layout(layout: Iterable[Instance]) -> Layout:
    return tuple(sorted(layout, key=lambda i: i[1]))


# --------------------------------------------------------------------------------------------
# Legal layouts


def layout_problems(geo: MigGeometry, layout: Iterable[Instance]) -> list[tuple[int, str, str]]:
    """(index in the layout, field, reason) for every rule an instance breaks; empty when legal."""
    out: list[tuple[int, str, str]] = []
    used: dict[int, Instance] = {}
    counts: dict[str, int] = {}
    media: Instance | None = None
    for k, (name, start) in enumerate(layout):
        p = geo.profile(name)
        if p is None:
            out.append((k, "profile", f"{geo.model} has no MIG profile '{name}' "
                        f"(profiles: {', '.join(q.name for q in geo.profiles)})"))
            continue
        if start not in p.starts:
            out.append((k, "start", f"{p.name} starts at memory slice {_or(p.starts)} on {geo.model}, not {start}"))
            continue
        clash = sorted({used[m] for m in p.slices(start) if m in used}, key=lambda i: i[1])
        if clash:
            out.append((k, "start", f"{p.name}@{start} overlaps {', '.join(f'{n}@{s}' for n, s in clash)} "
                        "(instances may not share a memory slice)"))
            continue
        counts[p.name] = counts.get(p.name, 0) + 1
        if counts[p.name] > p.max_count:
            out.append((k, "profile", f"more than {p.max_count} {p.name} instance(s) on one GPU"))
            continue
        if p.media and media is not None:
            out.append((k, "profile", f"{p.name} and {media[0]}@{media[1]} both need the GPU's single media "
                        "engine set (at most one +me or whole-GPU instance per GPU)"))
            continue
        media = (p.name, start) if p.media else media
        used.update(dict.fromkeys(p.slices(start), (p.name, start)))
    return out


def _or(values: Iterable[int]) -> str:
    v = [str(x) for x in values]
    return v[0] if len(v) == 1 else ", ".join(v[:-1]) + " or " + v[-1]


def occupancy(geo: MigGeometry, layout: Iterable[Instance]) -> tuple[int, dict[str, int], bool]:
    """(bitmask of used memory slices, count per profile, media engine taken) of a legal layout."""
    mask, counts, media = 0, {}, False
    for name, start in layout:
        p = geo.profile(name)
        assert p is not None
        mask |= _bits(p, start)
        counts[p.name] = counts.get(p.name, 0) + 1
        media = media or p.media
    return mask, counts, media


def _bits(p: MigProfile, start: int) -> int:
    return ((1 << p.memory_slices) - 1) << start


def can_start(p: MigProfile, start: int, mask: int, counts: dict[str, int], media: bool) -> bool:
    return (start in p.starts and not mask & _bits(p, start) and counts.get(p.name, 0) < p.max_count
            and not (p.media and media))


@cache
def completions(model: str, fixed: Layout, relevant: tuple[str, ...]) -> tuple[Layout, ...]:
    """Every set of instances of `relevant` profiles that can join `fixed` legally (the empty set too).

    Slice by slice: leave it empty or start an instance there. Each set comes out exactly once; for
    the whole 8-slice profile family that is a few thousand sets, for the profiles pods ask, far fewer.
    """
    geo = geometry_of(model)
    profiles = [p for p in geo.profiles if p.name in relevant]
    mask0, counts0, media0 = occupancy(geo, fixed)
    out: list[Layout] = []

    def rec(m: int, mask: int, counts: dict[str, int], media: bool, chosen: list[Instance]) -> None:
        if m >= geo.memory_slices:
            out.append(tuple(chosen))
            return
        if mask >> m & 1:
            rec(m + 1, mask, counts, media, chosen)
            return
        rec(m + 1, mask, counts, media, chosen)
        for p in profiles:
            if can_start(p, m, mask, counts, media):
                counts[p.name] = counts.get(p.name, 0) + 1
                chosen.append((p.name, m))
                rec(m + p.memory_slices, mask | _bits(p, m), counts, media or p.media, chosen)
                chosen.pop()
                counts[p.name] -= 1

    rec(0, mask0, dict(counts0), media0, [])
    return tuple(out)


@dataclass(frozen=True)
class Config:
    """One choice for one GPU: its layout (None: whole, MIG off), the free instances it offers per wanted
    profile, and whether it differs from what the GPU has now."""

    layout: Layout | None
    supply: tuple[int, ...]
    changed: bool

    @property
    def whole(self) -> bool:
        return self.layout is None


@cache
def configs(model: str, occupied: Layout, free: Layout | None, relevant: tuple[str, ...], changes: bool,
            whole_ok: bool) -> tuple[Config, ...]:
    """The layouts worth considering for a GPU, current first.

    `free` None: the GPU is whole now. Without `changes`, only the current layout. With them: the
    whole GPU (when no instance is occupied and `whole_ok`), and every legal layout that keeps the
    occupied instances, reduced to the Pareto-maximal supplies of `relevant` instances that beat
    the current layout somewhere. Among layouts with the same supply, the one destroying the fewest
    free instances is kept (free instances no pod needs stay where the slices allow).
    """
    zero = (0,) * len(relevant)
    if free is None:
        current = Config(None, zero, False)
    else:
        current = Config(sort_layout(occupied + free), _supply(free, relevant), False)
    out = [current]
    if not changes:
        return tuple(out)
    if free is not None and not occupied and whole_ok:
        out.append(Config(None, zero, True))
    geo = geometry_of(model)
    best: dict[tuple[int, ...], tuple[int, Layout]] = {}
    for extra in completions(model, occupied, relevant):
        mask, counts, media = occupancy(geo, occupied + extra)
        kept: list[Instance] = []
        for name, start in free or ():
            p = geo.profile(name)
            assert p is not None
            if can_start(p, start, mask, counts, media):
                kept.append((name, start))
                mask |= _bits(p, start)
                counts[p.name] = counts.get(p.name, 0) + 1
                media = media or p.media
        layout = sort_layout(occupied + extra + tuple(kept))
        if layout == current.layout:
            continue
        supply = _supply(extra + tuple(kept), relevant)
        if supply == zero or (current.layout is not None and _dominated(supply, current.supply)):
            continue
        destroyed = len(free or ()) - len(kept)
        if supply not in best or destroyed < best[supply][0]:
            best[supply] = (destroyed, layout)
    front = [s for s in best if not any(o != s and _dominated(s, o) for o in best)]
    out.extend(Config(best[s][1], s, True) for s in sorted(front, reverse=True))
    return tuple(out)


def _supply(layout: Iterable[Instance], relevant: tuple[str, ...]) -> tuple[int, ...]:
    names = [name for name, _ in layout]
    return tuple(names.count(r) for r in relevant)


def _dominated(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True))


def max_instances(model: str, occupied: Layout, free: Layout | None, profile: str, changes: bool) -> int:
    """The most free `profile` instances this GPU can offer (after a re-partition, when allowed)."""
    return max(c.supply[0] for c in configs(model, occupied, free, (profile,), changes, False))
