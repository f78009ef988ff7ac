"""GPUs that several pods share: MIG instances and time-sliced/MPS GPUs, as domain facts.

Whole-GPU pods are counted per node; pods that take part of a GPU need to know *which* GPU and,
for MIG, which slots. This package holds what is true of the devices whatever the plan:

* `layouts` — legal MIG layouts and the layouts worth considering per GPU situation;
* `view` — the device view of one request: per node, partitioned, shared and plain GPUs, and
  shared MIG instances;
* `pods` — what one MIG or shared pod needs, and how many a node can take.

The greedy ledger that places such pods lives with the greedy (`placement.baseline.devices`),
the step from counts to concrete GPUs with the placement (`placement.picks`), the wire output
with decode (`placement.decode.devices`) and the pending reasons with explain.
"""

from placement.devices.layouts import Config, Instance, Layout, completions, configs, layout_problems, max_instances
from placement.devices.pods import (
    STAGES,
    fresh_room,
    gpu_value,
    instance_share_room,
    mig_room,
    profile_for,
    room,
    share_demand,
    share_room,
)
from placement.devices.view import (
    MILLI,
    DeviceView,
    MigGpu,
    SharedGpu,
    SharedInstance,
    build,
    is_instance_share,
    is_mig,
    is_shared,
    uses_devices,
)

__all__ = [
    "MILLI", "STAGES", "Config", "DeviceView", "Instance", "Layout", "MigGpu", "SharedGpu", "SharedInstance", "build",
    "completions", "configs", "fresh_room", "gpu_value", "instance_share_room", "is_instance_share", "is_mig",
    "is_shared", "layout_problems", "max_instances", "mig_room", "profile_for", "room", "share_demand", "share_room",
    "uses_devices",
]
