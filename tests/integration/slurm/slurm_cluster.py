"""A real single-node Slurm for the tests: munged, slurmctld and slurmd from Debian's packages, in a temp dir.

Everything is private to the directory: its own munge key and socket, its own ``slurm.conf`` and ``gres.conf``
(read through ``SLURM_CONF``), ports picked free, state and logs. Two fake GPUs are character devices made with
mknod, which is what slurmd's GRES needs to hand out ``CUDA_VISIBLE_DEVICES``. The daemons run in the
foreground as our children and are stopped by pid, even after a failed start. The settings keep the cluster
quick: FIFO scheduling at submit time, a short KillWait; finished jobs stay visible for MinJobAge.

With ``accounting=True`` the cluster also has job accounting for ``sacct``: a MariaDB server on an empty data
directory (no system tables: ``--skip-grant-tables``, so no ``mariadb-install-db``, which takes seconds; it
listens on 127.0.0.1 only and lives in the test's directory) and slurmdbd storing into it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo")
ACCOUNTING_DAEMONS = ("/usr/sbin/mariadbd", "/usr/sbin/slurmdbd")
ACCOUNTING_CLIENTS = ("sacct", "sacctmgr")
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
{accounting}
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge={min_job_age}
KillWait=5
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=4000 Gres=gpu:{gpus} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""
NO_ACCOUNTING = "AccountingStorageType=accounting_storage/none"
ACCOUNTING = """\
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={dbd_port}
AccountingStoragePass={munge_socket}"""
SLURMDBD_CONF = """\
AuthType=auth/munge
AuthInfo=socket={munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd_port}
SlurmUser=root
PidFile={dir}/slurmdbd.pid
LogFile={dir}/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=slurm
StorageLoc=slurm_acct_db
"""


def missing_components(*, accounting: bool = False) -> list[str]:
    tools = (*DAEMONS, *CLIENTS, *((*ACCOUNTING_DAEMONS, *ACCOUNTING_CLIENTS) if accounting else ()))
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (slurmd and mknod need it)")
    return missing


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


class SlurmCluster:
    def __init__(self, directory: Path, *, accounting: bool = False, min_job_age: int = 300) -> None:
        self.dir = directory
        self.conf = directory / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.accounting = accounting
        self.min_job_age = min_job_age  # how long Slurm keeps a finished job (squeue shows it)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.ports = {name: free_port() for name in ("ctld", "slurmd", "dbd", "db")}

    def start(self) -> None:
        """Start munged, slurmctld and slurmd; raise RuntimeError with their logs when the node is not idle."""
        for sub in ("state", "spool", "log", "munge", "dev", "db"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self._write_config()
        socket_path = self.dir / "munge" / "munge.socket"
        self._spawn("munged", "/usr/sbin/munged", "--foreground", "--force", f"--socket={socket_path}")
        self._wait_for(socket_path.exists, "munged to create its socket")
        if self.accounting:
            self._start_accounting()
        self._spawn("slurmctld", "/usr/sbin/slurmctld", "-D", "-i")
        self._spawn("slurmd", "/usr/sbin/slurmd", "-D", "-N", "localhost")
        self._wait_for(self._node_idle, "the node to become idle")

    def _start_accounting(self) -> None:
        """MariaDB, then slurmdbd (which creates its database), then the cluster registered in it."""
        db_port, dbd_port = self.ports["db"], self.ports["dbd"]
        self._spawn(
            "mariadbd",
            "/usr/sbin/mariadbd",
            "--no-defaults",
            "--user=root",
            f"--datadir={self.dir / 'db'}",
            f"--socket={self.dir / 'db' / 'mysql.sock'}",
            f"--port={db_port}",
            "--bind-address=127.0.0.1",
            "--skip-grant-tables",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=32M",
            "--innodb-log-file-size=8M",
        )
        self._wait_for(lambda: port_open(db_port), "MariaDB to listen")
        self._spawn("slurmdbd", "/usr/sbin/slurmdbd", "-D")
        self._wait_for(lambda: port_open(dbd_port), "slurmdbd to listen")
        registered = self.run("sacctmgr", "-i", "add", "cluster", "trialfleet", check=False)
        if registered.returncode != 0:
            raise RuntimeError(f"sacctmgr add cluster failed: {registered.stderr}\n{self.logs()}")

    def client_conf(self, directory: Path, controller_address: str) -> Path:
        """slurm.conf for a host that reaches slurmctld at another address (a login node in another network)."""
        directory.mkdir(parents=True, exist_ok=True)
        conf = directory / "slurm.conf"
        text = self.conf.read_text().replace(
            "SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldHost=localhost({controller_address})"
        )
        conf.write_text(text)
        return conf

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
        sockets = {"munge_socket": munge / "munge.socket", "dir": self.dir}
        accounting = (
            ACCOUNTING.format(dbd_port=self.ports["dbd"], **sockets) if self.accounting else NO_ACCOUNTING
        )
        self.conf.write_text(
            SLURM_CONF.format(
                ctld_port=self.ports["ctld"],
                slurmd_port=self.ports["slurmd"],
                accounting=accounting,
                min_job_age=self.min_job_age,
                cpus=NODE_CPUS,
                gpus=GPUS,
                **sockets,
            )
        )
        if self.accounting:  # slurmdbd reads it beside slurm.conf and insists that only its user can read it
            dbd = self.dir / "slurmdbd.conf"
            dbd.write_text(
                SLURMDBD_CONF.format(dbd_port=self.ports["dbd"], db_port=self.ports["db"], **sockets)
            )
            dbd.chmod(0o600)
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
        for name in ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"):
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


@contextlib.contextmanager
def running_cluster(
    directory: Path, needed_by: str, *, accounting: bool = False, **options: int
) -> Iterator[SlurmCluster]:
    """A started cluster in ``directory`` until the block ends; a missing component or daemons that do not start
    fail the tests that need it (``needed_by``: "the Slurm tests"), never skip them. ``SLURM_CONF`` points at
    the session's plain cluster (for this process and all it starts); a cluster with ``accounting`` is reached
    through its own configuration (``cluster.env``)."""
    import pytest

    missing = missing_components(accounting=accounting)
    if missing:
        pytest.fail(f"{needed_by} need {', '.join(missing)} (scripts/system-packages.txt)")
    cluster = SlurmCluster(directory, accounting=accounting, **options)
    saved = os.environ.get("SLURM_CONF")
    if not accounting:
        os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        try:
            cluster.start()
        except RuntimeError as exc:
            pytest.fail(f"the Slurm daemons{' with accounting' * accounting} did not start: {exc}")
        yield cluster
    finally:
        cluster.stop()
        if not accounting:
            if saved is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = saved
