"""A bounded load test on loopback: many small planning calls at once, as a busy scheduler would make.

    python -m placement_service.loadtest [--requests 200] [--concurrency 50] [--max-queue N] [--json]

It starts its own server (`python -m placement_service` on 127.0.0.1, a free port) so the numbers include
real sockets and uvicorn, fires the requests from one asyncio client, and reports latency
percentiles, the share of 503s (load shed by design), any other 5xx (there should be none), and
the server's resident memory before and after. Every 200 is checked with `placement.verify`
after the run (outside the timed path). Hard caps on requests, concurrency and wall time keep it
from becoming a stress test of the machine it shares.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from placement_models import Plan

from placement import parse, verify

MAX_REQUESTS = 1000
MAX_CONCURRENCY = 100
WALL_LIMIT_S = 120.0
GPU_MODEL = "H100-SXM5-80GB"


def small_request(rng: random.Random, i: int) -> dict[str, Any]:
    """A few 8-GPU nodes and a few gangs: milliseconds to solve, so the service itself is measured."""
    nodes = [{"name": f"n{k:02d}", "gpu_model": GPU_MODEL, "gpus": 8, "cpu": 192, "memory_gib": 2048}
             for k in range(rng.randint(2, 8))]
    jobs = []
    for j in range(rng.randint(1, 4)):
        gpus = rng.choice([1, 2, 4, 8])
        jobs.append({"name": f"job{i}-{j}", "priority": rng.randint(0, 100),
                     "tasks": [{"name": "w", "replicas": rng.randint(1, 4), "gpus": gpus, "cpu": 8 * gpus}]})
    return {"cluster": {"nodes": nodes}, "jobs": jobs, "policy": {"time_limit_s": 2, "workers": 1}}


def rss_mib(pid: int) -> float | None:
    """Resident set size from /proc (Linux); None elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: no interpolation, so p99 of 200 samples is an observed latency."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def server_quantiles(metrics_text: str, route: str = "/v1/plans") -> dict[str, float | None]:
    """Upper bounds of the server-side p50/p99 from the request-duration histogram: time inside
    the server, without the client's own scheduling and connection set-up."""
    buckets: list[tuple[float, float]] = []
    for line in metrics_text.splitlines():
        if line.startswith("placement_http_request_duration_seconds_bucket") and f'route="{route}"' in line:
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(le), float(line.rsplit(" ", 1)[1])))
    buckets.sort()
    total = buckets[-1][1] if buckets else 0.0
    out: dict[str, float | None] = {}
    for name, q in (("server_p50_ms_at_most", 0.5), ("server_p99_ms_at_most", 0.99)):
        bound = next((le for le, count in buckets if total and count >= q * total), None)
        out[name] = None if bound is None else bound * 1000
    return out


async def _fire(url: str, bodies: list[bytes], concurrency: int) -> list[tuple[int, float, bytes]]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    gate = asyncio.Semaphore(concurrency)
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:

        async def one(body: bytes) -> tuple[int, float, bytes]:
            async with gate:
                start = time.perf_counter()
                try:
                    r = await client.post("/v1/plans", content=body, headers=headers)
                except httpx.HTTPError:
                    return -1, time.perf_counter() - start, b""
                return r.status_code, time.perf_counter() - start, r.content

        return await asyncio.wait_for(asyncio.gather(*(one(b) for b in bodies)), WALL_LIMIT_S)


def run(requests: int, concurrency: int, max_queue: int | None, seed: int = 0) -> dict[str, Any]:
    """Start a server, load it, stop it; return the summary."""
    requests, concurrency = min(requests, MAX_REQUESTS), min(concurrency, MAX_CONCURRENCY)
    port = _free_port()
    env = dict(os.environ)
    if max_queue is not None:
        env["PLACEMENT_MAX_QUEUE"] = str(max_queue)
    env.pop("PLACEMENT_API_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "placement_service", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            try:
                if httpx.get(f"{url}/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        ready = httpx.get(f"{url}/readyz", timeout=2).json()
        rng = random.Random(seed)
        requests_ = [small_request(rng, i) for i in range(requests)]
        bodies = [json.dumps(r).encode() for r in requests_]
        rss_before = rss_mib(proc.pid)
        started = time.perf_counter()
        results = asyncio.run(_fire(url, bodies, concurrency))
        wall = time.perf_counter() - started
        rss_after = rss_mib(proc.pid)
        server_side = server_quantiles(httpx.get(f"{url}/metrics", timeout=5).text)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    codes = [code for code, _, _ in results]
    latencies = [lat * 1000 for _, lat, _ in results]
    ok_latencies = [lat * 1000 for code, lat, _ in results if code == 200]
    shed_latencies = [lat * 1000 for code, lat, _ in results if code == 503]
    bad_plans = 0
    for req, (code, _, content) in zip(requests_, results, strict=True):
        if code == 200 and verify(parse(req), Plan.model_validate_json(content)):
            bad_plans += 1
    counts: dict[str, int] = {}
    for code in codes:
        counts[str(code)] = counts.get(str(code), 0) + 1
    return {
        "requests": requests, "concurrency": concurrency, "server_pool": ready.get("capacity"),
        "wall_s": round(wall, 3), "throughput_rps": round(requests / wall, 1), "codes": counts,
        "p50_ms": round(percentile(latencies, 50), 1), "p99_ms": round(percentile(latencies, 99), 1),
        "p50_ms_200": round(percentile(ok_latencies, 50), 1) if ok_latencies else None,
        "p99_ms_200": round(percentile(ok_latencies, 99), 1) if ok_latencies else None,
        "p50_ms_503": round(percentile(shed_latencies, 50), 1) if shed_latencies else None,
        "p99_ms_503": round(percentile(shed_latencies, 99), 1) if shed_latencies else None,
        "mean_ms": round(statistics.fmean(latencies), 1),
        **server_side,
        "share_503": round(codes.count(503) / len(codes), 3),
        "other_5xx": sum(1 for c in codes if c >= 500 and c != 503),
        "transport_errors": codes.count(-1),
        "unverified_plans": bad_plans,
        "rss_mib_before": None if rss_before is None else round(rss_before, 1),
        "rss_mib_after": None if rss_after is None else round(rss_after, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m placement_service.loadtest", description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help=f"total requests (at most {MAX_REQUESTS})")
    parser.add_argument("--concurrency", type=int, default=50, help=f"in flight at once (at most {MAX_CONCURRENCY})")
    parser.add_argument("--max-queue", type=int, default=None, help="server queue size (default: its setting)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON only")
    args = parser.parse_args(argv)
    summary = run(args.requests, args.concurrency, args.max_queue, args.seed)
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key:>17}: {value}")
    healthy = summary["other_5xx"] == 0 and summary["transport_errors"] == 0 and summary["unverified_plans"] == 0
    return 0 if healthy else 1


if __name__ == "__main__":
    raise SystemExit(main())
