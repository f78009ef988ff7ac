"""The instance library: families of requests for benchmarks and solver research, with best-known values.

``instances/library/FAMILY-SIZE.json`` (``FAMILY-XL.json.gz`` for XL) with ``FAMILY-SIZE.best.json``
beside it (what a longer solve found: ``{objective, bound, time_s, workers, status}``, the bound's
kind, the model's size and who found it; :func:`best_known`), read by ``placement bench
instances/library``; ``--table`` renders the README's table from them
(:mod:`placement.bench.library_table`). Every instance is a pure function of (family, size) — of the
trace file too for ``loop`` —: the seeds are fixed here, so regenerating gives the same bytes (for
XL, the same JSON inside the gzip; the gzip header has no file name and mtime 0, so the .gz bytes
repeat too with the same zlib).

Families (all but ``loop`` built on :func:`placement.generate.generate`: 8-GPU HGX nodes in racks of
16, about half the GPUs held by running work, pending gangs with the ITP gang-size mix):

* ``gangs`` — whole-GPU gangs only, ~3 jobs per node (about 1.6× more GPU demand than free GPUs).
* ``topology`` — half the nodes become GB200 NVL72 trays (4 GPUs, 18 trays to an NVLink domain),
  half HGX racks; the queue mixes scattered small jobs with gangs that require or prefer one NVLink
  domain or rack, and tensor-parallel slices (the job mix of ``placement bench topology``).
* ``mig`` — MIG-heavy inference: a third of the nodes have up to four GPUs partitioned (balanced,
  all-1g or 2×3g layouts) with some instances held by running servers; the queue adds inference jobs
  asking for a MIG profile (or ``auto`` by memory), and the plan may re-partition up to n/4 GPUs.
* ``teams`` — the queue and running work belong to the eight largest Helios (SenseTime Venus, 2020)
  virtual clusters, with nominal GPU quotas in their measured proportions and borrowing up to
  twice the nominal.
* ``spot`` — H100 racks split into on-demand and spot pools (prices, reclaim rate); half the jobs may
  run on spot, most of them with checkpoints; expected runtimes priced by the cost module.
* ``loop`` — scheduler-loop states of a real trace (:mod:`placement.bench.library_loop`): the request our
  scheduler sends mid-replay of a Microsoft ITP slice, at a cycle with a deep queue. Rebuilding it reads
  the trace (``--data DIR`` or ``$PLACEMENT_DATA``); the stored file needs nothing. S, M, L only.
* ``preempt`` — a full cluster, preemptible running work and Kueue-like rules (priority classes, teams in
  a cohort with their own preemption rules): :mod:`placement.bench.library_preempt`. S, M, L, XL.
* ``offpeak`` — peak hours with off-peak windows, deferrable jobs, priced on-demand, spot and cloud pools
  and a peak reserve: :mod:`placement.bench.library_offpeak`. S, M, L.

Sizes (the seeded families): S = 16 nodes, M = 64, L = 256 as plain JSON (7-290 kB a file), XL = 1,024 as gzipped JSON
(0.4-1.1 MB of JSON, 15-55 kB gzipped). :func:`placement.io.load_document` (so every ``placement``
command and the bench) reads ``.json.gz`` as it reads ``.json``; by hand,
``json.loads(gzip.decompress(path.read_bytes()))``. ``python -m placement.bench.library --sizes XL``
rewrites the XL files (``--no-best``: without the 60 s solves).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from placement.generate import generate

SIZES: dict[str, int] = {"S": 16, "M": 64, "L": 256, "XL": 1024}
STORED_SIZES = ("S", "M", "L", "XL")
#: Sizes stored gzip-compressed (FAMILY-SIZE.json.gz, written with mtime 0 and no file name).
GZIP_SIZES = ("XL",)
FAMILIES = ("gangs", "topology", "mig", "teams", "spot", "loop", "preempt", "offpeak")
#: The sizes stored of each family (the ITP traces fill no 1,024-node cluster, so loop stops at L).
FAMILY_SIZES: dict[str, tuple[str, ...]] = {
    **{f: STORED_SIZES for f in ("gangs", "topology", "mig", "teams", "spot")},
    "loop": ("S", "M", "L"),
    "preempt": STORED_SIZES,
    "offpeak": ("S", "M", "L"),
}
#: Families whose recipe reads trace data (``--data DIR`` or ``$PLACEMENT_DATA``) rather than a seed.
TRACE_FAMILIES = ("loop",)
#: One fixed seed per family; the size is folded in so S, M, L are independent draws.
SEEDS: dict[str, int] = {"gangs": 8101, "topology": 8201, "mig": 8301, "teams": 8401, "spot": 8501,
                         "preempt": 8601, "offpeak": 8701}
#: Solve time for NAME.best.json, per size (seconds, 2 workers): a few times a scheduler cycle.
BEST_TIME_S: dict[str, float] = {"S": 10.0, "M": 20.0, "L": 40.0, "XL": 60.0}

#: Mean GPUs per day of the Helios Venus virtual clusters (SenseTime, SC'21, CC BY 4.0), over the
#: 181 days of ``helios/venus_cluster_gpu_number.csv``, counted once when this module was written.
#: The eight largest give the ``teams`` family its quota shape.
HELIOS_VC_GPUS: dict[str, float] = {
    "vcvGl": 152.9,
    "vcefl": 80.0,
    "vcEwI": 72.0,
    "vchbv": 64.3,
    "vcLTP": 64.0,
    "vcHvQ": 64.0,
    "vcWoR": 60.7,
    "vcJsw": 56.5,
    "vcvlY": 53.7,
    "vcsBT": 51.6,
    "vc8Gr": 48.0,
    "vcKeu": 44.3,
    "vcYVn": 38.2,
    "vcKrE": 32.0,
    "vcOhe": 30.0,
    "vcP2J": 25.7,
    "vchA3": 19.1,
    "vccJW": 17.1,
    "vcJLV": 13.8,
    "vcJkd": 12.6,
    "vcgkz": 8.0,
    "vcbIW": 7.1,
    "vc6YE": 6.9,
    "vcEhP": 0.3,
}


def seed_of(family: str, size: str) -> int:
    return SEEDS[family] * 10 + list(SIZES).index(size)


def stored() -> list[tuple[str, str]]:
    """Every (family, size) the library stores, in the table's order."""
    return [(f, s) for f in FAMILIES for s in FAMILY_SIZES[f]]


def instance(family: str, size: str, data: Path | str | None = None) -> dict[str, Any]:
    """The request of one (family, size); deterministic. ``data`` is the trace folder the ``loop`` family
    reads (default ``$PLACEMENT_DATA``); without it that family raises DataNotFound, naming ``--data``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; known: {', '.join(SIZES)}")
    if family == "loop":
        from placement.bench import library_loop

        if size not in library_loop.SPECS:
            raise ValueError(f"unknown size {size!r} for loop; known: {', '.join(library_loop.SPECS)}")
        req = library_loop.loop_instance(size, data)
    else:
        n, seed = SIZES[size], seed_of(family, size)
        req = _BUILDERS[family](n, seed)
    req["policy"] = {"time_limit_s": 10, "workers": 2, "seed": 0, **req.get("policy", {})}
    return req


# ------------------------------------------------------------------------------------------ families


def _gangs(n: int, seed: int) -> dict[str, Any]:
    return generate(n, 3 * n, seed)


def _topology(n: int, seed: int) -> dict[str, Any]:
    """GB200 NVL72 trays and HGX racks (shapes of placement/bench/topology.py), exact node count n."""
    from placement.bench import topology as topo

    rng = np.random.default_rng(seed)
    n_gb = n // 2
    nodes: list[dict[str, Any]] = []
    for t in range(n_gb):
        d = t // topo.TRAYS
        nodes.append(
            {
                "name": f"gb{d:02d}-{t % topo.TRAYS:02d}",
                **topo.GB200,
                "topology": {
                    "nvlink": "nvswitch",
                    "nvlink_domain": f"clique.{d:02d}",
                    "rack": f"nvl{d:02d}",
                    "block": f"gb-b{d // topo.RACKS_PER_BLOCK}",
                },
            }
        )
    for i in range(n - n_gb):
        r = i // topo.HGX_NODES
        nodes.append(
            {
                "name": f"hx{r:02d}-{i % topo.HGX_NODES:02d}",
                **topo.H100,
                "topology": {"nvlink": "nvswitch", "rack": f"hx{r:02d}", "block": f"hx-b{r // topo.RACKS_PER_BLOCK}"},
            }
        )
    # About 40 % of GPUs busy; one domain or rack in four left untouched (what big gangs need).
    groups = sorted({nd["topology"]["rack"] for nd in nodes})
    untouched = set(rng.choice(groups, size=max(1, len(groups) // 4), replace=False).tolist())
    running = []
    for nd in nodes:
        if nd["topology"]["rack"] in untouched:
            continue
        g = nd["gpus"]
        used = int(rng.choice([0, 0, 1, 2, g // 2, g], p=[0.25, 0.15, 0.2, 0.15, 0.1, 0.15]))
        if used:
            running.append(
                {
                    "job": f"run-{nd['name']}",
                    "priority": 0,
                    "pods": [{"task": "w", "node": nd["name"], "gpus": list(range(used))}],
                }
            )
    jobs = [topo._job(rng, i) for i in range(max(4, round(1.5 * n)))]
    return {"api_version": "placement/v1", "cluster": {"nodes": nodes, "running": running}, "jobs": jobs}


_MIG_LAYOUTS: list[list[dict[str, Any]]] = [
    # balanced (mig-parted all-balanced on an 8-slice GPU): 2g + 1g + 1g + 3g
    [
        {"profile": "2g.20gb", "start": 0},
        {"profile": "1g.10gb", "start": 2},
        {"profile": "1g.10gb", "start": 3},
        {"profile": "3g.40gb", "start": 4},
    ],
    [{"profile": "1g.10gb", "start": s} for s in range(7)],  # all-1g
    [{"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}],  # 2 × 3g
]


def _mig(n: int, seed: int) -> dict[str, Any]:
    req = generate(n, n, seed)
    rng = np.random.default_rng(seed + 1)
    nodes = req["cluster"]["nodes"]
    held: dict[str, set[int]] = {}
    for job in req["cluster"]["running"]:
        for pod in job["pods"]:
            held.setdefault(pod["node"], set()).update(pod["gpus"])
    inference = sorted(rng.choice(n, size=max(1, n // 3), replace=False).tolist())
    servers = []
    for i in inference:
        node = nodes[i]
        bad = set(node.get("unhealthy_gpus", []))
        free = [g for g in range(node["gpus"]) if g not in held.get(node["name"], set()) and g not in bad]
        for g in free[-4:]:
            layout = _MIG_LAYOUTS[int(rng.integers(len(_MIG_LAYOUTS)))]
            node.setdefault("mig", {})[str(g)] = layout
            for inst in layout:
                if rng.random() < 0.4:
                    servers.append(
                        {
                            "job": f"serve-{node['name']}-{g}-{inst['start']}",
                            "priority": 50,
                            "pods": [
                                {
                                    "task": "server",
                                    "node": node["name"],
                                    "cpu": 4,
                                    "memory_gib": 32,
                                    "mig": {"gpu": g, **inst},
                                }
                            ],
                        }
                    )
    req["cluster"]["running"].extend(servers)
    for k in range(2 * n):
        kind = rng.choice(["1g.10gb", "2g.20gb", "3g.40gb", "auto"], p=[0.45, 0.2, 0.2, 0.15])
        task: dict[str, Any] = {
            "name": "server",
            "replicas": int(rng.choice([1, 2, 4, 8], p=[0.4, 0.3, 0.2, 0.1])),
            "cpu": 4,
            "memory_gib": 32,
            "mig_profile": str(kind),
        }
        if kind == "auto":
            task["gpu_memory_gib"] = float(rng.choice([8, 16, 30]))
        req["jobs"].append({"name": f"infer-{k:05d}", "priority": int(rng.choice([10, 50])), "tasks": [task]})
    req["policy"] = {"allow_mig_changes": True, "max_mig_changes": max(1, n // 4)}
    return req


def _teams(n: int, seed: int) -> dict[str, Any]:
    req = generate(n, 3 * n, seed)
    rng = np.random.default_rng(seed + 1)
    top = sorted(HELIOS_VC_GPUS, key=lambda k: -HELIOS_VC_GPUS[k])[:8]
    share = np.array([HELIOS_VC_GPUS[t] for t in top])
    share = share / share.sum()
    for job in req["cluster"]["running"] + req["jobs"]:
        job["team"] = top[int(rng.choice(len(top), p=share))]
    healthy = sum(nd["gpus"] - len(nd.get("unhealthy_gpus", [])) for nd in req["cluster"]["nodes"])
    teams = []
    for t, s in zip(top, share.tolist(), strict=True):
        nominal = int(math.floor(0.9 * s * healthy))
        teams.append(
            {
                "name": t,
                "weight": 1.0,
                "usage_gpu_h": round(float(s * healthy * 24 * rng.uniform(0.5, 1.5)), 1),
                "quota": {"gpus": {"nominal": nominal, "borrowing_limit": nominal}},
            }
        )
    req["teams"] = teams
    return req


def _spot(n: int, seed: int) -> dict[str, Any]:
    req = generate(n, 2 * n, seed)
    rng = np.random.default_rng(seed + 1)
    racks = sorted({nd["topology"]["rack"] for nd in req["cluster"]["nodes"] if nd["pool"] == "h100"})
    spot_racks = set(racks[1::3]) if len(racks) > 1 else set()
    for nd in req["cluster"]["nodes"]:
        if nd["pool"] == "h100" and (nd["topology"]["rack"] in spot_racks or (not spot_racks and rng.random() < 0.35)):
            nd["pool"] = "h100-spot"
    pools = {nd["pool"] for nd in req["cluster"]["nodes"]}
    catalog = {
        "h100": {"capacity_type": "on-demand", "gpu_hour_price": 4.0},
        "h100-spot": {"capacity_type": "spot", "gpu_hour_price": 1.3, "reclaim_rate_per_h": 0.05},
        "a100": {"capacity_type": "on-demand", "gpu_hour_price": 2.2},
    }
    req["cluster"]["pools"] = [{"name": p, **catalog[p]} for p in catalog if p in pools]
    models = {"h100": "H100-SXM5-80GB", "a100": "A100-SXM4-80GB"}
    for job in req["jobs"]:
        for task in job["tasks"]:
            pool = task.get("node_selector", {}).pop("placement/pool", None)
            if pool is not None:
                task["node_selector"]["placement/gpu-model"] = models[pool]
        if rng.random() < 0.5:
            job["spot_ok"] = True
            if rng.random() < 0.7:
                job["checkpoint_interval_h"] = float(rng.choice([0.5, 1.0, 2.0]))
        job["expected_runtime_h"] = round(float(np.clip(rng.lognormal(math.log(6), 1.0), 0.5, 96)), 2)
    return req


def _preempt(n: int, seed: int) -> dict[str, Any]:
    from placement.bench.library_preempt import preempt_instance

    return preempt_instance(n, seed)


def _offpeak(n: int, seed: int) -> dict[str, Any]:
    from placement.bench.library_offpeak import offpeak_instance

    return offpeak_instance(n, seed)


_BUILDERS = {"gangs": _gangs, "topology": _topology, "mig": _mig, "teams": _teams, "spot": _spot,
             "preempt": _preempt, "offpeak": _offpeak}


# ------------------------------------------------------------------------------------------- writing


def best_known(request: dict[str, Any], time_s: float, workers: int = 2) -> dict[str, Any]:
    """Solve longer than a cycle and keep what the library's table reports of it.

    ``{objective, bound, time_s, workers, status}`` as before, plus the bound's kind (CP-SAT's on the whole
    model, or the class relaxation of ``placement.search.bound``, valid for every plan of the request: both
    are true bounds), the gap, why the search ended, the model's size and who found the plan (CP-SAT and its
    version, or the greedy baseline when the search did not beat it)."""
    from ortools import __version__ as ortools_version

    from placement.api import plan

    req = dict(request)
    req["policy"] = {**request.get("policy", {}), "time_limit_s": time_s, "workers": workers}
    t0 = time.perf_counter()
    result = plan(req)
    s = result.solver
    who = f"CP-SAT {ortools_version}" if s.winner == "solver" else "greedy"
    return {
        "objective": result.objective.total,
        "bound": s.bound,
        "time_s": round(time.perf_counter() - t0, 2),
        "workers": workers,
        "status": result.status,
        "bound_kind": s.bound_kind,
        "gap": s.gap,
        "ended": s.ended,
        "search": s.search,
        "restricted": s.restricted,
        "variables": s.variables,
        "constraints": s.constraints,
        "found_by": f"placement.plan ({who}, {workers} workers, {time_s:g} s)",
        "bound_by": None if s.bound is None else
        f"placement.plan ({_PROVER.get(s.bound_kind or '', s.bound_kind)}, {workers} workers, {time_s:g} s)",
    }


#: Who proves a bound of each kind: CP-SAT on a model where every task saw every node, or the class
#: relaxation of placement.search.bound.
_PROVER = {"model": "CP-SAT", "relaxation": "class relaxation"}
#: A record's fields that describe its bound, and the model the newest run solved (the rest describe its plan).
_BOUND_FIELDS = ("bound", "bound_kind", "bound_by")
_MODEL_FIELDS = ("variables", "constraints", "restricted")


def merged(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """The best known of two solves of one instance: the better plan with its own fields (who found it, how
    long) and the tighter bound with who proved it, so a shorter or unluckier run never makes a record worse;
    the model's size is the newest run's. Older records without ``bound_by`` were proved by the run that found
    their plan."""
    if old is None:
        return new
    # the better plan's fields (a tie: the newer run's), the other record's where it has none
    out = {**old, **new} if new["objective"] >= old["objective"] else {**new, **old}
    out.update({k: new[k] for k in _MODEL_FIELDS if k in new})  # the instance's model as the newest run built it
    bounds = [r for r in (new, old) if r.get("bound") is not None]  # a tie: the newer proof
    if bounds:
        tight = min(bounds, key=lambda r: r["bound"])
        out.update({k: tight.get(k) for k in _BOUND_FIELDS})
        out["bound_by"] = tight.get("bound_by") or tight.get("found_by")
    else:
        out.update({k: None for k in _BOUND_FIELDS})
    if out["bound"] is not None:
        out["gap"] = round(max(0.0, out["bound"] - out["objective"]) / max(1.0, abs(out["bound"])), 6)
    else:
        out["gap"] = None
    return out


def file_name(family: str, size: str) -> str:
    """FAMILY-SIZE.json, or FAMILY-SIZE.json.gz for the compressed sizes."""
    return f"{family}-{size}.json" + (".gz" if size in GZIP_SIZES else "")


def dump(request: dict[str, Any]) -> bytes:
    """The stored JSON of a request: compact, one trailing newline (what ``.json.gz`` holds too)."""
    return (json.dumps(request, separators=(",", ":")) + "\n").encode()


def gzipped(data: bytes) -> bytes:
    """Deterministic gzip: no file name and mtime 0 in the header, so the bytes depend on data only."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


def write(
    out: Path,
    families: list[str],
    sizes: list[str],
    best: bool,
    workers: int = 2,
    best_time: dict[str, float] | None = None,
    data: Path | str | None = None,
) -> list[Path]:
    """Write every (family, size) asked for that the library stores (a family skips sizes it has not)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for family in families:
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
        for size in sizes:
            if size not in FAMILY_SIZES[family]:
                continue
            req = instance(family, size, data)
            path = out / file_name(family, size)
            raw = dump(req)
            same = path.exists() and path.read_bytes() == (gzipped(raw) if size in GZIP_SIZES else raw)
            path.write_bytes(gzipped(raw) if size in GZIP_SIZES else raw)
            written.append(path)
            line = f"{path}: {len(req['cluster']['nodes'])} nodes, {len(req['jobs'])} jobs, {path.stat().st_size} bytes"
            if best:
                limit = (best_time or BEST_TIME_S)[size]
                record = path.with_name(f"{family}-{size}.best.json")
                kept = json.loads(record.read_text()) if same and record.exists() else None  # same instance
                b = merged(kept, best_known(req, limit, workers))
                record.write_text(json.dumps(b, indent=1) + "\n")
                line += f"; best {b['objective']} bound {b['bound']} ({b['status']}, {b['time_s']} s)"
            print(line, file=sys.stderr, flush=True)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m placement.bench.library", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("instances/library"))
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--sizes", default=",".join(STORED_SIZES), help="any of S,M,L,XL (XL as .json.gz)")
    ap.add_argument("--no-best", action="store_true", help="skip the long solves that write NAME.best.json")
    ap.add_argument("--best-time-s", type=float, default=None, help="one solve time for every size")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data", type=Path, default=None,
                    help="folder holding itp/ (Microsoft ITP traces), read by the loop family "
                         "(default: $PLACEMENT_DATA)")
    ap.add_argument("--table", action="store_true",
                    help="print the README's table of the stored instances in --out instead of writing any")
    args = ap.parse_args(argv)
    if args.table:
        from placement.bench.library_table import markdown_table

        print(markdown_table(args.out, [f"{f}-{s}" for f, s in stored()]))
        return 0
    families = [f for f in args.families.split(",") if f]
    sizes = [s for s in args.sizes.split(",") if s]
    times = {s: args.best_time_s for s in SIZES} if args.best_time_s else None
    try:
        write(args.out, families, sizes, not args.no_best, args.workers, times, args.data)
    except FileNotFoundError as exc:  # DataNotFound: the loop family without its trace
        print(f"error: {exc}. The {', '.join(TRACE_FAMILIES)} family replays a trace; leave it out with "
              f"--families (e.g. --families {','.join(f for f in FAMILIES if f not in TRACE_FAMILIES)})",
              file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
