"""A real single-node Slurm for the tests: munged, slurmctld and slurmd from Debian's packages, in a temp dir.

Everything is private to the directory: its own munge key and socket, its own ``slurm.conf`` and ``gres.conf``
(read through ``SLURM_CONF``), ports picked free, state and logs. Two fake GPUs are character devices made with
mknod, which is what slurmd's GRES needs to hand out ``CUDA_VISIBLE_DEVICES``. The daemons run in the
foreground as our children and are stopped by pid, even after a failed start. The settings keep the cluster
quick: FIFO scheduling at submit time, a short KillWait; finished jobs stay visible for MinJobAge.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo")
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0  # KillWait (5 s) after the cancel, then the job's processes are gone
NODE_CPUS = 8  # more than the machine has (config_overrides): trials mostly sleep
GPUS = 2

SLURM_CONF = """\
ClusterName=trialfleet
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=300
KillWait=5
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=4000 Gres=gpu:{gpus} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def missing_components() -> list[str]:
    missing = [tool for tool in (*DAEMONS, *CLIENTS) if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (slurmd and mknod need it)")
    return missing


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SlurmCluster:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.conf = directory / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        """Start munged, slurmctld and slurmd; raise RuntimeError with their logs when the node is not idle."""
        for sub in ("state", "spool", "log", "munge", "dev"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self._write_config()
        socket_path = self.dir / "munge" / "munge.socket"
        self._spawn("munged", "/usr/sbin/munged", "--foreground", "--force", f"--socket={socket_path}")
        self._wait_for(socket_path.exists, "munged to create its socket")
        self._spawn("slurmctld", "/usr/sbin/slurmctld", "-D", "-i")
        self._spawn("slurmd", "/usr/sbin/slurmd", "-D", "-N", "localhost")
        self._wait_for(self._node_idle, "the node to become idle")

    def _write_config(self) -> None:
        munge = self.dir / "munge"
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        munge.chmod(0o755)  # munged insists that the socket's directory be searchable by all
        for index in range(GPUS):
            device = self.dir / "dev" / f"nvidia{index}"
            if not device.exists():
                os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))  # a character device, like /dev/null
        self.conf.write_text(
            SLURM_CONF.format(
                dir=self.dir,
                ctld_port=free_port(),
                slurmd_port=free_port(),
                munge_socket=munge / "munge.socket",
                cpus=NODE_CPUS,
                gpus=GPUS,
            )
        )
        (self.dir / "gres.conf").write_text(
            f"NodeName=localhost Name=gpu File={self.dir}/dev/nvidia[0-{GPUS - 1}]\n"
        )

    def _spawn(self, name: str, *argv: str) -> None:
        munge = self.dir / "munge"
        if name == "munged":
            argv = (
                *argv,
                f"--key-file={munge / 'munge.key'}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--seed-file={munge / 'munged.seed'}",
                f"--log-file={self.dir / 'log' / 'munged.log'}",
            )
        out = open(self.dir / "log" / f"{name}.out", "wb")  # noqa: SIM115 - the daemon's, closed with it
        try:
            self.processes[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        finally:
            out.close()

    def _node_idle(self) -> bool:
        result = self.run("sinfo", "--noheader", "--Format=StateLong", check=False)
        return result.returncode == 0 and result.stdout.strip() == "idle"

    def _wait_for(self, condition: object, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            dead = [name for name, process in self.processes.items() if process.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}\n{self.logs()}")
            if condition():  # type: ignore[operator]
                return
            time.sleep(0.1)
        raise RuntimeError(f"timed out after {READY_TIMEOUT:g} s waiting for {what}\n{self.logs()}")

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60, check=check)

    def logs(self) -> str:
        parts = []
        for path in sorted((self.dir / "log").glob("*")):
            text = path.read_text(errors="replace")[-4000:]
            parts.append(f"----- {path.name} -----\n{text}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel every job, then SIGTERM each daemon by pid (slurmd first), SIGKILL what is left.

        Jobs go first: their slurmstepd processes, and the trials under them, outlive slurmd.
        """
        if "slurmctld" in self.processes:
            self._cancel_all_jobs()
        for name in ("slurmd", "slurmctld", "munged"):
            process = self.processes.pop(name, None)
            if process is None:
                continue
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    def _cancel_all_jobs(self) -> None:
        listed = self.run("squeue", "--noheader", "--format=%i", check=False)
        jobs = listed.stdout.split()
        if not jobs:
            return
        self.run("scancel", *jobs, check=False)
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline:
            left = self.run("squeue", "--noheader", "--format=%i", check=False)
            if left.returncode != 0 or not left.stdout.split():
                return
            time.sleep(0.2)
