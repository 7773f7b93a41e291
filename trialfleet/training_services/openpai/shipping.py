"""Without the storage mounted on the manager's machine: what each job carries to its containers, and where.

When ``localStorageMountPoint`` is not set, the manager cannot write the storage, so every job carries what its
tasks need in its own protocol: one archive (base64 in a command) holding the support bundle, the code directory
and the trial's input files, unpacked below ``<containerStorageMountPoint>/<experiment id>/`` as in the mounted
case — the support bundle and the code once per experiment (each appears whole or not at all), the trial's files
in its trial directory. The trial's outputs come back through the relay (NNI's REST channel, ``relay.py``).

OpenPAI's rest server takes request bodies up to 100 KB (body-parser's default), so this works for small code
directories only; the service refuses to start when a job would not fit, saying so.
"""

from __future__ import annotations

import base64
import functools
import io
import os
import posixpath
import shlex
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trialfleet.training_services.code_packing import check_code_dir
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.support import SupportLayout, support_archive, support_version

PROTOCOL_LIMIT = 100 * 1024  # the rest server's body-parser limit for a text body
PROTOCOL_MARGIN = 6 * 1024  # what a protocol holds besides the archive (its YAML, the commands)

#: runs in the task's container (stdlib, Python >= 3.8): the archive on stdin, then the root and the units to place
UNPACK = """\
import base64, io, os, shutil, sys, tarfile
root, units = sys.argv[1], sys.argv[2:]
staging = os.path.join(root, ".unpack.%d" % os.getpid())
with tarfile.open(fileobj=io.BytesIO(base64.b64decode(sys.stdin.buffer.read()))) as tar:
    if hasattr(tarfile, "data_filter"):
        tar.extractall(staging, filter="data")
    else:
        tar.extractall(staging)
for unit in units:
    target = os.path.join(root, unit)
    if os.path.isdir(target):
        continue  # placed by an earlier job, or by another task of this one
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        os.rename(os.path.join(staging, unit), target)
    except OSError:
        if not os.path.isdir(target):
            raise
shutil.rmtree(staging, ignore_errors=True)
"""


@dataclass(frozen=True)
class ContainerPaths:
    """Where an experiment's files are in the job's containers: ``<mount>/<experiment id>/``."""

    root: str

    @property
    def layout(self) -> SupportLayout:
        return SupportLayout(self.root)

    def code_dir(self, source: Path) -> str:
        return posixpath.join(self.root, "code", code_copy_name(Path(source).resolve()))

    def trial_dir(self, attempt: str) -> str:
        return posixpath.join(self.root, "trials", attempt)


Member = tuple[
    str, bytes | str | None, int
]  # name in the archive, content (a link's target; None: a directory), mode


class Payload:
    """Packs, for one job, the support bundle, the code directory and the trial's files into one archive."""

    def __init__(self, paths: ContainerPaths) -> None:
        self.paths = paths
        self._code: dict[Path, list[Member]] = {}

    def units(self, code_dir: Path, attempt: str) -> list[str]:
        """The directories the archive places, relative to the experiment's root."""
        code = posixpath.relpath(self.paths.code_dir(code_dir), self.paths.root)
        return [posixpath.join(".trialfleet", support_version()), code, posixpath.join("trials", attempt)]

    def archive(self, code_dir: Path, attempt: str, files: Mapping[str, str]) -> str:
        """The archive, base64: what a job's command unpacks (:func:`unpack_commands`)."""
        support, code, trial = self.units(code_dir, attempt)
        members: list[Member] = [(unit, None, 0o755) for unit in (support, code, trial)]  # even when empty
        members += [(posixpath.join(support, name), data, mode) for name, data, mode in _support_members()]
        members += [
            (posixpath.join(code, name), data, mode) for name, data, mode in self._code_members(code_dir)
        ]
        members += [(posixpath.join(trial, name), text.encode(), 0o600) for name, text in files.items()]
        members.append((posixpath.join(trial, ".nni", ".keep"), b"", 0o644))
        return base64.b64encode(_pack(members)).decode()

    def code_sizes(self, code_dir: Path) -> list[tuple[str, int]]:
        """The shippable files of a code directory and their sizes (NNI's limits checked)."""
        source = Path(code_dir)
        return [(p.as_posix(), (source / p).lstat().st_size) for p in check_code_dir(source)]

    def _code_members(self, code_dir: Path) -> list[Member]:
        source = Path(code_dir)
        if source not in self._code:
            members: list[Member] = []
            for relative in check_code_dir(source):
                path = source / relative
                if path.is_symlink():
                    members.append((relative.as_posix(), os.readlink(path), 0o777))
                else:
                    members.append((relative.as_posix(), path.read_bytes(), path.stat().st_mode & 0o777))
            self._code[source] = members
        return self._code[source]


def unpack_commands(root: str, encoded: str, units: list[str]) -> list[str]:
    q = shlex.quote
    return [
        f"mkdir -p {q(root)}",
        f"printf '%s' {q(encoded)} | python3 -I -S -c {q(UNPACK)} {q(root)} {' '.join(map(q, units))}",
    ]


@functools.cache
def _support_members() -> tuple[Member, ...]:
    members: list[Member] = []
    with tarfile.open(fileobj=io.BytesIO(support_archive())) as tar:
        for info in tar.getmembers():
            extracted = tar.extractfile(info) if info.isfile() else None
            if extracted is not None:
                members.append((info.name, extracted.read(), info.mode))
    return tuple(members)


def _pack(members: list[Member]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT, compresslevel=9) as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
