"""The search layer: CP-SAT on the compiled model, from the greedy plan, within the time limit.

* `strategy` — whole model or windows, the hint, the better of solver and greedy, the gap;
* `solve` — one CP-SAT run on the whole model (wall-clock or deterministic time);
* `lns` — windows over the same model, everything outside pinned, for models too big for a cycle;
* `warm` — the greedy plan extended with justified preemptions, as the hint;
* `bound` — a bound for the whole problem when the model is restricted or searched by windows.
"""

from placement.search.strategy import AFTER_SCORING_SHARE, Found, placement_from, reserve_s, run, unscored

__all__ = ["AFTER_SCORING_SHARE", "Found", "placement_from", "reserve_s", "run", "unscored"]
