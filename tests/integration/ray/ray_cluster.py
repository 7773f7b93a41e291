"""A real Ray cluster for the tests: a head and a second node, two raylets with different resources, on this machine.

Each node is ``ray start --block`` run as our child in a session of its own, the nodes sharing one temp directory
(short, for Ray's socket paths) below a root of their own, as Ray's own multi-node test clusters do: a node's agent
finds a job's log at the path the cluster's session names, which on one machine must be the same directory. Ports
are picked free: nothing is shared with another Ray on the machine, and ``ray stop`` (which stops every Ray here)
is never used. A node is stopped by its pid: SIGTERM to ``ray start``, which takes its daemons down, then SIGKILL
for whatever is left of its tree or of the processes carrying its marker in their environment (agents a dead
raylet left behind, a job's entrypoint, a trial); the cluster's last sweep also takes any process working in the
root. The head advertises 127.0.0.2 and the second node 127.0.0.3: Ray replaces 127.0.0.1 by the machine's
primary address. GCS health checks are frequent, so a lost node is noticed in seconds. A starting node runs at a
higher priority where we may (Ray's fixed startup deadlines, see :func:`_starting_priority`), and one that does
not come up is started once more.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path

RAY = shutil.which("ray")
READY_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
HEAD_IP, NODE_IP = "127.0.0.2", "127.0.0.3"
#: the head holds one "slot" and the second node two: trials asking for a slot go where one is free
HEAD_RESOURCES = {"slot": 1, "head": 1}
NODE_RESOURCES = {"slot": 2, "worker": 1}
CPUS = 2
STARTING_NICENESS = -10
MARKER_VARIABLE = "TRIALFLEET_RAY_TEST_NODE"
ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # a killed raylet refuses connections at once, so five failed checks a second apart find it in ~5 s; the
    # long timeout keeps a raylet that is merely slow on a loaded machine from being declared dead
    "RAY_health_check_initial_delay_ms": "2000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "10000",
    "RAY_health_check_failure_threshold": "5",
}


_TAKEN: set[int] = set()


def free_port() -> int:
    """A port nothing listens on, and not one handed out before (the kernel may offer a port twice)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("", 0))
            port = int(sock.getsockname()[1])
        if port not in _TAKEN:
            _TAKEN.add(port)
            return port


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid → (parent pid, start ticks) of every live process (zombies left out) of this machine."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            raw = Path(f"/proc/{name}/stat").read_text()
            fields = raw[raw.rindex(")") + 2 :].split()
            if fields[0] != "Z":
                table[int(name)] = (int(fields[1]), int(fields[19]))
    return table


def descendants(roots: Iterable[int]) -> dict[int, int]:
    """The processes below ``roots`` (and the roots), pid → start ticks."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = {}, [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        if pid not in found:
            found[pid] = table[pid][1]
            stack += children.get(pid, [])
    return found


def working_in(root: Path) -> dict[int, int]:
    """Processes whose working directory or command line is below ``root``: a job's entrypoint, its trial."""
    found = {}
    marker = str(root)
    for pid, (_, ticks) in _proc_table().items():
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{pid}/cwd")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if cwd.startswith(marker) or marker in cmdline:
                found[pid] = ticks
    found.pop(os.getpid(), None)
    return found


def marked(marker: str) -> dict[int, int]:
    """The processes whose environment holds ``MARKER_VARIABLE=marker``, pid → start ticks."""
    needle = f"{MARKER_VARIABLE}={marker}\0".encode()
    table = _proc_table()
    found = {}
    for pid, (_, ticks) in table.items():
        with contextlib.suppress(OSError):
            if needle in Path(f"/proc/{pid}/environ").read_bytes():
                found[pid] = ticks
    found.pop(os.getpid(), None)
    return found


def kill_all(processes: dict[int, int]) -> None:
    """SIGKILL each of ``processes`` (pid → start ticks) still running, and wait until they are gone."""
    deadline = time.monotonic() + STOP_TIMEOUT
    while True:
        table = _proc_table()
        alive = [pid for pid, ticks in processes.items() if pid in table and table[pid][1] == ticks]
        if not alive:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {alive} survived SIGKILL")
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _starting_priority() -> None:
    """A starting node's daemons run ahead of other work on this machine, where we may (root): Ray 2.60 gives a
    node's dashboard agent a fixed 15 s to write its port files, after which the raylet aborts, and the agent's
    imports alone take longer than that on a machine loaded far beyond its cores."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, STARTING_NICENESS)


class RayNode:
    """One ``ray start --block``, our child."""

    def __init__(self, name: str, root: Path, args: list[str]) -> None:
        self.name = name
        self.temp_dir = root / "ray"
        self.log = root / f"{name}.log"
        self.args = args
        self.process: subprocess.Popen[bytes] | None = None
        #: in the environment of every process of this node: its daemons, the agents a dead raylet left behind
        #: (Ray renames them, and they are no longer below ``ray start``), workers, jobs and their trials
        self.marker = f"{root}/{name}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        assert RAY is not None, "the ray command is not installed (pip install 'ray[default]')"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [RAY, "start", "--block", f"--temp-dir={self.temp_dir}", "--disable-usage-stats", *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **ENV, MARKER_VARIABLE: self.marker},
                preexec_fn=_starting_priority,
            )

    def settle(self) -> None:
        """The node is up: its processes (and the workers they start from now on) go back to the usual priority."""
        assert self.process is not None
        for pid in descendants([self.process.pid]):
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, pid, 0)

    def raylet_pid(self) -> int:
        assert self.process is not None
        for pid in descendants([self.process.pid]):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"/raylet"):
                    return pid
        raise AssertionError(f"{self.name}: no raylet runs")

    def kill_raylet(self) -> None:
        """The node is lost, as when its machine goes: its raylet dies at once (``ray start`` then ends the rest)."""
        os.kill(self.raylet_pid(), signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM to ``ray start`` (it stops its daemons), then SIGKILL to whatever of this node is left."""
        if self.process is None:
            return
        tree = {**descendants([self.process.pid]), **marked(self.marker)}
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        kill_all({**tree, **descendants(tree), **marked(self.marker)})
        self.process = None

    def tail(self, lines: int = 30) -> str:
        """The end of ``ray start``'s output, and why a raylet of this cluster aborted, if one did."""
        text = ""
        with contextlib.suppress(OSError):
            text = "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        for raylet_log in sorted(self.temp_dir.glob("session_*/logs/raylet.out")):
            with contextlib.suppress(OSError):
                aborted = [
                    line for line in raylet_log.read_text(errors="replace").splitlines() if " C " in line
                ]
                # e.g. its dashboard agent did not write its port file within 15 s (Ray's fixed limit), as
                # happens on a machine loaded far beyond its cores
                text += "".join(f"\n{raylet_log.parent.parent.name}: {line[:600]}" for line in aborted)
        return text


class RayCluster:
    """The head (dashboard on 127.0.0.1) and a second node, each with the resources above."""

    def __init__(self, root: Path | None = None) -> None:
        # short: Ray's unix sockets live below the temp directories, and their paths are limited to 107 bytes
        self.root = root or Path(tempfile.mkdtemp(prefix="tfray-", dir="/tmp"))
        self.gcs_port, self.dashboard_port = free_port(), free_port()
        self.address = f"http://127.0.0.1:{self.dashboard_port}"
        self.head = RayNode("head", self.root, self._head_args())
        self.node = RayNode("node", self.root, self._node_args())

    def _head_args(self) -> list[str]:
        return [
            "--head",
            f"--node-ip-address={HEAD_IP}",
            f"--port={self.gcs_port}",
            f"--num-cpus={CPUS}",
            "--num-gpus=0",
            f"--resources={json.dumps(HEAD_RESOURCES)}",
            "--object-store-memory=100000000",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={self.dashboard_port}",
            f"--ray-client-server-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
        ]

    def _node_args(self) -> list[str]:
        return [
            f"--address={HEAD_IP}:{self.gcs_port}",
            f"--node-ip-address={NODE_IP}",
            f"--num-cpus={CPUS}",
            "--num-gpus=0",
            f"--resources={json.dumps(NODE_RESOURCES)}",
            "--object-store-memory=100000000",
            f"--dashboard-agent-listen-port={free_port()}",
        ]

    def start(self) -> None:
        self.start_head()
        self.start_node()

    def start_head(self) -> None:
        self._start(self.head, HEAD_IP, "the head's Jobs API")

    def start_node(self) -> None:
        self._start(self.node, NODE_IP, "the second node to join")

    def _start(self, node: RayNode, ip: str, what: str) -> None:
        for attempt in range(2):
            node.start()
            try:
                self._wait(lambda: ip in self.alive_nodes().values(), node, what)
                node.settle()
                return
            except RuntimeError:
                node.stop()
                if attempt:
                    raise

    def stop(self) -> None:
        self.node.stop()
        self.head.stop()
        kill_all(working_in(self.root))
        shutil.rmtree(self.root, ignore_errors=True)

    def alive_nodes(self) -> dict[str, str]:
        """Node id → IP of the nodes the head counts alive ({} while the dashboard does not answer)."""
        try:
            with urllib.request.urlopen(f"{self.address}/api/v0/nodes", timeout=5) as response:
                nodes = json.load(response)["data"]["result"]["result"]
        except (OSError, ValueError, KeyError):
            return {}
        return {node["node_id"]: node["node_ip"] for node in nodes if node["state"] == "ALIVE"}

    def node_id(self, ip: str) -> str:
        return next(node_id for node_id, node_ip in self.alive_nodes().items() if node_ip == ip)

    def _wait(self, ready: Callable[[], bool], node: RayNode, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while not ready():
            if not node.running or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{what} is not ready (ray start exited: {not node.running}):\n{node.tail()}"
                )
            time.sleep(0.5)
