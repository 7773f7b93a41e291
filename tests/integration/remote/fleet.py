"""A fleet of real SSH hosts on this machine: network namespaces on a private bridge, one sshd each.

Each host is a network namespace with a veth on a bridge (10.x addresses made here, private to this machine),
running its own sshd (ed25519 host key) inside its own mount namespace where a per-host directory is mounted
over root's home. The hosts share this machine's file system and process table otherwise, so the remote roots
(``~/trialfleet/…``) are distinct per host while the tests can still look at every host's files through
:meth:`Host.local`. Faults: link down/up (``ip link``), blackhole (nftables drop inside the namespace), sshd
killed and restarted. Everything is torn down by pid and by name, even after a failure.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REQUIRED_TOOLS = ("ip", "nft", "ssh-keygen", "/usr/sbin/sshd", "/usr/bin/python3")
REMOTE_HOME = "/root"
SSHD_READY_TIMEOUT = 10.0


def missing_components() -> list[str]:
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (network namespaces need it)")
    return missing


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=30)


def keygen(path: Path) -> str:
    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path))
    return Path(f"{path}.pub").read_text().strip()


def _parent_table() -> dict[int, int]:
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                raw = (entry / "stat").read_text()
                table[int(entry.name)] = int(raw[raw.rindex(")") + 2 :].split()[1])
    return table


def descendants(pid: int) -> set[int]:
    table = _parent_table()
    found, stack = set(), [pid]
    while stack:
        parent = stack.pop()
        for child, ppid in table.items():
            if ppid == parent and child not in found:
                found.add(child)
                stack.append(child)
    return found


def kill_and_wait(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
        for pid in pids:  # reap the ones that are our children
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.02)


@dataclass
class Host:
    index: int
    netns: str
    veth: str
    address: str
    dir: Path
    client_key: Path
    known_hosts: Path
    host_key_line: str = ""
    sshd: subprocess.Popen[bytes] | None = None
    blackholed: bool = False
    link_is_down: bool = False
    extra_sshd_options: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"h{self.index}"

    @property
    def home(self) -> Path:
        return self.dir / "home"

    @property
    def lease_dir(self) -> Path:
        """This host's machine-wide GPU lease directory (the hosts share this machine's file system)."""
        return self.dir / "gpu-leases"

    def local(self, remote_path: str) -> Path:
        """Where the test sees a path of this host (its home is a directory of the test)."""
        assert remote_path.startswith(REMOTE_HOME + "/"), remote_path
        return self.home / remote_path[len(REMOTE_HOME) + 1 :]

    def machine(self, **overrides: Any) -> dict[str, Any]:
        """This host as a ``machineList`` entry (NNI's camelCase keys)."""
        entry: dict[str, Any] = {
            "host": self.address,
            "port": 22,
            "user": "root",
            "sshKeyFile": str(self.client_key),
            "knownHosts": str(self.known_hosts),
        }
        entry.update(overrides)
        return entry

    def set_gpus(self, gpus: list[dict[str, Any]], processes: list[dict[str, Any]] | None = None) -> None:
        (self.dir / "gpus.json").write_text(json.dumps({"gpus": gpus, "processes": processes or []}))

    # ---- sshd --------------------------------------------------------------------------------------------

    def write_sshd_config(self, authorized_keys: Path) -> Path:
        config = self.dir / "sshd_config"
        lines = [
            "Port 22",
            f"ListenAddress {self.address}",
            f"HostKey {self.dir / 'host_key'}",
            "PidFile none",
            f"AuthorizedKeysFile {authorized_keys}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "PermitRootLogin prohibit-password",
            "StrictModes no",
            "Subsystem sftp internal-sftp",
            "LogLevel VERBOSE",
            "MaxStartups 100",  # (MaxSessions is sshd's default, 10, as on most hosts)
            f"SetEnv TRIALFLEET_FAKE_GPUS={self.dir / 'gpus.json'} TRIALFLEET_LEASE_DIR={self.lease_dir}",
            *self.extra_sshd_options,
        ]
        config.write_text("\n".join(lines) + "\n")
        return config

    def start_sshd(self) -> None:
        assert self.sshd is None or self.sshd.poll() is not None, "sshd already runs"
        log = open(self.dir / "sshd.log", "ab")  # noqa: SIM115 - owned by the child
        script = 'mount --bind "$1" "$2" && exec /usr/sbin/sshd -D -e -f "$3"'
        argv = ["ip", "netns", "exec", self.netns, "sh", "-c", script, "sh"]
        argv += [str(self.home), REMOTE_HOME, str(self.dir / "sshd_config")]
        self.sshd = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        self._wait_until_listening()

    def _wait_until_listening(self) -> None:
        deadline = time.monotonic() + SSHD_READY_TIMEOUT
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection((self.address, 22), timeout=1):
                return
            assert self.sshd is not None and self.sshd.poll() is None, (self.dir / "sshd.log").read_text()
            time.sleep(0.05)
        raise AssertionError(f"sshd of {self.name} not listening after {SSHD_READY_TIMEOUT}s")

    def kill_sshd(self) -> None:
        """sshd dies with every connection it serves (trials started through it run on, detached)."""
        if self.sshd is None:
            return
        kill_and_wait({self.sshd.pid, *descendants(self.sshd.pid)})
        self.sshd.wait(timeout=10)
        self.sshd = None

    # ---- network faults ----------------------------------------------------------------------------------

    def link_down(self) -> None:
        run("ip", "link", "set", self.veth, "down")
        self.link_is_down = True

    def link_up(self) -> None:
        run("ip", "link", "set", self.veth, "up")
        self.link_is_down = False

    def blackhole(self) -> None:
        nft = ["ip", "netns", "exec", self.netns, "nft"]
        run(*nft, "add", "table", "inet", "fault")
        run(
            *nft,
            "add",
            "chain",
            "inet",
            "fault",
            "input",
            "{ type filter hook input priority 0; policy accept; }",
        )
        run(*nft, "add", "rule", "inet", "fault", "input", "drop")
        self.blackholed = True

    def heal(self) -> None:
        if self.blackholed:
            run("ip", "netns", "exec", self.netns, "nft", "delete", "table", "inet", "fault")
            self.blackholed = False
        if self.link_is_down:
            self.link_up()
        if self.sshd is None or self.sshd.poll() is not None:
            self.sshd = None
            self.start_sshd()

    def processes(self) -> set[int]:
        """Every process in this host's network namespace (sshd, keepers, trials)."""
        out = run("ip", "netns", "pids", self.netns, check=False).stdout
        return {int(pid) for pid in out.split()}


class Fleet:
    """``count`` hosts on a bridge; :meth:`up` builds them, :meth:`down` removes every trace."""

    #: fleets of one process (the hybrid and the remote tests' session fleets live together) get names and a
    #: subnet of their own
    _made = itertools.count()

    def __init__(self, base: Path, count: int) -> None:
        index = next(Fleet._made) % 10
        tag = f"{os.getpid() % 100000}{index}"  # "tfv" + tag + "h9" stays within an interface name's 15 bytes
        self.base = base
        self.bridge = f"tfb{tag}"
        self.subnet = f"10.213.{(os.getpid() * 7 + index) % 200 + 20}"
        self.client_key = base / "client_key"
        self.wrong_key = base / "wrong_key"
        self.known_hosts = base / "known_hosts"
        self.authorized_keys = base / "authorized_keys"
        self.hosts = [
            Host(
                i,
                f"tfn{tag}h{i}",
                f"tfv{tag}h{i}",
                f"{self.subnet}.{i + 1}",
                base / f"h{i}",
                self.client_key,
                self.known_hosts,
            )
            for i in range(1, count + 1)
        ]

    def up(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.base.mkdir(parents=True, exist_ok=True)
        self.authorized_keys.write_text(keygen(self.client_key) + "\n")
        keygen(self.wrong_key)
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for host in self.hosts:
            self._add_host(host)
        self.known_hosts.write_text("".join(f"{h.address} {h.host_key_line}\n" for h in self.hosts))

    def _add_host(self, host: Host) -> None:
        host.home.mkdir(parents=True)
        host.set_gpus([])
        key_line = keygen(host.dir / "host_key")
        host.host_key_line = " ".join(key_line.split()[:2])
        run("ip", "netns", "add", host.netns)
        run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        run("ip", "link", "set", host.veth, "master", self.bridge, "up")
        run("ip", "-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        run("ip", "-n", host.netns, "link", "set", "eth0", "up")
        run("ip", "-n", host.netns, "link", "set", "lo", "up")
        host.write_sshd_config(self.authorized_keys)
        host.start_sshd()

    def heal(self) -> None:
        for host in self.hosts:
            host.heal()

    def down(self) -> None:
        for host in self.hosts:
            with contextlib.suppress(Exception):
                kill_and_wait(host.processes() | ({host.sshd.pid} if host.sshd else set()))
            with contextlib.suppress(Exception):
                if host.sshd is not None:
                    host.sshd.wait(timeout=10)
            run("ip", "netns", "del", host.netns, check=False)
        run("ip", "link", "del", self.bridge, check=False)

    def host_of(self, handle: dict[str, Any]) -> Host:
        return next(h for h in self.hosts if f"@{h.address}:" in handle["machine"])
