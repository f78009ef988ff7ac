"""From a placement in problem space to the wire-format plan: names, GPU indices, devices, reasons.

* `plan` — assignments, pending reasons, preemptions, the objective and the solver's statistics (a plan may be
  drafted before its terms are known, then finished);
* `topology` — which GPU indices each pod gets (best-bandwidth sets);
* `devices` — each MIG/shared pod's instance or GPU, the new MIG layouts and shared GPUs;
* `teams` — the per-team report and Jain's index.
"""

from placement.decode.plan import assignments, decode, draft, finish

__all__ = ["assignments", "decode", "draft", "finish"]
