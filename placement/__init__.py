"""placement: a constraint-solver placement optimizer for GPU clusters.

`plan(request)` compiles the cluster and every pending job into one CP-SAT model and returns a
plan that an independent checker (`verify`) has passed.
"""

# No cycle: placement.whatif imports placement.api only inside functions, and api never imports whatif.
from placement.api import parse, plan
from placement.verify import verify
from placement.whatif import what_if

__all__ = ["parse", "plan", "verify", "what_if"]
