"""Kubernetes objects as read from files: loading, kinds we know, and field access that names the culprit.

Every error raised while importing names the object (kind, namespace/name, file) and the field
path inside it, so a user with a folder of 200 manifests can go straight to the broken line. The
`View` type is the one way importers read fields: it checks types as it goes and knows its path.
What the importer cannot honour is collected as `KubeWarning`s, never dropped in silence.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

#: (API group, kind) -> API versions we read. The group of the core API is "".
KNOWN: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Node"): ("v1",),
    ("", "Pod"): ("v1",),
    ("scheduling.k8s.io", "PriorityClass"): ("v1",),
    ("batch.volcano.sh", "Job"): ("v1alpha1",),
    ("scheduling.volcano.sh", "PodGroup"): ("v1beta1",),
    ("scheduling.volcano.sh", "Queue"): ("v1beta1",),
    ("topology.volcano.sh", "HyperNode"): ("v1alpha1",),
    ("kueue.x-k8s.io", "Workload"): ("v1beta1", "v1beta2"),
    ("kueue.x-k8s.io", "ClusterQueue"): ("v1beta1", "v1beta2"),
    ("kueue.x-k8s.io", "LocalQueue"): ("v1beta1", "v1beta2"),
    ("kueue.x-k8s.io", "ResourceFlavor"): ("v1beta1", "v1beta2"),
    ("kueue.x-k8s.io", "WorkloadPriorityClass"): ("v1beta1", "v1beta2"),
    ("kueue.x-k8s.io", "Topology"): ("v1alpha1", "v1beta1", "v1beta2"),
    ("kueue.x-k8s.io", "Cohort"): ("v1alpha1", "v1beta1", "v1beta2"),
    ("scheduling.run.ai", "Queue"): ("v2",),
    ("scheduling.run.ai", "PodGroup"): ("v2alpha2",),
    ("kai.scheduler", "Topology"): ("v1alpha1",),
    # workload kinds read the way Kueue's integrations read them (placement.kube.controllers)
    ("batch", "Job"): ("v1",),
    ("jobset.x-k8s.io", "JobSet"): ("v1alpha2",),
    ("kubeflow.org", "PyTorchJob"): ("v1",),
    ("kubeflow.org", "TFJob"): ("v1",),
    ("kubeflow.org", "XGBoostJob"): ("v1",),
    ("kubeflow.org", "PaddleJob"): ("v1",),
    ("kubeflow.org", "JAXJob"): ("v1",),
    ("kubeflow.org", "MPIJob"): ("v2beta1",),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): ("v1",),
    ("apps", "Deployment"): ("v1",),
    ("apps", "StatefulSet"): ("v1",),
}

#: Kinds without a namespace (metadata.namespace is ignored for them).
CLUSTER_SCOPED = {"Node", "PriorityClass", "Queue", "HyperNode", "ClusterQueue", "ResourceFlavor",
                  "WorkloadPriorityClass", "Topology", "Cohort"}

_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: which object, which field, and why."""

    where: str  # "Pod team-a/worker-0 (pods.yaml #3)"
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.field}: {self.reason}" if self.field else f"{self.where}: {self.reason}"


class KubeError(ValueError):
    """Objects that cannot be turned into a faithful request; one line per problem."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class KubeWarning:
    """A field the request cannot express, or a fact the importer had to infer; said once, never hidden."""

    where: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.field}: {self.message}" if self.field else f"{self.where}: {self.message}"


@dataclass
class Warnings:
    """Collects warnings in input order, each (object, field, message) once."""

    items: list[KubeWarning] = field(default_factory=list)
    _seen: set[KubeWarning] = field(default_factory=set)

    def add(self, where: str, field_: str, message: str) -> None:
        w = KubeWarning(where, field_, message)
        if w not in self._seen:
            self._seen.add(w)
            self.items.append(w)


@dataclass(frozen=True)
class Obj:
    """One Kubernetes object and where it came from."""

    raw: dict[str, Any]
    source: str
    #: the name was made from metadata.generateName (the API server would add 5 random characters)
    generated: bool = False

    @property
    def api_version(self) -> str:
        return str(self.raw.get("apiVersion", ""))

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind", ""))

    @property
    def meta(self) -> View:
        return self.view().sub("metadata")

    @property
    def name(self) -> str:
        return str((self.raw.get("metadata") or {}).get("name") or "")

    @property
    def namespace(self) -> str:
        if self.kind in CLUSTER_SCOPED:
            return ""
        return str((self.raw.get("metadata") or {}).get("namespace") or "default")

    @property
    def key(self) -> str:
        """namespace/name for namespaced objects, the name for cluster-scoped ones."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def ref(self) -> str:
        group = f" ({self.group})" if self.group and self.kind in ("Job", "PodGroup", "Queue", "Topology") else ""
        return f"{self.kind}{group} {self.key}"

    @property
    def where(self) -> str:
        return f"{self.ref} ({self.source})"

    def view(self) -> View:
        return View(self, (), self.raw)

    def labels(self) -> dict[str, str]:
        return self.meta.string_map("labels")

    def annotations(self) -> dict[str, str]:
        return self.meta.string_map("annotations")


@dataclass(frozen=True)
class View:
    """A value inside an object, with its path: typed reads that fail with the object and field named."""

    obj: Obj
    path: tuple[str | int, ...]
    value: Any

    def where(self, key: str | int | None = None) -> str:
        parts = [*self.path, *([] if key is None else [key])]
        out = ""
        for p in parts:
            out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
        return out

    def fail(self, key: str | int | None, reason: str) -> NoReturn:
        raise KubeError([Problem(self.obj.where, self.where(key), reason)])

    def _child(self, key: str) -> Any:
        if not isinstance(self.value, dict):
            self.fail(None, f"expected a mapping, got {type(self.value).__name__}")
        return self.value.get(key)

    def has(self, key: str) -> bool:
        return isinstance(self.value, dict) and self.value.get(key) is not None

    def get(self, key: str, types: type | tuple[type, ...], default: Any = None, required: bool = False) -> Any:
        value = self._child(key)
        if value is None:
            if required:
                self.fail(key, "required")
            return default
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            self.fail(key, f"expected {_names(types)}, got a boolean ({value!r})")
        if not isinstance(value, types):
            self.fail(key, f"expected {_names(types)}, got {type(value).__name__} ({_short(value)})")
        return value

    def text(self, key: str, default: str | None = None, required: bool = False) -> str | None:
        return self.get(key, str, default, required)

    def integer(self, key: str, default: int | None = None, required: bool = False,
                minimum: int | None = None) -> int | None:
        value = self.get(key, int, default, required)
        if value is not None and minimum is not None and value < minimum:
            self.fail(key, f"must be at least {minimum}, got {value}")
        return value

    def sub(self, key: str) -> View:
        """A nested mapping (an empty one when absent)."""
        return View(self.obj, (*self.path, key), self.get(key, dict, {}))

    def items(self, key: str) -> list[View]:
        """The entries of a list field (none when absent)."""
        values = self.get(key, list, [])
        return [View(self.obj, (*self.path, key, i), v) for i, v in enumerate(values)]

    def mapping_items(self) -> list[tuple[str, View]]:
        if not isinstance(self.value, dict):
            self.fail(None, f"expected a mapping, got {type(self.value).__name__}")
        return [(str(k), View(self.obj, (*self.path, str(k)), v)) for k, v in self.value.items()]

    def string_map(self, key: str) -> dict[str, str]:
        """Labels, annotations, selectors: string values; numbers and booleans are taken as their text."""
        out: dict[str, str] = {}
        for k, v in self.sub(key).mapping_items():
            if isinstance(v.value, bool):
                out[k] = "true" if v.value else "false"
            elif isinstance(v.value, (str, int, float)):
                out[k] = str(v.value)
            elif v.value is None:
                out[k] = ""
            else:
                v.fail(None, f"expected a string, got {type(v.value).__name__}")
        return out


def _names(types: type | tuple[type, ...]) -> str:
    names = {"str": "a string", "int": "an integer", "float": "a number", "dict": "a mapping", "list": "a list",
             "bool": "a boolean"}
    seq = types if isinstance(types, tuple) else (types,)
    return " or ".join(names.get(t.__name__, t.__name__) for t in seq)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------------------------
# Loading


def files_of(paths: Iterable[str | Path]) -> list[Path]:
    """Manifest files: each file given, and every .yaml/.yml/.json under each folder, sorted."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in _SUFFIXES))
        elif p.exists():
            out.append(p)
        else:
            raise KubeError([Problem(str(p), "", "no such file or folder")])
    return out


def load_objects(paths: Iterable[str | Path]) -> list[Obj]:
    """Every object in the files: multi-document YAML, JSON, and `List`/`NodeList`-style wrappers."""
    objects: list[Obj] = []
    problems: list[Problem] = []
    paths = list(paths)
    if any(str(p) == "-" for p in paths):  # `kubectl get ... -o json | placement kube plan -`
        try:
            docs = list(yaml.safe_load_all(sys.stdin.read()))  # JSON is YAML: one reader for both
        except yaml.YAMLError as exc:
            raise KubeError([Problem("stdin", "", f"not valid YAML/JSON: {exc}")]) from None
        for i, doc in enumerate(docs):
            objects.extend(_flatten(doc, f"stdin #{i + 1}", problems))
        paths = [p for p in paths if str(p) != "-"]
    for path in files_of(paths):
        try:
            docs = _documents(path)
        except (yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            problems.append(Problem(str(path), "", f"not valid YAML/JSON: {exc}"))
            continue
        for i, doc in enumerate(docs):
            objects.extend(_flatten(doc, f"{path.name} #{i + 1}", problems))
    if problems:
        raise KubeError(problems)
    return objects


def objects_from(docs: Iterable[Any], source: str = "input") -> list[Obj]:
    """Objects from already parsed documents (a library caller's dicts)."""
    problems: list[Problem] = []
    objects = [o for i, doc in enumerate(docs) for o in _flatten(doc, f"{source} #{i + 1}", problems)]
    if problems:
        raise KubeError(problems)
    return objects


def _documents(path: Path) -> list[Any]:
    text = path.read_text()
    if path.suffix.lower() == ".json":
        return [json.loads(text)]
    return list(yaml.safe_load_all(text))


def _flatten(doc: Any, source: str, problems: list[Problem]) -> Iterator[Obj]:
    if doc is None:
        return
    if not isinstance(doc, dict):
        problems.append(Problem(source, "", f"not a Kubernetes object (a mapping with apiVersion and kind), "
                                f"got {type(doc).__name__}"))
        return
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        item_kind = kind[: -len("List")] or None  # NodeList -> Node; a plain List names each item's kind
        for j, item in enumerate(doc["items"]):
            if isinstance(item, dict) and item_kind and "kind" not in item:
                item = {"kind": item_kind, "apiVersion": doc.get("apiVersion", "v1"), **item}
            yield from _flatten(item, f"{source} item {j + 1}", problems)
        return
    missing = [k for k in ("apiVersion", "kind") if not isinstance(doc.get(k), str) or not doc.get(k)]
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    label = f"{doc.get('kind') or 'object'} {name or '(unnamed)'} ({source})"
    if missing:
        problems.append(Problem(label, missing[0], "required: every Kubernetes object has apiVersion and kind"))
        return
    meta = doc.get("metadata")
    generate = meta.get("generateName") if isinstance(meta, dict) else None
    if (not isinstance(name, str) or not name) and isinstance(generate, str) and generate:
        yield Obj({**doc, "metadata": {**meta, "name": generated_name(generate, source)}}, source, generated=True)
        return
    if not isinstance(meta, dict) or not isinstance(name, str) or not name:
        problems.append(Problem(label, "metadata.name", "required (or metadata.generateName)"))
        return
    yield Obj(doc, source)


#: The alphabet of the API server's generated suffixes (apimachinery's rand.String: no vowels, no 0/1/3).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def generated_name(prefix: str, source: str) -> str:
    """`prefix` + 5 characters, as the API server names an object with metadata.generateName; derived
    from where the object was read, so one input always imports to the same names."""
    digest = int.from_bytes(hashlib.sha256(f"{prefix}|{source}".encode()).digest()[:8], "big")
    suffix = ""
    for _ in range(5):
        digest, k = divmod(digest, len(_SUFFIX_ALPHABET))
        suffix += _SUFFIX_ALPHABET[k]
    return prefix + suffix


def check_kind(obj: Obj) -> str | None:
    """None when we read this kind at this version, else why not (unknown kind, unknown version)."""
    versions = KNOWN.get((obj.group, obj.kind))
    if versions is None:
        known = ", ".join(sorted({f"{k}" for _, k in KNOWN}))
        return f"unknown kind {obj.api_version} {obj.kind} (known kinds: {known})"
    if obj.version not in versions:
        return f"unsupported apiVersion {obj.api_version} for {obj.kind} (read: " \
               f"{', '.join(f'{obj.group}/{v}' if obj.group else v for v in versions)})"
    return None
