"""One SSH host of a remote fleet: preparing it, talking to its probe, its GPUs, and whether it is up.

Remote layout, under ``~/trialfleet/<experiment id>/`` (or the service's root)::

    keeper/keeper.py, keeper/probe.py   uploaded by the manager; stdlib only, nothing to install
    nni-shim/nni/                      the ``nni`` shim, on a trial's PYTHONPATH unless the host has real nni
    code/                              the trial code directory, unpacked once per host
    trials/<trial id>[.<attempt>]/     one trial directory each (docs/trial-directory.md), code copied to code/
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import posixpath
import shlex
import tarfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialfleet.compat import REAL_NNI_PROBE, SHIM_PATH
from trialfleet.errors import PlatformError
from trialfleet.training_services.gpu import (
    SMI_APPS_QUERY,
    SMI_GPU_QUERY,
    GpuInfo,
    allocate_gpus,
    parse_nvidia_smi,
)
from trialfleet.training_services.ssh import COMMAND_TIMEOUT, SshHost, SshTarget
from trialfleet.training_services.trial_files import KEEPER_SCRIPT, KEEPER_VERSION

if TYPE_CHECKING:
    from trialfleet.config.model import RemoteMachineConfig

log = logging.getLogger(__name__)

MIN_PYTHON = (3, 8)
MIN_FREE_BYTES = 100 * 1024 * 1024
GPU_READING_MAX_AGE = 5.0
PROBE_SCRIPT = KEEPER_SCRIPT.with_name("probe.py")
# runs on whatever python the host has (even Python 2), so that an old one is reported, not a traceback
_INFO_SCRIPT = (
    "import json, os, sys\n"
    "root = os.path.expanduser(sys.argv[1])\n"
    "p = root\n"
    "while not os.path.exists(p): p = os.path.dirname(p)\n"
    "s = os.statvfs(p)\n"
    "print(json.dumps({'version': list(sys.version_info[:3]), 'root': root, 'free': s.f_bavail * s.f_frsize}))\n"
)
_UNPACK_SCRIPT = "import os, sys, tarfile\nos.makedirs(sys.argv[2], exist_ok=True)\ntarfile.open(sys.argv[1]).extractall(sys.argv[2])\n"
_SMI_SEPARATOR = "--trialfleet-gpu-apps--"


def support_archive() -> bytes:
    """keeper.py, probe.py and the nni shim, as one tarball unpacked into the host's experiment root."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for script in (KEEPER_SCRIPT, PROBE_SCRIPT):
            tar.add(script, arcname=f"keeper/{script.name}")
        for path in sorted((SHIM_PATH / "nni").rglob("*.py")):
            tar.add(path, arcname=f"nni-shim/{path.relative_to(SHIM_PATH).as_posix()}")
    return buffer.getvalue()


class RemoteMachine:
    """A host of ``machineList``: connection, remote root, probe calls, GPU readings, up/down state."""

    def __init__(self, config: RemoteMachineConfig, experiment_id: str, root_base: str) -> None:
        self.config = config
        self.ssh = SshHost(SshTarget.from_machine(config))
        self.name = self.ssh.target.name
        self.root_spec = posixpath.join(root_base, experiment_id)
        self.root = ""  # absolute, known once connected
        self.prepared = False
        self.env: dict[str, str] = {}  # what a login on the host gives a process
        self.real_nni = False
        self.launched: set[str] = set()  # trial directories launched here (maybe), for idempotent submit
        self.code_dirs: dict[Path, str] = {}  # local code directory → its unpacked copy here
        self.down_since: float | None = None  # monotonic time the host was first seen unreachable
        self.problem: str | None = None  # why it is down, for Deferred reasons and logs
        self.permanent = False  # auth, host key or python problems: retrying will not help
        self._gpus: tuple[float, list[GpuInfo]] | None = None

    @property
    def ready(self) -> bool:
        return self.prepared and self.ssh.connected

    def shim_dir(self) -> str:
        return posixpath.join(self.root, "nni-shim")

    def trial_dir(self, name: str) -> str:
        return posixpath.join(self.root, "trials", name)

    # ---- commands ----------------------------------------------------------------------------------------

    def shell(self, argv: Sequence[str]) -> str:
        """A command line for the host's shell: ``pythonPath`` first on PATH, every argument quoted."""
        return self.shell_line(" ".join(shlex.quote(arg) for arg in argv))

    def shell_line(self, line: str) -> str:
        if self.config.python_path:
            return f'PATH={shlex.quote(self.config.python_path)}:"$PATH"; export PATH; {line}'
        return line

    async def run_checked(self, argv: Sequence[str], what: str, *, timeout: float = COMMAND_TIMEOUT) -> bytes:
        result = await self.ssh.run(self.shell(argv), timeout=timeout)
        if result.exit_status != 0:
            raise PlatformError(f"{self.name}: {what} failed ({result.explain()})")
        return result.stdout

    async def probe(self, command: str, request: dict[str, Any], *, timeout: float = COMMAND_TIMEOUT) -> Any:
        """One round trip to ``probe.py``; SshLinkError when the link fails, PlatformError when the probe does."""
        argv = ["python3", "-I", "-S", posixpath.join(self.root, "keeper", "probe.py"), command]
        result = await self.ssh.run(self.shell(argv), stdin=json.dumps(request).encode(), timeout=timeout)
        if result.exit_status != 0:
            raise PlatformError(f"{self.name}: probe {command} failed ({result.explain()})")
        try:
            return json.loads(result.stdout)
        except ValueError as exc:
            raise PlatformError(f"{self.name}: probe {command} answered {result.stdout[:200]!r}") from exc

    # ---- preparation -------------------------------------------------------------------------------------

    async def prepare(self, support: bytes, staging: Path, code_archive: tuple[Path, Path] | None) -> None:
        """Connect and make the host ready; PlatformError (SshLinkError if unreachable) naming what is wrong."""
        self.prepared = False
        await self.ssh.connect()
        info = json.loads(await self.run_checked(["python3", "-c", _INFO_SCRIPT, self.root_spec], "python3"))
        version = tuple(info["version"])
        if version < MIN_PYTHON:
            found = ".".join(map(str, version))
            raise PlatformError(
                f"{self.name}: python3 is {found}; trials need Python >= 3.8 (set pythonPath)"
            )
        self.root = info["root"]
        needed = MIN_FREE_BYTES + (3 * code_archive[1].stat().st_size if code_archive else 0)
        if info["free"] < needed:
            raise PlatformError(
                f"{self.name}: only {info['free'] // 2**20} MB free under {self.root}, "
                f"need at least {needed // 2**20} MB"
            )
        await self.run_checked(
            ["mkdir", "-p", "--", posixpath.join(self.root, "trials")], "creating the root"
        )
        await self._upload_support(support, staging)
        answer = await self._refresh(code_archive[1] if code_archive else None)
        self.launched = set(answer["launched"])
        if code_archive is not None:
            self.code_dirs[code_archive[0]] = posixpath.join(self.root, "code")
        self.prepared, self.problem, self.permanent = True, None, False

    async def _upload_support(self, support: bytes, staging: Path) -> None:
        local = staging / "support.tar.gz"
        if not local.exists():
            local.write_bytes(support)
        remote = posixpath.join(self.root, "support.tar.gz")
        await self.ssh.put(local, remote)
        await self.run_checked(["python3", "-c", _UNPACK_SCRIPT, remote, self.root], "unpacking the keeper")
        keeper = posixpath.join(self.root, "keeper", "keeper.py")
        version = (await self.run_checked(["python3", keeper, "--version"], "keeper.py --version")).decode()
        if version.strip() != KEEPER_VERSION:
            raise PlatformError(
                f"{self.name}: trial keeper version mismatch: {keeper} says {version.strip()!r}, "
                f"this manager speaks {KEEPER_VERSION!r}"
            )

    async def _refresh(self, code_archive: Path | None) -> dict[str, Any]:
        """Run ``probe prepare`` (unpacking ``code_archive`` if given) and keep what it tells."""
        request: dict[str, Any] = {
            "root": self.root,
            "real_nni_probe": REAL_NNI_PROBE,
            "shim_dir": self.shim_dir(),
        }
        if code_archive is not None:
            remote = posixpath.join(self.root, "code.tar.gz")
            await self.ssh.put(code_archive, remote)
            request["code_archive"] = remote
        answer: dict[str, Any] = await self.probe("prepare", request, timeout=300)
        self.env, self.real_nni = dict(answer["env"]), bool(answer["real_nni"])
        return answer

    async def upload_code(self, local_dir: Path, archive: Path) -> str:
        """A code directory other than the configured one, unpacked once beside it; returns where."""
        digest = hashlib.sha1(str(local_dir).encode()).hexdigest()[:12]
        remote_archive = posixpath.join(self.root, f"code-{digest}.tar.gz")
        await self.ssh.put(archive, remote_archive)
        target = posixpath.join(self.root, f"code-{digest}")
        argv = ["python3", "-c", _UNPACK_SCRIPT, remote_archive, target]
        await self.run_checked(argv, f"unpacking {local_dir}", timeout=300)
        self.code_dirs[local_dir] = target
        return target

    async def reconnect(self, support: bytes, staging: Path, code_archive: tuple[Path, Path] | None) -> None:
        if not self.prepared:
            await self.prepare(support, staging, code_archive)
            return
        await self.ssh.connect()
        await self._refresh(None)

    # ---- state -------------------------------------------------------------------------------------------

    def mark_down(self, why: str, now: float) -> None:
        if self.down_since is None:
            self.down_since = now
            log.warning("remote: %s is unreachable: %s", self.name, why)
        self.problem = why

    def mark_up(self) -> None:
        if self.down_since is not None:
            log.info(
                "remote: %s is reachable again after %.0f s", self.name, time.monotonic() - self.down_since
            )
        self.down_since, self.problem = None, None

    # ---- GPUs --------------------------------------------------------------------------------------------

    async def read_gpus(self) -> list[GpuInfo]:
        """This host's GPUs through ``nvidia-smi`` over SSH (none when it is missing), cached a few seconds."""
        now = time.monotonic()
        if self._gpus is not None and now - self._gpus[0] <= GPU_READING_MAX_AGE:
            return self._gpus[1]
        gpu_query, apps_query = (shlex.join(["nvidia-smi", *q]) for q in (SMI_GPU_QUERY, SMI_APPS_QUERY))
        result = await self.ssh.run(self.shell_line(f"{gpu_query} && echo {_SMI_SEPARATOR} && {apps_query}"))
        gpus: list[GpuInfo] = []
        if result.exit_status == 0:
            gpu_csv, _, apps_csv = result.stdout.decode("utf-8", "replace").partition(_SMI_SEPARATOR)
            gpus = parse_nvidia_smi(gpu_csv, apps_csv)
        else:
            log.info("remote: %s: no GPU reading (%s)", self.name, result.explain())
        self._gpus = (now, gpus)
        return gpus

    def forget_gpu_reading(self) -> None:
        self._gpus = None

    def allocate(self, gpus: list[GpuInfo], count: int, assigned: Mapping[int, int]) -> list[int] | str:
        indices = self.config.gpu_indices
        return allocate_gpus(
            gpus,
            count,
            assigned=assigned,
            max_trials_per_gpu=self.config.max_trial_number_per_gpu,
            use_active_gpu=self.config.use_active_gpu,
            only_indices=set(indices) if indices is not None else None,
        )

    # ---- trial files -------------------------------------------------------------------------------------

    async def read_trial_file(self, trial_dir: str, relative: str) -> bytes:
        """A file of a trial directory; ValueError when it leads outside (a symbolic link the trial made)."""
        base = await self.ssh.realpath(trial_dir)
        path = await self.ssh.realpath(posixpath.join(trial_dir, relative))
        if path != base and not path.startswith(base.rstrip("/") + "/"):
            raise ValueError(f"{relative!r} leads outside the trial directory {trial_dir}")
        return await self.ssh.read(path)

    async def copy_trial_files(self, trial_dir: str, names: Sequence[str], local_dir: Path) -> None:
        """Copy what exists of ``names`` to ``local_dir`` (an ended trial's logs, kept on the manager)."""
        local_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            try:
                data = await self.ssh.read(posixpath.join(trial_dir, name))
            except FileNotFoundError:
                continue
            except PlatformError as exc:
                log.info("remote: could not copy %s/%s from %s: %s", trial_dir, name, self.name, exc)
                return
            await asyncio.to_thread((local_dir / name).write_bytes, data)
