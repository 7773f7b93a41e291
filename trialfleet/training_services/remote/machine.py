"""One SSH host of a remote fleet: preparing it, talking to its probe, its GPUs, and whether it is up.

Remote layout, under ``<remoteRoot>/<experiment id>/`` (``~/trialfleet/<experiment id>/`` by default)::

    .trialfleet/<version>/            the support bundle (keeper, probe, ``nni`` shim), stdlib only
    code/                             the trial code directory, unpacked once per host (not with a shared
                                      storage: the code is then read from its mount point)
    trials/<trial id>[.<attempt>]/    one trial directory each (docs/trial-directory.md), code copied to code/
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import posixpath
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trialfleet.compat import REAL_NNI_CHECK
from trialfleet.errors import PlatformError
from trialfleet.training_services.gpu import (
    SMI_APPS_QUERY,
    SMI_GPU_QUERY,
    GpuInfo,
    allocate_for,
    parse_nvidia_smi,
)
from trialfleet.training_services.gpu_leases import holdings_of, holdings_record
from trialfleet.training_services.remote.config import RemoteMachineConfig
from trialfleet.training_services.remote.runner import ProbeRunner
from trialfleet.training_services.shared_storage import SharedStorage
from trialfleet.training_services.ssh import COMMAND_TIMEOUT
from trialfleet.training_services.ssh_link import UPLOAD_TIMEOUT, Probe, SshLink
from trialfleet.training_services.support import (
    MIN_PYTHON,
    PROBE_PATH,
    SHIM_DIR,
    UNPACK_FUNCTION,
    SupportLayout,
    support_archive,
)
from trialfleet.training_services.trial_dir import KEEPER_VERSION
from trialfleet.training_services.trial_files import ProbeTrialFiles

log = logging.getLogger(__name__)

MIN_FREE_BYTES = 100 * 1024 * 1024
#: a packed code directory up to this size goes to a host on the stdin of its first script, read whole into the
#: manager's memory; a larger one is streamed by SFTP and unpacked in a session of its own
STDIN_CODE_LIMIT = 16 * 1024 * 1024
UNPACK_TIMEOUT = 300.0
LAUNCH_TIMEOUT = 120.0  # per trial of a launch session: each copies the code directory
GPU_READING_MAX_AGE = 5.0
MOUNT_CALL_TIMEOUT = 180.0  # a mount command has 120 s (shared_storage.MOUNT_TIMEOUT)
# runs on whatever python the host has (even Python 2), so that an old one is reported, not a traceback. One round
# trip makes the host ready: the version, the root and its free space, the trials directory made, the support bundle
# (the first argv[4] bytes of stdin) unpacked unless it is there, whether the trials would import a real nni rather
# than the shim, then, given the free space asked for (argv[5]), the probe's ``prepare`` in this process, with the
# code archive (the rest of stdin, if any) written beside the root's code directory for it to unpack
_PREPARE_SCRIPT = (
    "import json, os, sys\n"
    "data = getattr(sys.stdin, 'buffer', sys.stdin).read()\n"
    "bundle, code = data[:int(sys.argv[4])], data[int(sys.argv[4]):]\n"
    "root = os.path.expanduser(sys.argv[1])\n"
    "p = root\n"
    "while not os.path.exists(p): p = os.path.dirname(p)\n"
    "s = os.statvfs(p)\n"
    "info = {'version': list(sys.version_info[:3]), 'root': root, 'free': s.f_bavail * s.f_frsize}\n"
    "try:\n"
    "    if not os.path.isdir(os.path.join(root, 'trials')): os.makedirs(os.path.join(root, 'trials'))\n"
    "except OSError as e:\n"
    "    info['mkdir_error'] = str(e)\n"
    + UNPACK_FUNCTION
    + REAL_NNI_CHECK
    + "if sys.version_info[:2] >= (3, 8) and 'mkdir_error' not in info:\n"
    "    support = os.path.join(root, sys.argv[2])\n"
    "    try:\n"
    "        if not os.path.isdir(support): unpack(support, data=bundle)\n"
    "    except Exception as e:\n"
    "        info['support_error'] = '%s: %s' % (type(e).__name__, e)\n"
    "    shim = os.path.join(support, sys.argv[3])\n"
    "    sys.path = [entry for entry in sys.path if entry != shim]\n"
    "    info['real_nni'] = real_nni()\n"
    "    if 'support_error' not in info and info['free'] >= int(sys.argv[5]):\n"
    "        try:\n"
    "            sys.path.insert(0, os.path.dirname(os.path.join(support, sys.argv[6])))\n"
    "            import probe\n"
    "            request = {'root': root}\n"
    "            if code:\n"
    "                request['code_archive'] = os.path.join(root, 'code.tar.gz')\n"
    "                with open(request['code_archive'], 'wb') as f: f.write(code)\n"
    "            info['prepared'] = probe.prepare(request)\n"
    "        except Exception as e:\n"
    "            info['prepare_error'] = '%s: %s' % (type(e).__name__, e)\n"
    "print(json.dumps(info))\n"
)
_SMI_SEPARATOR = "--trialfleet-gpu-apps--"


class Launches:
    """The launches asked of one host in a session of their own (without reuse), gathered per turn of the event
    loop: those asked in the same turn (the first trials of an experiment, the trials a round submits at once)
    share one session and one interpreter's start on the host (``probe launch_all``), which came to 45 ms for one
    launch alone, but ~185 ms for the first of 8 started at once on 3 hosts, each in a session of its own. A
    launch alone is a ``probe launch``, as before; none waits for another round to gather."""

    def __init__(self, probe: Probe, name: str) -> None:
        self.probe = probe
        self.name = name
        self._asked: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def launch(self, request: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[dict[str, Any]] = loop.create_future()
        if not self._asked:
            loop.call_soon(self._send)  # once the launches that are ready to ask in this turn have asked
        self._asked.append((request, answered))
        return await answered

    def _send(self) -> None:
        asked, self._asked = self._asked, []
        task = asyncio.ensure_future(self._session(asked))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _session(self, asked: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]]) -> None:
        requests = [request for request, _ in asked]
        try:
            if len(requests) == 1:
                answers = [{"answer": await self.probe.call("launch", requests[0], timeout=LAUNCH_TIMEOUT)}]
            else:
                request = {"launches": requests}
                timeout = LAUNCH_TIMEOUT * len(requests)
                answers = (await self.probe.call("launch_all", request, timeout=timeout))["launched"]
        except asyncio.CancelledError:
            for _, answered in asked:
                answered.cancel()
            raise
        except Exception as exc:  # the link or the probe failed: any launch of the session may have started
            for _, answered in asked:
                if not answered.done():
                    answered.set_exception(exc)
            return
        for (_, answered), one in zip(asked, answers, strict=True):
            if answered.done():  # its caller gave up waiting
                continue
            if "error" in one:
                answered.set_exception(PlatformError(f"{self.name}: probe launch failed ({one['error']})"))
            else:
                answered.set_result(one["answer"])


class RemoteMachine:
    """A host of ``machineList``: connection, remote root, probe calls, GPU readings, up/down state."""

    def __init__(
        self,
        config: RemoteMachineConfig,
        experiment_id: str,
        root_base: str,
        shared: SharedStorage | None = None,
        *,
        on_ended: Callable[[str], None],
        reuse: bool = False,
    ) -> None:
        """``on_ended(trial_dir)``: the host's runner saw a keeper write its end record (:mod:`.runner`).

        Every host has one long-lived runner over the open link: it answers the polls and file reads and
        reports ends as they happen. Launches, kills and the preparation are SSH sessions of their own, unless
        ``reuse`` (``reuseMode: true``) sends them through the runner as well.
        """
        self.config = config
        self.shared = shared
        self.shared_mount = ""  # the shared storage's absolute mount point here, once mounted
        self.link = SshLink(config, role="remote: host", reconnect=self._reconnect)
        self.name = self.link.name
        self.root_spec = posixpath.join(root_base, experiment_id)
        self.root = ""  # absolute, known once connected
        self.prepared = False
        self.env: dict[str, str] = {}  # what a login on the host gives a process
        self.real_nni = False
        self.launched: set[str] = set()  # trial directories launched here (maybe), for idempotent submit
        self.code_dirs: dict[Path, str] = {}  # local code directory → its unpacked copy here
        # their script is known once the root is
        self.runner = ProbeRunner(self.link, "", on_ended)
        self.probe: Probe = self.runner if reuse else Probe(self.link, "")
        self._launches = Launches(self.probe, self.name)
        self.files = ProbeTrialFiles(self.runner)
        self._gpus: tuple[float, list[GpuInfo]] | None = None
        self._leased: tuple[float, dict[int, str]] | None = None  # GPUs other experiments hold, as last told
        self._code_archive: tuple[Path, Path] | None = None  # what prepare() was given
        self._prepare_called = False

    @property
    def ready(self) -> bool:
        return self.prepared and self.link.up

    @property
    def layout(self) -> SupportLayout:
        return SupportLayout(self.root)

    def trial_dir(self, name: str) -> str:
        return posixpath.join(self.root, "trials", name)

    # ---- preparation -------------------------------------------------------------------------------------

    async def prepare(self, code_archive: tuple[Path, Path] | None) -> None:
        """Connect and make the host ready; PlatformError (SshLinkError if unreachable) naming what is wrong."""
        self._code_archive, self._prepare_called = code_archive, True
        self.prepared = False
        await self.link.connect()
        archive = code_archive[1] if code_archive else None
        size = archive.stat().st_size if archive else 0
        inline = archive if archive is not None and size <= STDIN_CODE_LIMIT else None
        answer = await self._check_host(MIN_FREE_BYTES + 3 * size, inline)
        await self._mount_shared()
        if archive is not None and inline is None:
            answer = await self._upload_and_unpack(archive)
        self.launched = set(answer["launched"])
        if code_archive is not None:
            self.code_dirs[code_archive[0]] = posixpath.join(self.root, "code")
        self.prepared, self.link.permanent = True, False

    async def _check_host(self, needed_bytes: int | None, code_archive: Path | None = None) -> dict[str, Any]:
        """The host's first script (:data:`_PREPARE_SCRIPT`), at the start and after every reconnection (the host
        may have rebooted, lost the bundle or gained a real nni): one session, which also unpacks ``code_archive``
        (sent on its stdin after the bundle) and answers as ``probe prepare`` does. ``needed_bytes``: free space
        to insist on."""
        bundle = support_archive()
        code = await asyncio.to_thread(code_archive.read_bytes) if code_archive is not None else b""
        argv = [
            "python3",
            "-c",
            _PREPARE_SCRIPT,
            self.root_spec,
            SupportLayout.relative_directory(),
            SHIM_DIR,
            str(len(bundle)),
            str(needed_bytes or 0),
            PROBE_PATH,
        ]
        timeout = UNPACK_TIMEOUT if code else COMMAND_TIMEOUT
        info = json.loads(await self.link.checked(argv, "python3", stdin=bundle + code, timeout=timeout))
        version = tuple(info["version"])
        if version < MIN_PYTHON:
            found = ".".join(map(str, version))
            raise PlatformError(
                f"{self.name}: python3 is {found}; trials need Python >= 3.8 (set pythonPath)"
            )
        self.root = info["root"]
        self.probe.script = self.runner.script = self.layout.probe
        if needed_bytes is not None and info["free"] < needed_bytes:
            raise PlatformError(
                f"{self.name}: only {info['free'] // 2**20} MB free under {self.root}, "
                f"need at least {needed_bytes // 2**20} MB"
            )
        if "mkdir_error" in info:
            raise PlatformError(f"{self.name}: creating the root failed ({info['mkdir_error']})")
        if "support_error" in info:
            raise PlatformError(
                f"{self.name}: unpacking the support bundle into {self.layout.directory} failed "
                f"({info['support_error']})"
            )
        if "prepare_error" in info:
            raise PlatformError(f"{self.name}: preparing {self.root} failed ({info['prepare_error']})")
        self.real_nni = bool(info["real_nni"])
        prepared: dict[str, Any] = info["prepared"]
        keeper_version = prepared.get("keeper_version")
        if keeper_version != KEEPER_VERSION:  # the keeper beside the probe must speak this manager's protocol
            raise PlatformError(
                f"{self.name}: trial keeper version mismatch: {self.layout.keeper} says {keeper_version!r}, "
                f"this manager speaks {KEEPER_VERSION!r}"
            )
        self.env = dict(prepared["env"])
        return prepared

    async def _upload_and_unpack(self, archive: Path) -> dict[str, Any]:
        """A code archive over :data:`STDIN_CODE_LIMIT`: streamed by SFTP, then unpacked by ``probe prepare``."""
        remote = posixpath.join(self.root, "code.tar.gz")
        await self.link.call(lambda ssh: ssh.put(archive, remote, timeout=UPLOAD_TIMEOUT))
        answer: dict[str, Any] = await self.probe.call(
            "prepare", {"root": self.root, "code_archive": remote}, timeout=UNPACK_TIMEOUT
        )
        return answer

    async def _mount_shared(self) -> None:
        """Mount the shared storage unless it is mounted already (also after a reconnection: a reboot)."""
        if self.shared is None:
            return
        answer = await self.probe.call("mount", self.shared.worker_request(), timeout=MOUNT_CALL_TIMEOUT)
        self.shared_mount = self.shared.check_answer(answer, self.name)

    def on_shared(self, relative: str) -> str:
        """A path below the shared storage's mount point, as this host sees it."""
        return posixpath.join(self.shared_mount, relative)

    async def upload_code(self, local_dir: Path, archive: Path) -> str:
        """A code directory other than the configured one, unpacked once beside it; returns where."""
        digest = hashlib.sha1(str(local_dir).encode()).hexdigest()[:12]
        target = posixpath.join(self.root, f"code-{digest}")
        if (await self.link.run(["test", "-d", target])).exit_status != 0:
            await self.link.unpack(archive, target)
        self.code_dirs[local_dir] = target
        return target

    async def _reconnect(self, link: SshLink) -> None:
        """How the link comes back: the whole preparation if it never succeeded, else connect and refresh."""
        if not self.prepared and self._prepare_called:
            await self.prepare(self._code_archive)
            return
        await link.ssh.connect()
        await self._check_host(None)  # a full disk does not keep running trials from being followed
        await self._mount_shared()

    async def close(self) -> None:
        await self.runner.stop()
        await self.link.close()

    async def launch(self, request: dict[str, Any]) -> dict[str, Any]:
        """Start one trial's keeper (``probe launch``); its launch record. Through the runner with reuse; else in a
        session shared with the launches asked of this host in the same turn of the loop (:class:`Launches`)."""
        if self.probe is self.runner:
            answer: dict[str, Any] = await self.runner.call("launch", request, timeout=LAUNCH_TIMEOUT)
            return answer
        return await self._launches.launch(request)

    # ---- ends as they happen -----------------------------------------------------------------------------

    async def watch(self, trial_dir: str) -> None:
        """After a launch in a session of its own: have the runner report this trial's end the moment it happens
        (a poll makes every trial it reads watched, also by a restarted runner). Best effort: an end it misses
        is seen by the next poll."""
        if self.probe is self.runner:
            return  # the runner launched it, and watches it since
        try:
            await self.runner.call("watch", {"trial_dirs": [trial_dir]})
        except PlatformError as exc:
            log.debug("remote: %s: cannot watch %s: %s", self.name, trial_dir, exc)

    # ---- GPUs --------------------------------------------------------------------------------------------

    async def read_gpus(self) -> list[GpuInfo]:
        """This host's GPUs through ``nvidia-smi`` over SSH (none when it is missing), cached a few seconds."""
        now = time.monotonic()
        if self._gpus is not None and now - self._gpus[0] <= GPU_READING_MAX_AGE:
            return self._gpus[1]
        gpu_query, apps_query = (shlex.join(["nvidia-smi", *q]) for q in (SMI_GPU_QUERY, SMI_APPS_QUERY))
        line = self.link.shell_line(f"{gpu_query} && echo {_SMI_SEPARATOR} && {apps_query}")
        result = await self.link.call(lambda ssh: ssh.run(line))
        gpus: list[GpuInfo] = []
        if result.exit_status == 0:
            gpu_csv, _, apps_csv = result.stdout.decode("utf-8", "replace").partition(_SMI_SEPARATOR)
            gpus = parse_nvidia_smi(gpu_csv, apps_csv)
        else:
            log.info("remote: %s: no GPU reading (%s)", self.name, result.explain())
        self._gpus = (now, gpus)
        return gpus

    async def gpu_leases(self) -> dict[str, Any]:
        """Every experiment's GPU leases and waits on this host, as the web UI shows them."""
        answer = await self.probe.call("leases", {})
        return holdings_record(holdings_of(answer.get("leases", []), answer.get("waits", [])))

    def forget_gpu_reading(self) -> None:
        self._gpus = None

    def allocate(self, gpus: list[GpuInfo], count: int, assigned: Mapping[int, int]) -> list[int] | str:
        """GPUs for a trial by this experiment's count and by what the host last said others lease (the host
        leases them at launch, or refuses: docs/shared-fleet.md)."""
        fresh = self._leased is not None and time.monotonic() - self._leased[0] <= GPU_READING_MAX_AGE
        return allocate_for(
            self.config, gpus, count, assigned, self._leased[1] if fresh and self._leased else None
        )

    def lease_request(
        self, experiment_id: str, trial_id: str, attempt: str, gpus: list[int]
    ) -> dict[str, Any]:
        """What the probe's launch needs to lease ``gpus`` on this host (``leases.take_chosen``)."""
        per_gpu = self.config.max_trial_number_per_gpu
        ids = {"experiment": experiment_id, "trial": trial_id, "attempt": attempt}
        return dict(ids, gpus=gpus, max_per_gpu=per_gpu, usable=self._usable_gpus())

    def _usable_gpus(self) -> list[int]:
        """The GPUs this experiment may use here, by its policy and the last reading: the host counts how many
        are free when it weighs the experiments that waited longer (turns)."""
        allowed, policy = self.config.gpu_indices, self.config
        gpus = self._gpus[1] if self._gpus is not None else []
        return [
            gpu.index
            for gpu in gpus
            if (allowed is None or gpu.index in allowed) and (policy.use_active_gpu or not gpu.process_count)
        ]

    def refused(self, answer: Mapping[str, Any]) -> str:
        """A launch the host refused (GPUs leased meanwhile): remember what others hold; the reason."""
        self._leased = (time.monotonic(), {int(gpu): who for gpu, who in answer.get("leased", {}).items()})
        return f"{self.name}: {answer['refused']}"

    # ---- trial files -------------------------------------------------------------------------------------

    async def copy_trial_files(self, trial_dir: str, names: Sequence[str], local_dir: Path) -> None:
        """Copy what exists of ``names`` to ``local_dir`` (an ended trial's logs, kept on the manager)."""
        local_dir.mkdir(parents=True, exist_ok=True)
        # one message to the runner, not a dozen of SFTP's
        try:
            answer = await self.runner.call("read", {"trial_dir": trial_dir, "names": list(names)})
        except PlatformError as exc:
            log.info("remote: could not copy the logs of %s from %s: %s", trial_dir, self.name, exc)
            return
        for name, data in answer["files"].items():
            (local_dir / name).write_bytes(base64.b64decode(data))
        names = answer["larger"]
        for name in names:
            path = posixpath.join(trial_dir, name)
            try:
                data = await self.link.call(lambda ssh, path=path: ssh.read(path))  # type: ignore[misc]
            except FileNotFoundError:
                continue
            except PlatformError as exc:
                log.info("remote: could not copy %s from %s: %s", path, self.name, exc)
                return
            (local_dir / name).write_bytes(data)
