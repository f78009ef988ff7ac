"""Prometheus metrics of one app instance.

Each app owns its `CollectorRegistry` instead of using the process-global default, so several
apps in one process (every test builds its own) never collide on metric names, and `/metrics`
shows exactly this app's numbers. With several uvicorn workers each process reports its own
series; the scraper sees them per pod/process, which is what a per-replica dashboard wants.
"""

from __future__ import annotations

from placement_models import Plan
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

#: Solve times span milliseconds (tiny clusters) to the configured maximum (minutes at most).
SOLVE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: CP-SAT model sizes grow with tasks x candidate nodes: decades are the useful resolution.
SIZE_BUCKETS = (10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000)


class Metrics:
    """All series the service exports; names follow Prometheus conventions (`_total`, `_seconds`)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "placement_http_requests", "HTTP requests answered, by route template, method and status code",
            ["route", "method", "code"], registry=r,
        )
        self.request_seconds = Histogram(
            "placement_http_request_duration_seconds", "Time from request arrival to the end of the response",
            ["route"], buckets=SOLVE_BUCKETS, registry=r,
        )
        self.solve_seconds = Histogram(
            "placement_solve_seconds", "Wall seconds spent in placement.plan() per solve", buckets=SOLVE_BUCKETS,
            registry=r,
        )
        self.queue_seconds = Histogram(
            "placement_solve_queue_seconds", "Seconds a solve waited for a free solver thread",
            buckets=SOLVE_BUCKETS, registry=r,
        )
        self.plans = Counter("placement_plans", "Plans returned, by plan status", ["status"], registry=r)
        self.model_variables = Gauge(
            "placement_model_variables", "CP-SAT variables of the most recent model", registry=r,
        )
        self.model_constraints = Gauge(
            "placement_model_constraints", "CP-SAT constraints of the most recent model", registry=r,
        )
        self.model_variables_per_solve = Histogram(
            "placement_model_variables_per_solve", "CP-SAT variables per solved model", buckets=SIZE_BUCKETS,
            registry=r,
        )
        self.solves_in_flight = Gauge(
            "placement_solves_in_flight", "Solves admitted and not yet finished (running or queued)", registry=r,
        )
        self.solves_running = Gauge("placement_solves_running", "Solves running on a solver thread", registry=r)
        self.rejected = Counter(
            "placement_solves_rejected", "Requests answered 503 because the pool and its queue were full",
            registry=r,
        )
        self.stopped = Counter(
            "placement_solves_stopped", "Solves told to stop early, by reason (disconnect, deadline, shutdown)",
            ["reason"], registry=r,
        )

    def observe_plan(self, plan: Plan) -> None:
        """Record what a finished solve produced: its status and how big the model was."""
        self.plans.labels(plan.status).inc()
        self.model_variables.set(plan.solver.variables)
        self.model_constraints.set(plan.solver.constraints)
        self.model_variables_per_solve.observe(plan.solver.variables)

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)
