"""Bound pods -> running jobs: their team, priority, preemptibility and the devices each pod holds.

Devices are assigned per node in index order (placement.kube.ledger): Kubernetes does not say
which GPU, MIG instance or share a pod holds, only how many.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from placement.kube import jobs as J
from placement.kube.jobs import Gang, PodInfo
from placement.kube.ledger import Ledger
from placement.kube.nodes import NodeInfo
from placement.kube.objects import Obj
from placement.kube.quantity import GIB
from placement.kube.state import ImportState, first_given, pods_priority


class RunningWork(ImportState):
    """Readers of the pods already bound to a node."""

    def _running(self, group: J.Group, pods: list[PodInfo], gang: Gang | None) -> None:
        kind, namespace, name = group
        short = name.split("/", 1)[1] if kind == "owner" else name
        job_name = self._job_name(namespace, short, "running")
        volcano = next((o for o in self.of("batch.volcano.sh", "Job") if kind == "volcano-job"
                        and o.namespace == namespace and o.name == name), None)
        queue = gang.queue if gang else None
        priority = gang.priority if gang else None
        if volcano is not None:
            spec = volcano.view().sub("spec")
            queue = queue or ("team", spec.text("queue", "default") or "default")
            priority = first_given(priority, self._class(spec, "priorityClassName"))
        queue = queue or J.pod_queue(pods[0])
        priority = first_given(pods_priority(pods, self, explicit_only=True), priority, self.default_priority)
        entry: dict[str, Any] = {"job": job_name, "namespace": namespace, "priority": priority, "_queue": queue,
                                 "_namespace": namespace,
                                 "preemptible": self._preemptible(pods, gang, volcano, priority), "pods": []}
        starts = [p.started for p in pods if p.started is not None]
        if starts:
            entry["started_at"] = min(starts).isoformat()
        for p in sorted(pods, key=lambda p: J.natural(p.obj.name)):
            entry["pods"].append(self._bind(p))
        self.origins.running_pods[job_name] = [(p.obj.namespace, p.obj.name) for p in pods]
        self.running.append(entry)

    def _preemptible(self, pods: list[PodInfo], gang: Gang | None, volcano: Obj | None, priority: int) -> bool:
        if gang is not None and gang.preemptible is not None:
            return gang.preemptible
        if (gang is not None and gang.obj.group == "scheduling.run.ai") or any(
                p.obj.view().sub("spec").text("schedulerName") == J.KAI_SCHEDULER for p in pods):
            return priority < J.KAI_PREEMPTIBLE_BELOW
        marks = [p.any(J.VOLCANO_PREEMPTABLE) for p in pods]
        for obj in (volcano, gang.obj if gang else None):
            if obj is not None:
                marks.append(obj.labels().get(J.VOLCANO_PREEMPTABLE) or obj.annotations().get(J.VOLCANO_PREEMPTABLE))
        return any(m == "true" for m in marks)  # Kueue: decided per ClusterQueue once teams are known

    def _bind(self, pod: PodInfo) -> dict[str, Any]:
        """A running pod with concrete devices on its node (indices in order: Kubernetes does not say which)."""
        node = next(n for n in self.nodes if n.name == pod.node)
        ledger = self.ledgers.setdefault(node.name, Ledger(node))
        s = pod.shape
        out: dict[str, Any] = {"task": pod.task, "node": node.name, "name": pod.obj.name, "cpu": float(s.cpu),
                               "memory_gib": float(s.memory / GIB)}
        view = pod.obj.view().sub("spec")
        if s.mig_profile or (s.gpus and node.strategy == "single" and node.mig):
            profile = s.mig_profile or node.mig[next(iter(node.mig))][0][0]
            count = s.mig_count or s.gpus or 1
            ways = node.mig_ways(profile)
            if ways is not None:  # time-slicing/MPS on MIG: `count` replicas are that share of one instance
                return self._bind_instance_share(pod, node, ledger, profile, count, ways[1], out)
            if count > 1:
                view.fail("containers", f"holds {count} MIG devices of node '{node.name}': placement/v1 gives a pod "
                          "one instance")
            slot = ledger.mig(profile)
            if slot is None:
                view.fail("nodeName", f"node '{node.name}' has no free {profile} MIG instance left for this pod")
            out["mig"] = {"gpu": slot[0], "profile": slot[1], "start": slot[2]}
        elif s.gpus and node.sharing is None:
            gpus = ledger.whole(s.gpus)
            if gpus is None:
                view.fail("nodeName", f"node '{node.name}' has no {s.gpus} free whole GPUs left for this pod")
            out["gpus"] = gpus
        elif s.gpus or s.shared_replicas or s.gpu_share:
            share = self._running_share(pod, node)
            if share is None:  # a KAI fraction on a whole GPU: held whole (KAI reserves the GPU for it)
                gpus = ledger.whole(1)
                if gpus is None:
                    view.fail("nodeName", f"node '{node.name}' has no free GPU left for this GPU-fraction pod")
                out["gpus"] = gpus
                return out
            gpu = ledger.share(share)
            if gpu is None:
                view.fail("nodeName", f"node '{node.name}' has no shared GPU with {float(share):g} of a GPU left")
            out.update(gpus=[gpu], gpu_share=float(share))
            if s.gpu_memory is not None:
                out["gpu_memory_gib"] = float(s.gpu_memory / GIB)
        return out

    def _bind_instance_share(self, pod: PodInfo, node: NodeInfo, ledger: Ledger, profile: str, count: int,
                             replicas: int, out: dict[str, Any]) -> dict[str, Any]:
        """A running pod holding `count` replicas of a shared MIG device: that share of the first shared instance
        of its profile with room (Kubernetes does not say which)."""
        view = pod.obj.view().sub("spec")
        if count > replicas:
            view.fail("containers", f"holds {count} replicas of a MIG device shared {replicas} ways")
        share = Fraction(count, replicas)
        slot = ledger.mig_share(profile, share)
        if slot is None:
            view.fail("nodeName", f"node '{node.name}' has no shared {profile} MIG instance with {float(share):g} "
                      "of it left for this pod")
        out["mig"] = {"gpu": slot[0], "profile": slot[1], "start": slot[2]}
        out["gpu_share"] = float(share)
        if pod.shape.gpu_memory is not None:
            out["gpu_memory_gib"] = float(pod.shape.gpu_memory / GIB)
        return out

    def _running_share(self, pod: PodInfo, node: NodeInfo) -> Fraction | None:
        s = pod.shape
        if node.sharing is None:
            self.warnings.add(pod.obj.where, "metadata.annotations", f"a GPU fraction on node '{node.name}', whose "
                              "GPUs are not shared (time-slicing/MPS): imported as holding one whole GPU")
            return None
        replicas = node.sharing[1]
        if s.gpu_share is not None:
            return s.gpu_share
        count = s.gpus or s.shared_replicas
        if count > replicas:
            pod.obj.view().fail("spec.containers", f"holds {count} replicas of a GPU shared {replicas} ways")
        if count > 1:
            self.warnings.add(pod.obj.where, "spec.containers", f"{count} replicas are imported as {count}/{replicas} "
                              "of one GPU (the device plugin may have spread them over several)")
        return Fraction(count, replicas)
