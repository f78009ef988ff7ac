"""Slurm: placement decides where and when held Slurm jobs start, through Slurm's own commands.

    placement slurm run [--once] [--interval S] [--policy FILE] [--partition P ...] [--dry-run]

Each cycle reads the live cluster (placement.slurm.read), plans with `placement.plan`, and applies the
plan with `scontrol` (placement.slurm.apply); placement.slurm.loop runs cycles and keeps no state of
its own. placement.slurm.lab brings up a private real Slurm on one host for tests and benches.
README "Slurm" and docs/slurm.md say how a site sets it up.
"""

from __future__ import annotations

from placement.slurm.commands import Slurm, SlurmError
from placement.slurm.loop import Cycle, cycle, run
from placement.slurm.read import Options, Snapshot, read

__all__ = ["Cycle", "Options", "Slurm", "SlurmError", "Snapshot", "cycle", "main", "read", "run"]


def main(argv: list[str] | None = None) -> int:
    """`placement slurm ...` (dispatched here by placement/cli.py)."""
    from placement.slurm.cli import main as cli_main

    return cli_main(argv)
