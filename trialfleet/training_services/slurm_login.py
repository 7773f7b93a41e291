"""Slurm from outside the cluster: every command and every file of the shared directory through a login node.

:class:`LoginNode` holds the one SSH connection (:class:`~.ssh.SshHost`: keepalive, a timeout on every call).
When the link breaks, operations fail at once with :class:`~.ssh.SshLinkError` and the connection is opened
again in the background, first 0.5 s later, then at delays doubling up to 10 s. Nothing is lost meanwhile: the
trials are Slurm jobs that run on, and the service reads their directories again from the cursors once the
link is back.

:class:`SshCommandRunner` runs Slurm's commands in the login node's own environment (its ``PATH`` and
``SLURM_CONF``, as a non-interactive SSH session gets them; ``loginNode.pythonPath`` is put first on ``PATH``).
:class:`LoginNodeFiles` is the shared directory as the login node sees it: the support files and each code
directory are uploaded once, as an archive unpacked beside its final name and then renamed into place; trial
inputs are written and the trial directories read by ``probe.py``, the remote platform's worker helper, which
is uploaded with the keeper: one round trip per poll for every live trial.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import posixpath
import shlex
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trialfleet.errors import PlatformError
from trialfleet.training_services.base import LiveTrial, TrialMetric, TrialProblem
from trialfleet.training_services.code_packing import pack_code_dir
from trialfleet.training_services.remote_machine import MIN_PYTHON, support_archive
from trialfleet.training_services.remote_trial_reader import channel_offsets, has_more, read_channels
from trialfleet.training_services.slurm_files import (
    TrialInputs,
    TrialLook,
    code_copy_name,
    support_version,
)
from trialfleet.training_services.slurm_runner import COMMAND_TIMEOUT, CommandResult
from trialfleet.training_services.slurm_script import JOB_ID_FILE, SCRIPT_NAME
from trialfleet.training_services.ssh import CommandResult as SshResult
from trialfleet.training_services.ssh import SshHost, SshLinkError, SshTarget
from trialfleet.training_services.trial_files import (
    METRICS_FILE,
    STDERR_FILE,
    STDOUT_FILE,
    write_trial_inputs,
)

if TYPE_CHECKING:
    from trialfleet.config.model import RemoteMachineConfig

log = logging.getLogger(__name__)

T = TypeVar("T")
RECONNECT_FIRST_DELAY = 0.5
RECONNECT_MAX_DELAY = 10.0
POLL_TIMEOUT = 30.0
POLL_BUDGET = 8 * 1024 * 1024  # metric-channel bytes per poll, shared fairly among the trials
UPLOAD_TIMEOUT = 600.0
#: records a previous submission of the same attempt may have left (as trial_files.write_trial_inputs)
STALE_RECORDS = ("keeper.json", "result.json", METRICS_FILE, STDOUT_FILE, STDERR_FILE)
_EVERYTHING_READ = 1 << 60  # an offset past any channel: a poll that only asks for the records
# the login node's python may be old: it reports its version rather than failing on newer syntax
_PREPARE_SCRIPT = (
    "import json, os, sys\n"
    "if not os.path.isdir(sys.argv[2]): os.makedirs(sys.argv[2])\n"
    "print(json.dumps({'version': list(sys.version_info[:3]), 'support': os.path.isdir(sys.argv[1])}))\n"
)
_UNPACK_SCRIPT = """\
import os, shutil, sys, tarfile
archive, target = sys.argv[1], sys.argv[2]
staging = "%s.tmp.%d" % (target, os.getpid())
os.makedirs(staging)  # an empty code directory is still a directory
with tarfile.open(archive) as tar:
    if hasattr(tarfile, "data_filter"):
        tar.extractall(staging, filter="data")
    else:
        tar.extractall(staging)
try:
    os.rename(staging, target)
except OSError:
    shutil.rmtree(staging, ignore_errors=True)
    if not os.path.isdir(target):
        raise
    # else another manager unpacked the same content first
os.unlink(archive)
"""


class LoginNode:
    """The SSH link to the login node, re-opened in the background, with back-off, after it broke."""

    def __init__(self, config: RemoteMachineConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ssh = SshHost(SshTarget.from_machine(config))
        self.name = self.ssh.target.name
        self.python_path = config.python_path
        self.clock = clock
        self.down_since: float | None = None
        self.problem: str | None = None
        self.next_attempt = 0.0  # clock time before which no reconnect is tried
        self.reconnecting: asyncio.Task[None] | None = None
        self._delay = RECONNECT_FIRST_DELAY

    async def connect(self) -> None:
        """The first connection, at start: its failure is the start's."""
        await self.ssh.connect()

    async def run(
        self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float = COMMAND_TIMEOUT
    ) -> SshResult:
        """Run ``argv`` (every argument quoted for the login shell); its exit status is data."""
        return await self.call(lambda ssh: ssh.run(self.shell(argv), stdin=stdin, timeout=timeout))

    async def call(self, operation: Callable[[SshHost], Awaitable[T]]) -> T:
        """Any operation on the connection; SshLinkError at once while the link is down."""
        self._require_link()
        try:
            return await operation(self.ssh)
        except SshLinkError as exc:
            self._mark_down(str(exc))
            raise

    def shell(self, argv: Sequence[str]) -> str:
        line = shlex.join(argv)
        if self.python_path:
            return f'PATH={shlex.quote(self.python_path)}:"$PATH"; export PATH; {line}'
        return line

    async def close(self) -> None:
        if self.reconnecting is not None:
            self.reconnecting.cancel()
        await self.ssh.close()

    def _require_link(self) -> None:
        """Raise SshLinkError unless connected, starting a reconnect when one is due.

        The reconnect runs in the background: against a host that does not answer it takes until the
        connect timeout, and the manager's loop and its REST requests must not wait for it.
        """
        if self.ssh.connected:
            return
        if self.down_since is None:
            self._mark_down("not connected")  # the keepalive closed it
        busy = self.reconnecting is not None and not self.reconnecting.done()
        if not busy and self.clock() >= self.next_attempt:
            self.reconnecting = asyncio.create_task(self._reconnect())
        raise SshLinkError(f"{self.name}: unreachable ({self.problem}); reconnecting")

    async def _reconnect(self) -> None:
        try:
            await self.ssh.connect()
        except PlatformError as exc:  # a refused key is retried too: the login node may be restarting
            self._mark_down(str(exc))
            return
        self._mark_up()

    def _mark_down(self, why: str) -> None:
        now = self.clock()
        if self.down_since is None:
            self.down_since = now
            log.warning(
                "slurm: login node %s unreachable (%s); its jobs run on, reconnecting", self.name, why
            )
        self.problem = why
        self.next_attempt = now + self._delay
        self._delay = min(self._delay * 2, RECONNECT_MAX_DELAY)

    def _mark_up(self) -> None:
        if self.down_since is not None:
            log.info(
                "slurm: login node %s reachable again after %.0f s", self.name, self.clock() - self.down_since
            )
        self.down_since, self.problem = None, None
        self._delay, self.next_attempt = RECONNECT_FIRST_DELAY, 0.0


class SshCommandRunner:
    """Runs Slurm's client commands on the login node."""

    def __init__(self, node: LoginNode) -> None:
        self.node = node
        self.description = f"login node {node.name}"

    async def run(self, argv: Sequence[str], *, timeout: float = COMMAND_TIMEOUT) -> CommandResult:
        done = await self.node.run(argv, timeout=timeout)
        return CommandResult(
            done.exit_status, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
        )


class LoginNodeFiles:
    """The shared directory through the login node (see the module docstring)."""

    def __init__(self, node: LoginNode, root: str, staging: Path) -> None:
        self.node = node
        self.root = root
        self.staging = staging  # archives are packed here before the upload
        self.description = f"login node {node.name}"
        self.support_dir = posixpath.join(root, ".trialfleet", support_version())
        self._probe = posixpath.join(self.support_dir, "keeper", "probe.py")
        self._code_dirs: dict[Path, str] = {}

    async def prepare(self) -> None:
        try:
            await self.node.connect()
        except PlatformError as exc:
            raise PlatformError(f"slurm: cannot use the login node: {exc}") from exc
        argv = ["python3", "-c", _PREPARE_SCRIPT, self.support_dir, posixpath.join(self.root, "trials")]
        info = json.loads(await self._checked(argv, "preparing the shared directory"))
        if tuple(info["version"]) < MIN_PYTHON:
            found = ".".join(map(str, info["version"]))
            raise PlatformError(
                f"slurm: python3 on {self.description} is {found}; the probe needs 3.8 or newer"
            )
        if not info["support"]:
            archive = self.staging / f"support-{support_version()}.tar.gz"
            await asyncio.to_thread(_write_bytes, archive, support_archive())
            await self._unpack(archive, self.support_dir)

    async def code_dir(self, local: Path) -> str:
        if local not in self._code_dirs:
            name = code_copy_name(local.resolve())
            target = posixpath.join(self.root, "code", name)
            if (await self.node.run(["test", "-d", target])).exit_status != 0:
                archive = await asyncio.to_thread(pack_code_dir, local, self.staging / f"code-{name}.tar.gz")
                await self._unpack(archive, target)
            self._code_dirs[local] = target
        return self._code_dirs[local]

    async def _unpack(self, archive: Path, target: str) -> None:
        """Upload ``archive`` and unpack it as ``target``, which appears whole or not at all."""
        uploaded = f"{target}.{os.getpid()}.tar.gz"
        await self.node.run(["mkdir", "-p", "--", posixpath.dirname(target)])
        await self.node.call(lambda ssh: ssh.put(archive, uploaded, timeout=UPLOAD_TIMEOUT))
        argv = ["python3", "-c", _UNPACK_SCRIPT, uploaded, target]
        await self._checked(argv, f"unpacking {archive.name} into {target}", timeout=UPLOAD_TIMEOUT)

    async def write_trial(self, trial_dir: str, inputs: TrialInputs) -> None:
        with tempfile.TemporaryDirectory() as local:
            write_trial_inputs(
                Path(local),
                parameter_record=inputs.parameter_record,
                argv=inputs.argv,
                cwd=inputs.cwd,
                env=None,
            )
            files = {
                name: (Path(local) / name).read_text("utf-8") for name in ("parameter.cfg", "command.json")
            }
        files[SCRIPT_NAME] = inputs.script
        await self._probe_call(
            "write", {"trial_dir": trial_dir, "files": files, "remove": list(STALE_RECORDS)}
        )

    async def read_job_id(self, trial_dir: str) -> str | None:
        path = posixpath.join(trial_dir, JOB_ID_FILE)
        try:
            data = await self.node.call(lambda ssh: ssh.read(path))
        except FileNotFoundError:
            return None
        return data.decode("utf-8", "replace")

    async def look(self, trials: list[LiveTrial]) -> dict[str, TrialLook]:
        entries = []
        for trial in trials:
            offsets = trial.state.setdefault("offsets", channel_offsets(trial.cursor))
            entries.append({"name": trial.trial_id, "dir": trial.handle["trial_dir"], **offsets})
        request = {"trials": entries, "budget": POLL_BUDGET}
        answer = (await self._probe_call("poll", request, timeout=POLL_TIMEOUT))["trials"]
        return {trial.trial_id: _look(trial, answer[trial.trial_id]) for trial in trials}

    async def keeper_started(self, trial_dir: str) -> bool:
        return (
            await self.node.run(["test", "-e", posixpath.join(trial_dir, "keeper.json")])
        ).exit_status == 0

    async def results_written(self, trial_dirs: Sequence[str]) -> set[str]:
        entries = [
            {"name": d, "dir": d, "metrics": _EVERYTHING_READ, "stdout": _EVERYTHING_READ} for d in trial_dirs
        ]
        answer = (await self._probe_call("poll", {"trials": entries}, timeout=POLL_TIMEOUT))["trials"]
        return {d for d in trial_dirs if answer[d]["result"] is not None}

    async def read_file(self, trial_dir: str, relative: str) -> bytes:
        """Resolved on the login node, so that a symbolic link the trial made cannot lead outside."""

        async def read(ssh: SshHost) -> bytes:
            base = await ssh.realpath(trial_dir)
            path = await ssh.realpath(posixpath.join(trial_dir, relative))
            if path != base and not path.startswith(base.rstrip("/") + "/"):
                raise ValueError(f"{relative!r} leads outside the trial directory {trial_dir}")
            return await ssh.read(path)

        return await self.node.call(read)

    async def close(self) -> None:
        await self.node.close()

    async def _checked(self, argv: Sequence[str], what: str, *, timeout: float = COMMAND_TIMEOUT) -> bytes:
        result = await self.node.run(argv, timeout=timeout)
        if result.exit_status != 0:
            raise PlatformError(f"slurm: {what} on {self.description} failed ({result.explain()})")
        return result.stdout

    async def _probe_call(
        self, command: str, request: dict[str, Any], *, timeout: float = COMMAND_TIMEOUT
    ) -> Any:
        argv = ["python3", "-I", "-S", self._probe, command]
        result = await self.node.run(argv, stdin=json.dumps(request).encode(), timeout=timeout)
        if result.exit_status != 0:
            raise PlatformError(f"slurm: probe {command} on {self.description} failed ({result.explain()})")
        try:
            return json.loads(result.stdout)
        except ValueError as exc:
            raise PlatformError(f"slurm: probe {command} answered {result.stdout[:200]!r}") from exc


def _look(trial: LiveTrial, info: dict[str, Any]) -> TrialLook:
    def read_metrics(final: bool) -> tuple[list[TrialMetric], list[TrialProblem]]:
        return read_channels(trial.trial_id, trial.state["offsets"], info, final=final)

    return TrialLook(info["keeper"] is not None, info["result"], has_more(info), read_metrics)


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
