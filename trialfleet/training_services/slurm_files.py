"""How the Slurm service reaches the shared directory: the :class:`ClusterFiles` seam and its local side.

Under ``<sharedDirectory>/<experiment id>/`` live the support files (the keeper, the probe and the ``nni`` shim,
unpacked from the same archive the remote platform uploads, in a directory named after their content), the code
directories copied there and the trial directories. The service reaches them either on this machine
(:class:`LocalClusterFiles`, the manager runs on a cluster host) or on the login node over SSH
(:class:`~.slurm_login.LoginNodeFiles`). Paths are the cluster's, as POSIX strings.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import io
import os
import posixpath
import shutil
import tarfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from trialfleet.compat import SHIM_PATH
from trialfleet.errors import PlatformError
from trialfleet.training_services.base import LiveTrial, TrialMetric, TrialProblem
from trialfleet.training_services.code_packing import check_code_dir
from trialfleet.training_services.remote_machine import PROBE_SCRIPT, support_archive
from trialfleet.training_services.slurm_script import JOB_ID_FILE, SCRIPT_NAME
from trialfleet.training_services.trial_files import (
    KEEPER_SCRIPT,
    MetricReader,
    read_record,
    write_trial_inputs,
)

#: where support_archive() puts the keeper and the shim, relative to the support directory
KEEPER_PATH = "keeper/keeper.py"
SHIM_DIR = "nni-shim"

MetricRead = Callable[[bool], tuple[list[TrialMetric], list[TrialProblem]]]


@dataclass(frozen=True)
class TrialInputs:
    """What the service writes into a trial directory before ``sbatch``."""

    parameter_record: str
    argv: Sequence[str]
    cwd: str
    script: str  # sbatch.sh


@dataclass(frozen=True)
class TrialLook:
    """One poll's view of a trial directory."""

    keeper_started: bool  # keeper.json exists
    result: Mapping[str, Any] | None  # result.json
    more: bool  # metric bytes were left for the next poll: the trial's end waits for them
    #: the new metrics and problems, called once per look; its argument is True once the trial ended (the
    #: writer is gone, so a partial record at the end is reported rather than waited for)
    read_metrics: MetricRead


class ClusterFiles(Protocol):
    """The shared directory's files, wherever the manager reaches them. Link failures are PlatformErrors."""

    description: str
    support_dir: str

    async def prepare(self) -> None:
        """Install the support files (once per version) and create the trials directory."""

    async def code_dir(self, local: Path) -> str:
        """The cluster path of a code directory of this machine (copied there once)."""

    async def write_trial(self, trial_dir: str, inputs: TrialInputs) -> None: ...

    async def read_job_id(self, trial_dir: str) -> str | None:
        """The job id a started job wrote into the trial directory, if any."""

    async def look(self, trials: list[LiveTrial]) -> dict[str, TrialLook]:
        """Every trial's directory in one go (``trial.state`` keeps where its channels were read to)."""

    async def keeper_started(self, trial_dir: str) -> bool: ...

    async def results_written(self, trial_dirs: Sequence[str]) -> set[str]:
        """The directories among ``trial_dirs`` that hold result.json."""

    async def read_file(self, trial_dir: str, relative: str) -> bytes:
        """A file of the trial directory; ValueError when the name leads outside it."""

    async def close(self) -> None: ...


@functools.cache
def support_version() -> str:
    """Names the support directory after its content, so a new manager never rewrites files trials read."""
    files = [(f"keeper/{script.name}", script) for script in (KEEPER_SCRIPT, PROBE_SCRIPT)]
    files += [
        (f"{SHIM_DIR}/{p.relative_to(SHIM_PATH).as_posix()}", p) for p in (SHIM_PATH / "nni").rglob("*.py")
    ]
    digest = hashlib.sha256()
    for name, path in sorted(files):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def support_paths(support_dir: str) -> tuple[str, str]:
    """The keeper script and the shim directory inside a support directory."""
    return posixpath.join(support_dir, KEEPER_PATH), posixpath.join(support_dir, SHIM_DIR)


def code_copy_name(source: Path) -> str:
    """The directory under ``<root>/code`` holding the copy of the code directory ``source``."""
    return hashlib.sha256(str(source).encode()).hexdigest()[:16]


class LocalClusterFiles:
    """The shared directory mounted on this machine; a code directory already under it is used in place."""

    description = "this machine"

    def __init__(self, shared: Path, root: Path) -> None:
        self.shared = shared
        self.root = root
        self.support_dir = str(root / ".trialfleet" / support_version())
        self._code_copies: dict[Path, str] = {}

    async def prepare(self) -> None:
        await asyncio.to_thread(self._install_support)

    def _install_support(self) -> None:
        target = Path(self.support_dir)
        if target.exists():
            return
        staging = target.with_name(f"{target.name}.tmp.{os.getpid()}")
        try:
            (self.root / "trials").mkdir(parents=True, exist_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
            with tarfile.open(fileobj=io.BytesIO(support_archive())) as tar:
                _extract(tar, staging)
            os.replace(staging, target)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.exists():  # another manager may have won the rename
                raise PlatformError(f"slurm: cannot prepare {target} on the shared directory: {exc}") from exc

    async def code_dir(self, local: Path) -> str:
        return await asyncio.to_thread(self._code_dir, local)

    def _code_dir(self, code_dir: Path) -> str:
        """The code directory itself when the nodes see it (it is under sharedDirectory), else a copy there.

        The copy is made once per experiment, the first time a trial needs it, honouring ``.nniignore``.
        """
        source = code_dir.resolve()
        if source.is_relative_to(self.shared.resolve()):
            return str(code_dir)
        if code_dir not in self._code_copies:
            target = self.root / "code" / code_copy_name(source)
            if not target.exists():
                try:
                    _copy_code(source, target)
                except OSError as exc:
                    raise PlatformError(f"slurm: cannot copy {source} to {target}: {exc}") from exc
            self._code_copies[code_dir] = str(target)
        return self._code_copies[code_dir]

    async def write_trial(self, trial_dir: str, inputs: TrialInputs) -> None:
        await asyncio.to_thread(_write_trial, Path(trial_dir), inputs)

    async def read_job_id(self, trial_dir: str) -> str | None:
        try:
            return (Path(trial_dir) / JOB_ID_FILE).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    async def look(self, trials: list[LiveTrial]) -> dict[str, TrialLook]:
        looks = {}
        for trial in trials:
            trial_dir = Path(trial.handle["trial_dir"])
            reader = trial.state.setdefault("reader", MetricReader(trial.trial_id, trial_dir, trial.cursor))
            looks[trial.trial_id] = TrialLook(
                keeper_started=(trial_dir / "keeper.json").exists(),
                result=read_record(trial_dir / "result.json"),
                more=False,  # a local reader reads everything once the trial ended
                read_metrics=_reading(reader),
            )
        return looks

    async def keeper_started(self, trial_dir: str) -> bool:
        return (Path(trial_dir) / "keeper.json").exists()

    async def results_written(self, trial_dirs: Sequence[str]) -> set[str]:
        return {d for d in trial_dirs if (Path(d) / "result.json").exists()}

    async def read_file(self, trial_dir: str, relative: str) -> bytes:
        base = Path(trial_dir).resolve()
        path = (base / relative).resolve()
        if not path.is_relative_to(base):
            raise ValueError(f"{relative!r} is not a file of the trial directory {base}")
        return await asyncio.to_thread(path.read_bytes)

    async def close(self) -> None:
        return None


def _reading(reader: MetricReader) -> MetricRead:
    def read_metrics(final: bool) -> tuple[list[TrialMetric], list[TrialProblem]]:
        return reader.read(final=final)

    return read_metrics


def _write_trial(trial_dir: Path, inputs: TrialInputs) -> None:
    # env None: the trial inherits the job's environment, which exists only on the node (GRES, modules)
    write_trial_inputs(
        trial_dir, parameter_record=inputs.parameter_record, argv=inputs.argv, cwd=inputs.cwd, env=None
    )
    # private, as command.json: it holds the trial's environment values
    fd = os.open(trial_dir / SCRIPT_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(inputs.script)


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
    else:
        tar.extractall(dest)  # our own archive; Python before 3.11.4 has no extraction filters


def _copy_code(source: Path, target: Path) -> None:
    """Copy the shippable files of a code directory (``.nniignore`` honoured, NNI's size limits checked)."""
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    for relative in check_code_dir(source):
        src, dst = source / relative, staging / relative
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    staging.mkdir(parents=True, exist_ok=True)  # an empty code directory is still a directory
    os.replace(staging, target)
