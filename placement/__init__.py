"""placement: a constraint-solver placement optimizer for GPU clusters.

`plan(request)` compiles the cluster and every pending job into one CP-SAT model and returns a
plan that an independent checker (`verify`) has passed.
"""

from placement.api import parse, plan
from placement.verify import verify

__all__ = ["parse", "plan", "verify"]
