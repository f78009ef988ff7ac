"""Where the ceiling is, and the analysis oracle that re-runs the argument (``oracle-refuse810``).

Why this exists: every policy, ours included, stops near 96 % on the default trace, and this
says why with numbers that can be re-run, so nobody mistakes the ceiling for a weak policy.

**Where the ceiling is** (default trace, 10 seeds; ``placement bench openb`` prints the split).
Every policy, ours and the peers, ends with 178-189 GPUs' worth of idle milli *beside 810-milli
pods*: 2.9-3.0 points of the 4.2-6.9 it leaves unallocated. An 810-milli pod leaves 190 milli on
its GPU that only the rare ≤ 190-milli pods (1.3 % of pods) can use, and a policy that places
every pod that fits places every 810-milli pod until no GPU has 810 idle, which happens only at
~96 % arrived: about 1,050 of them, whatever the policy. That alone caps such policies near 97 %;
with the 470/650-milli remainders they stop at ~96 %. Seeing the queue does not lift the cap: a
window is over-subscribed only once the cluster is full (W=200: 95.78 %; W=3,000 pods, a quarter
of the trace, 30 s per window: 96.30 %, seed 42). Refusing every 810-milli pod while GPUs are
free reaches 97.88 % at 130 % arrived but 84.97 % at 100 % (seed 42): it pays only when the
scheduler knows more demand is coming than the cluster holds, which the protocol does not tell it.
"""

from __future__ import annotations

from placement.bench.openb.cluster import Binding, ClusterState, ReplayContext
from placement.bench.openb.cpsat_online import CpsatOnlinePolicy
from placement.bench.openb.trace import Pod


class RefusingOracle:
    """An *analysis* oracle, not a policy: ``cpsat-online`` that refuses every pod of one GPU size.

    It uses what the protocol does not tell a scheduler, that more demand will arrive than the
    cluster holds; it exists so the ceiling argument in this module's docstring can be re-run
    (``placement bench openb --policies oracle-refuse810``). Its refusals show in ``declined``.
    """

    def __init__(self, seed: int = 0, refuse_milli: int = 810) -> None:
        self.name = f"oracle-refuse{refuse_milli}"
        self.refuse_milli = refuse_milli
        self.inner = CpsatOnlinePolicy(seed)

    def prepare(self, ctx: ReplayContext) -> None:
        self.inner.prepare(ctx)

    def choose(self, state: ClusterState, pod: Pod) -> Binding | None:
        if pod.num_gpu == 1 and pod.gpu_milli == self.refuse_milli:
            return None
        return self.inner.choose(state, pod)
