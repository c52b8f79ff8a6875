"""A one-host Slurm cluster for the tests: munged, slurmctld and slurmd from Debian's packages,
started as root in a private directory with a slurm.conf describing this machine.

:func:`start` returns the environment (``SLURM_CONF``) the Slurm commands need, or raises
:class:`Unavailable` with the reason it cannot start (not root, packages missing, a daemon that
does not come up). Everything lives under the given directory; :func:`stop` ends the daemons.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo")


class Unavailable(Exception):
    """Slurm cannot be started here; the message says why."""


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]
    node: str
    processes: list[subprocess.Popen] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm_conf(root: Path, node: str, cpus: int, munge_socket: Path, task: tuple[str, ...]) -> str:
    ctld, slurmd = _free_port(), _free_port()
    return (
        "\n".join(
            [
                "ClusterName=pinlabtest",
                f"SlurmctldHost={node}(127.0.0.1)",
                f"SlurmctldPort={ctld}",
                f"SlurmdPort={slurmd}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={munge_socket}",
                f"StateSaveLocation={root}/state",
                f"SlurmdSpoolDir={root}/spool",
                f"SlurmctldPidFile={root}/slurmctld.pid",
                f"SlurmdPidFile={root}/slurmd.pid",
                f"SlurmctldLogFile={root}/log/slurmctld.log",
                f"SlurmdLogFile={root}/log/slurmd.log",
                "ProctrackType=proctrack/linuxproc",
                *task,
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "AccountingStorageType=accounting_storage/none",
                "JobCompType=jobcomp/none",
                "JobAcctGatherType=jobacct_gather/none",
                "MpiDefault=none",
                "ReturnToService=2",
                "SchedulerType=sched/builtin",
                f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=512 State=UNKNOWN",
                "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            ]
        )
        + "\n"
    )


#: How the cluster treats a step's tasks: by default it binds none (a step's tasks may use every
#: CPU of the node); :data:`BINDING` binds each task to cores, as most production clusters do.
NO_BINDING = ("TaskPlugin=task/none",)
BINDING = ("TaskPlugin=task/affinity", "TaskPluginParam=Cores")


def start(root: Path, task: tuple[str, ...] = NO_BINDING) -> Cluster:
    if os.geteuid() != 0:
        raise Unavailable("starting Slurm's daemons needs root")
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if missing:
        raise Unavailable(
            f"Slurm or munge is not installed ({', '.join(missing)} missing; make install installs slurmctld, slurmd, slurm-client and munge)"
        )
    for sub in ("state", "spool", "log", "munge"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    key, sock = root / "munge" / "munge.key", root / "munge" / "munge.sock"
    subprocess.run(["mungekey", "-c", "-f", "-k", str(key)], check=True, capture_output=True)
    key.chmod(0o600)
    subprocess.run(
        [
            "munged",
            "--force",
            f"--socket={sock}",
            f"--key-file={key}",
            f"--pid-file={root}/munge/munged.pid",
            f"--log-file={root}/munge/munged.log",
            f"--seed-file={root}/munge/munged.seed",
        ],
        check=True,
        capture_output=True,
    )
    node = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(_slurm_conf(root, node, len(os.sched_getaffinity(0)), sock, task))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = Cluster(root, env, node)
    log = open(root / "log" / "daemons.out", "w")
    cluster.processes.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(conf)], env=env, stdout=log, stderr=subprocess.STDOUT))
    cluster.processes.append(subprocess.Popen(["slurmd", "-D", "-f", str(conf), "-N", node], env=env, stdout=log, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
        if state.returncode == 0 and state.stdout.strip() in ("idle", "mixed", "allocated"):
            return cluster
        if any(p.poll() is not None for p in cluster.processes):
            break
        time.sleep(0.3)
    stop(cluster)
    tail = (root / "log" / "daemons.out").read_text()[-500:] if (root / "log" / "daemons.out").exists() else ""
    raise Unavailable(f"the Slurm daemons did not come up within a minute: {tail.strip() or 'no output'}")


def stop(cluster: Cluster) -> None:
    subprocess.run(["scancel", "--quiet", "-u", "root"], env=cluster.env, capture_output=True, check=False)
    for p in cluster.processes:
        p.terminate()
    for p in cluster.processes:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    pid_file = cluster.root / "munge" / "munged.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text().strip()), 15)
        except (OSError, ValueError):
            pass


def wait_idle(cluster: Cluster, timeout: float = 180) -> bool:
    """Wait until no job of the cluster is pending or running; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queue = subprocess.run(["squeue", "-h"], env=cluster.env, capture_output=True, text=True)
        if queue.returncode == 0 and not queue.stdout.strip():
            return True
        time.sleep(0.5)
    return False
