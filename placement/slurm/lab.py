"""A private, real Slurm on this one host: one slurmctld and N slurmd, each node with 8 simulated GPUs.

Tests and benches need the real controller, not an imitation of it: what Slurm accepts, how it merges
updates and when it starts a released job are exactly what the placer must get right. Debian's
packages (`slurmctld slurmd slurm-client`, 22.05) run several nodes on one host when every node has
its own port and `NodeHostname=localhost`. Everything lives in one directory (config, state, logs,
spool, fake GPU device files), on free ports, so parallel runs do not meet; `stop()` ends only the
processes this lab started, by PID (jobs cancelled first: their slurmstepd outlives slurmd).

GPUs: one GRES type per index (`gpu:g0` ... `gpu:g7`) so the placer can pin a job to given indices
(placement.slurm.apply); each GRES `File=` is a symlink to /dev/null, because gres/gpu wants a
character device. Jobs arrive held by the shipped job_submit.lua (priority 0).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

#: The daemons and client commands a lab needs on PATH (or in /usr/sbin, where Debian puts the daemons).
BINARIES = ("slurmctld", "slurmd", "squeue", "sinfo", "scontrol", "sbatch", "scancel")
#: The job_submit.lua that holds every new job, shipped with the package.
JOB_SUBMIT_LUA = Path(__file__).with_name("job_submit.lua")


def which(name: str) -> str | None:
    """A Slurm binary's path: PATH first, then the sbin folders a non-root PATH may lack."""
    found = shutil.which(name)
    if found:
        return found
    for folder in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def missing() -> str | None:
    """Why a lab cannot start here (None: it can): the binaries that are not installed."""
    absent = [b for b in BINARIES if which(b) is None]
    if os.name != "posix" or os.geteuid() != 0:
        return "the lab runs slurmd as root (SlurmdUser=root); run as root"
    if absent:
        return ("Slurm is not installed (missing " + ", ".join(absent) + "); install Debian's slurmctld slurmd "
                "slurm-client packages")
    return None


def free_port_base(count: int, low: int = 20_000, high: int = 60_000) -> int:
    """A first port P such that P .. P+count-1 are all free now (a small race remains, as with any free port)."""
    start = low + (os.getpid() * 97 + int(time.time() * 1000)) % (high - low - count)
    for base in range(start, high - count, count + 1):
        if all(_free(p) for p in range(base, base + count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports between {low} and {high}")


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class SlurmLab:
    """One private Slurm cluster in `root`: nodes n1..nN, 8 GPUs, `cpus` CPUs and `memory_mb` each."""

    root: Path
    nodes: int = 4
    cpus: int = 8
    memory_mb: int = 64_000
    gpus: int = 8
    #: node name -> Slurm features (constraints match them; the placer reads them as labels)
    features: dict[str, list[str]] = field(default_factory=dict)
    #: partition name -> node names; empty: one partition `gpu` with every node
    partitions: dict[str, list[str]] = field(default_factory=dict)
    #: Slurm's SchedulerParameters (benches compare Slurm's own backfill at its defaults: leave it empty there)
    scheduler_parameters: str = ""
    port: int = 0
    pids: dict[str, int] = field(default_factory=dict)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment every client command of this lab runs with (SLURM_CONF, sbin on PATH)."""
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
        return env

    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    # -- configuration ---------------------------------------------------------------------------------------
    def _write_config(self) -> None:
        for sub in ("etc", "state", "log", "run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        r = self.root
        lines = [
            "ClusterName=lab", "SlurmctldHost=localhost", f"SlurmctldPort={self.port}",
            "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/none", "CredType=cred/none",
            f"StateSaveLocation={r}/state", f"SlurmdSpoolDir={r}/spool/%n",
            f"SlurmctldPidFile={r}/run/slurmctld.pid", f"SlurmdPidFile={r}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log", f"SlurmdLogFile={r}/log/slurmd-%n.log",
            "MailProg=/bin/true", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none", "MpiDefault=none", "SwitchType=switch/none",
            "SchedulerType=sched/backfill", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "SlurmdParameters=config_overrides", "ReturnToService=2", "KillWait=5", "JobRequeue=1",
            "MinJobAge=600", "JobSubmitPlugins=lua", "GresTypes=gpu", "SlurmctldTimeout=10",
            "SlurmdTimeout=30", "InactiveLimit=0", "MessageTimeout=10",
        ]
        if self.scheduler_parameters:
            lines.append(f"SchedulerParameters={self.scheduler_parameters}")
        gres = ",".join(f"gpu:g{g}:1" for g in range(self.gpus))
        for i, name in enumerate(self.node_names(), 1):
            feats = self.features.get(name)
            extra = f" Features={','.join(feats)}" if feats else ""
            lines.append(f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={self.port + i} "
                         f"CPUs={self.cpus} RealMemory={self.memory_mb} Gres={gres}{extra} State=UNKNOWN")
        parts = self.partitions or {"gpu": self.node_names()}
        for k, (pname, members) in enumerate(parts.items()):
            default = "YES" if k == 0 else "NO"
            lines.append(f"PartitionName={pname} Nodes={','.join(members)} Default={default} MaxTime=INFINITE "
                         "State=UP OverSubscribe=NO")
        self.conf.write_text("\n".join(lines) + "\n")
        gres_lines = []
        for name in self.node_names():
            (r / "spool" / name).mkdir(parents=True, exist_ok=True)
            dev = r / "dev" / name
            dev.mkdir(parents=True, exist_ok=True)
            for g in range(self.gpus):
                link = dev / f"gpu{g}"
                if not link.is_symlink():
                    link.symlink_to("/dev/null")
                gres_lines.append(f"NodeName={name} Name=gpu Type=g{g} File={link}")
        (r / "etc" / "gres.conf").write_text("\n".join(gres_lines) + "\n")
        (r / "etc" / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
        shutil.copyfile(JOB_SUBMIT_LUA, r / "etc" / "job_submit.lua")

    # -- life cycle ------------------------------------------------------------------------------------------
    def start(self, timeout_s: float = 30.0) -> SlurmLab:
        """Write the config, start the daemons and wait until every node is idle; raise with the log if not."""
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        if not self.port:
            self.port = free_port_base(self.nodes + 1)
        self._write_config()
        self.pids["slurmctld"] = self._spawn([which("slurmctld") or "slurmctld", "-D", "-c"], "slurmctld")
        for name in self.node_names():
            self.pids[name] = self._spawn([which("slurmd") or "slurmd", "-D", "-N", name], f"slurmd-{name}")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.idle_nodes() == set(self.node_names()):
                return self
            time.sleep(0.2)
        log = (self.root / "log" / "slurmctld.log")
        tail = log.read_text().splitlines()[-3:] if log.exists() else []
        self.stop()
        raise RuntimeError("slurm did not come up: " + " | ".join(tail))

    def _spawn(self, argv: list[str], name: str) -> int:
        out = open(self.root / "log" / f"{name}.out", "wb")  # noqa: SIM115 - the daemon keeps it
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=self.env, start_new_session=True)
        out.close()
        self._procs.append(proc)
        return proc.pid

    def idle_nodes(self) -> set[str]:
        """Nodes that are idle right now (the lab is up when all are)."""
        res = self.run(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"], check=False)
        return set(res.stdout.split()) if res.returncode == 0 else set()

    def run(self, argv: list[str], check: bool = True, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
        """A client command against this lab (argv[0] found on PATH or in sbin)."""
        return subprocess.run([which(argv[0]) or argv[0], *argv[1:]], env=self.env, capture_output=True, text=True,
                              check=check, timeout=timeout)

    def submit(self, *args: str, sleep_s: float = 600) -> str:
        """sbatch a job that sleeps (held by job_submit.lua); its job id."""
        res = self.run(["sbatch", "--parsable", "-o", "/dev/null", *args, f"--wrap=sleep {sleep_s}"])
        return res.stdout.strip().split(";")[0]

    def stop_controller(self) -> None:
        """Stop slurmctld only (a test of the placer with the controller down)."""
        pid = self.pids.pop("slurmctld", None)
        if pid:
            _terminate([pid])

    def stop(self) -> None:
        """Cancel every job, stop the daemons this lab started, then the job steps carrying its SLURM_CONF.

        A lab object that did not start the daemons itself (a crashed run's folder) stops those whose PIDs
        the daemons wrote into its run/ folder."""
        if not self.pids:
            for f in sorted((self.root / "run").glob("*.pid")):
                with contextlib.suppress(OSError, ValueError):
                    self.pids[f.stem] = int(f.read_text().split()[0])
        if "slurmctld" in self.pids:
            try:
                ids = self.run(["squeue", "-h", "-o", "%i"], check=False, timeout=5).stdout.split()
                if ids:
                    self.run(["scancel", "--full", *ids], check=False, timeout=5)
                    for _ in range(50):
                        if not self.run(["squeue", "-h", "-t", "R,CG,S", "-o", "%i"], check=False,
                                        timeout=5).stdout.strip():
                            break
                        time.sleep(0.1)
            except (subprocess.SubprocessError, OSError):
                pass
        _terminate(list(self.pids.values()))
        self.pids.clear()
        for proc in self._procs:
            proc.poll()
        self._procs.clear()
        _kill_steps(str(self.conf))

    def __enter__(self) -> SlurmLab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _terminate(pids: list[int], wait_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL whatever of these PIDs still lives after `wait_s`."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _reap(p)]
        if alive:
            time.sleep(0.05)
    for pid in alive:
        _signal(pid, signal.SIGKILL)
        _reap(pid)


def _reap(pid: int) -> bool:
    """Is the process still alive (a finished child of ours is reaped here)?"""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _kill_steps(conf: str) -> None:
    """slurmstepd ignores SIGTERM and outlives slurmd: kill those of this lab (they carry its SLURM_CONF)."""
    marker = f"SLURM_CONF={conf}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != "slurmstepd":
                continue
            if marker not in (proc / "environ").read_bytes().split(b"\0"):
                continue
        except OSError:
            continue
        pid = int(proc.name)
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True,
                                  check=False).stdout.split()
        for p in [pid, *map(int, children)]:
            _signal(p, signal.SIGKILL)
