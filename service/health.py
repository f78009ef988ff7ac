"""`GET /healthz`, `/readyz` and `/metrics`: liveness, readiness and Prometheus metrics.

Liveness does no work at all, so it answers even when every solve slot is taken; readiness says 503
while the pool and queue are full or the server drains, so a load balancer sends work elsewhere.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from placement_service.runtime import GUARDED, runtime
from placement_service.schemas import Health, error_responses

router = APIRouter()


@router.get("/healthz", response_model=Health, summary="Liveness: the process answers")
async def healthz() -> Response:
    return JSONResponse({"status": "ok"})  # no work at all: liveness must answer even when saturated


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}},
            summary="Readiness: 503 while shutting down or while the pool and queue are full")
async def readyz(request: Request) -> Response:
    pool = runtime(request).pool
    status = "draining" if pool.draining else "saturated" if pool.saturated else "ready"
    body = Health(status=status, in_flight=pool.in_flight, capacity=pool.capacity)
    if status == "ready":
        return JSONResponse(body.model_dump())
    return JSONResponse(body.model_dump(), status_code=503, headers={"Retry-After": str(pool.retry_after())})


@router.get("/metrics", dependencies=GUARDED, response_class=Response, responses=error_responses(401),
            summary="Prometheus metrics (text exposition format)")
async def metrics(request: Request) -> Response:
    return Response(runtime(request).metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
