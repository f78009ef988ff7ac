"""Slurm's own commands, run with a timeout: the only way the placer reads or changes the cluster.

Going through `squeue`, `sinfo` and `scontrol` (not slurmrestd, not the C API) means the placer needs
nothing a login node does not have, and honours `SLURM_CONF` as every Slurm tool does. Any failure
(command missing, controller down, timeout, refused update, unreadable output) becomes one SlurmError
naming the command and Slurm's own message, so the loop can report it and try again next interval
instead of dying with a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Seconds one command may take: a controller that answers slower than this is treated as down.
TIMEOUT_S = 20.0


class SlurmError(RuntimeError):
    """A Slurm command failed; the message is meant for the operator, as is."""


def _find(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in ("/usr/sbin", "/sbin", "/usr/local/sbin"):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@dataclass
class Slurm:
    """Runs Slurm client commands; `env` None means this process's environment (SLURM_CONF as set)."""

    env: Mapping[str, str] | None = None
    timeout_s: float = TIMEOUT_S
    #: every changing command run, in order (tests count them; a cycle that changes nothing adds none)
    log: list[tuple[str, ...]] = field(default_factory=list)
    #: called with each changing command instead of running it (dry run); None: run it
    dry: Callable[[tuple[str, ...]], None] | None = None

    def run(self, argv: Sequence[str]) -> str:
        """Run one command, its standard output; SlurmError on any failure."""
        exe = _find(argv[0])
        if exe is None:
            raise SlurmError(f"{argv[0]} not found on PATH: is the Slurm client (slurm-client) installed?")
        try:
            res = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=self.timeout_s,
                                 env=dict(self.env) if self.env is not None else None, check=False)
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{' '.join(argv)}: no answer within {self.timeout_s:g} s (is slurmctld up?)") from None
        except OSError as exc:
            raise SlurmError(f"{' '.join(argv)}: cannot run: {exc.strerror or exc}") from None
        if res.returncode != 0:
            said = " ".join((res.stderr or res.stdout).split())[:400] or f"exit code {res.returncode}"
            raise SlurmError(f"{' '.join(argv)}: {said}")
        return res.stdout

    def run_json(self, argv: Sequence[str], key: str) -> list[dict[str, Any]]:
        """A `--json` command's list under `key`; SlurmError when the output is not that."""
        out = self.run(argv)
        try:
            data = json.loads(out)
        except ValueError:
            raise SlurmError(f"{' '.join(argv)}: output is not JSON (Slurm 22.05 or later is needed)") from None
        errors = data.get("errors") if isinstance(data, dict) else None
        if errors:
            raise SlurmError(f"{' '.join(argv)}: {errors}")
        items = data.get(key) if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise SlurmError(f"{' '.join(argv)}: no '{key}' list in the output")
        return [x for x in items if isinstance(x, dict)]

    # -- reading ---------------------------------------------------------------------------------------------
    def jobs(self) -> list[dict[str, Any]]:
        """Every job the controller knows (finished ones too, for MinJobAge: callers filter on job_state)."""
        return self.run_json(["squeue", "--json"], "jobs")

    def nodes(self) -> list[dict[str, Any]]:
        return self.run_json(["sinfo", "--json"], "nodes")

    def queue_state(self) -> str:
        """Each job the controller holds in the queue, its id and state code, a line each. A few milliseconds
        where `jobs()` takes tens: cheap enough to poll between cycles, and it changes when a job arrives,
        starts, ends or leaves its node, the moments a cycle can start something."""
        return self.run(["squeue", "--noheader", "--format=%i %t"])

    def partitions(self) -> list[dict[str, str]]:
        """`scontrol show partition -o`, one dict of KEY=VALUE per partition (22.05 has no --json here)."""
        return [parse_keyvalues(line) for line in self.run(["scontrol", "show", "partition", "-o"]).splitlines()
                if line.strip()]

    # -- changing --------------------------------------------------------------------------------------------
    def change(self, argv: Sequence[str]) -> None:
        """Run (or, in a dry run, hand over) one command that changes the cluster, and log it."""
        cmd = tuple(argv)
        self.log.append(cmd)
        if self.dry is not None:
            self.dry(cmd)
            return
        self.run(cmd)


_KEYVALUE = re.compile(r"(\w+)=(\S*)")


def parse_keyvalues(line: str) -> dict[str, str]:
    """`Key=Value Key2=Value2 ...` (scontrol's one-line format) as a dict; values hold no spaces there."""
    return {m.group(1): m.group(2) for m in _KEYVALUE.finditer(line)}
