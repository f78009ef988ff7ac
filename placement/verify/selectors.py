"""Selectors and taints: a pod sits only on a node whose labels match its node selector and whose
blocking taints it tolerates.
"""

from __future__ import annotations

from placement_models import Node, Task

from placement.catalog import lookup
from placement.verify.context import Context, pod_name

#: Taint effects that keep a pod off a node; PreferNoSchedule is only a preference.
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def effective_labels(node: Node) -> dict[str, str]:
    """The labels a node selector matches: well-known ones derived from the node, then its own.

    Explicit labels are applied last so an operator can override a derived one (e.g. pin a
    different gpu-model spelling) exactly as Kubernetes lets a node's labels be edited.
    """
    labels = {"kubernetes.io/hostname": node.name}
    if node.pool:
        labels["placement/pool"] = node.pool
    if node.gpu_model:
        model = lookup(node.gpu_model)
        if model is not None:
            labels["placement/gpu-model"] = model.name
    labels.update(node.labels)
    return labels


def allowed(task: Task, node: Node) -> bool:
    """Does the task's node selector match the node and does it tolerate the node's blocking taints?"""
    if task.node_selector:  # the labels are built only for a selector to read
        labels = effective_labels(node)
        if any(labels.get(k) != v for k, v in task.node_selector.items()):
            return False
    return all(any(t.tolerates(taint) for t in task.tolerations)
               for taint in node.taints if taint.effect in BLOCKING_EFFECTS)


def check_selector(ctx: Context) -> list[str]:
    out: list[str] = []
    for r in ctx.resolved:
        if not r.task.node_selector:
            continue
        labels = effective_labels(r.node)
        for key, want in r.task.node_selector.items():
            have = labels.get(key)
            if have != want:
                shown = "missing" if have is None else f"'{have}'"
                out.append(f"selector: {pod_name(r.a)} requires {key}='{want}'; node {r.node.name} has {shown}")
    return out


def check_taints(ctx: Context) -> list[str]:
    out: list[str] = []
    for r in ctx.resolved:
        for taint in r.node.taints:
            if taint.effect not in BLOCKING_EFFECTS:
                continue
            if not any(tol.tolerates(taint) for tol in r.task.tolerations):
                out.append(
                    f"taints: {pod_name(r.a)} does not tolerate taint {taint.key}={taint.value}:{taint.effect} "
                    f"of node {r.node.name}"
                )
    return out
