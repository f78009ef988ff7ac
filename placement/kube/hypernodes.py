"""Volcano HyperNodes -> topology levels: one level per tier, each node labelled with its hypernode there.

A HyperNode (topology.volcano.sh/v1alpha1) groups nodes, or hypernodes of a lower tier, into a
network domain of its `tier` (1 is the narrowest). A job's `networkTopology.highestTierAllowed: N`
keeps all its pods inside one hypernode of tier N, `highestTierName` names the tier by its
`tierName`. Nodes carry no label for this, so the importer gives each node one per tier,
`topology.volcano.sh/hypernode-tier-<N>: <hypernode>`, and makes those labels the request's levels
(narrowest first): a tier request is then an ordinary level request, exact.

Members are selected as Volcano selects them: `exactMatch.name`, `regexMatch.pattern` (a node name
regular expression) or `labelMatch.matchLabels` for nodes; `exactMatch.name` for hypernodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from placement.kube.nodes import NodeInfo
from placement.kube.objects import KubeError, Obj, Problem, View, Warnings

LABEL = "topology.volcano.sh/hypernode-tier-{}"


@dataclass
class Tiers:
    """The levels the HyperNodes define, narrowest first, and how requests name them."""

    levels: list[str] = field(default_factory=list)
    #: tier number or tierName -> level
    names: dict[int | str, str] = field(default_factory=dict)


def read_hypernodes(objs: list[Obj], nodes: list[NodeInfo], warnings: Warnings) -> Tiers:
    """Label every node with its hypernode per tier; the levels and their names."""
    by_name = {o.name: o for o in objs}
    tiers: dict[str, int] = {}
    tier_names: dict[int, str] = {}
    for o in objs:
        spec = o.view().sub("spec")
        tier = spec.integer("tier", required=True, minimum=1)
        assert tier is not None
        tiers[o.name] = tier
        if spec.text("tierName"):
            tier_names[tier] = spec.text("tierName") or ""
    members: dict[str, set[str]] = {}

    def nodes_of(name: str, trail: tuple[str, ...]) -> set[str]:
        if name in members:
            return members[name]
        if name in trail:
            raise KubeError([Problem(by_name[name].where, "spec.members", f"hypernodes contain each other: "
                                     f"{' -> '.join((*trail, name))}")])
        found: set[str] = set()
        for m in by_name[name].view().sub("spec").items("members"):
            kind = m.text("type", "Node")
            selector = m.sub("selector")
            if kind == "HyperNode":
                child = selector.sub("exactMatch").text("name", required=True)
                if child not in by_name:
                    selector.sub("exactMatch").fail("name", f"HyperNode '{child}' is not in the input")
                if tiers[child] >= tiers[name]:
                    m.fail("type", f"member '{child}' (tier {tiers[child]}) is not below tier {tiers[name]}")
                found |= nodes_of(child, (*trail, name))
            elif kind == "Node":
                found |= {n.name for n in nodes if _selects(selector, n)}
            else:
                m.fail("type", f"'{kind}' is not Node or HyperNode")
        members[name] = found
        return found

    placed: dict[tuple[str, int], str] = {}
    for name in sorted(by_name, key=lambda n: (tiers[n], n)):
        for node in sorted(nodes_of(name, ())):
            other = placed.setdefault((node, tiers[name]), name)
            if other != name:
                warnings.add(by_name[name].where, "spec.members", f"node '{node}' is also in HyperNode '{other}' "
                             f"of tier {tiers[name]}: taken as in '{other}'")
    out = Tiers()
    for tier in sorted(set(tiers.values())):
        level = LABEL.format(tier)
        out.levels.append(level)
        out.names[tier] = level
        if tier in tier_names:
            out.names[tier_names[tier]] = level
    for n in nodes:
        for tier in sorted(set(tiers.values())):
            if (n.name, tier) in placed:
                n.labels[LABEL.format(tier)] = placed[(n.name, tier)]
    return out


def _selects(selector: View, node: NodeInfo) -> bool:
    exact = selector.sub("exactMatch")
    if exact.value:
        return exact.text("name", required=True) == node.name
    regex = selector.sub("regexMatch")
    if regex.value:
        pattern = regex.text("pattern", required=True) or ""
        try:
            return re.search(pattern, node.name) is not None  # Go's regexp.MatchString: unanchored
        except re.error as exc:
            regex.fail("pattern", f"not a regular expression: {exc}")
    labels = selector.sub("labelMatch")
    if labels.value:
        wanted = labels.string_map("matchLabels")
        if labels.has("matchExpressions"):
            labels.fail("matchExpressions", "not read: use matchLabels")
        return all(node.labels.get(k) == v for k, v in wanted.items())
    selector.fail(None, "one of exactMatch, regexMatch or labelMatch is required")
