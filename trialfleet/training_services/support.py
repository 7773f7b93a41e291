"""The support bundle: what a worker needs of trialfleet, one archive for every platform.

The stdlib trial keeper (with its relay forwarder), the reuse-mode worker (``trial_keeper/worker.py``), the
probe (the manager's hands on a worker, ``trial_keeper/probe.py``) and the ``nni`` shim, packed once. A worker unpacks it into ``<root>/.trialfleet/<version>/``, a directory named after the
bundle's content, so a newer manager never rewrites files that running trials of an older one use, and a worker
that has this version already is not sent it again.
"""

from __future__ import annotations

import functools
import hashlib
import io
import posixpath
import tarfile
from dataclasses import dataclass
from pathlib import Path

from trialfleet.compat import SHIM_PATH
from trialfleet.training_services.trial_dir import KEEPER_SCRIPT

PROBE_SCRIPT = KEEPER_SCRIPT.with_name("probe.py")
FORWARDER_SCRIPT = KEEPER_SCRIPT.with_name("forwarder.py")
LEASES_SCRIPT = KEEPER_SCRIPT.with_name("leases.py")
WORKER_SCRIPT = KEEPER_SCRIPT.with_name("worker.py")
MIN_PYTHON = (3, 8)  # what the keeper and the probe need on a worker
KEEPER_PATH = "keeper/keeper.py"
PROBE_PATH = "keeper/probe.py"
FORWARDER_PATH = "keeper/forwarder.py"
LEASES_PATH = "keeper/leases.py"
WORKER_PATH = "keeper/worker.py"  # a reuse-mode job's long-lived worker
SHIM_DIR = "nni-shim"

#: defines ``unpack(target, archive=None, data=None)``: the archive at ``archive`` on the worker, or given as its
#: bytes, unpacked as ``target``, which appears whole or not at all. The worker's python may be old: Python 2 must
#: still parse it, so that the old interpreter reports its version (or fails on the version check)
UNPACK_FUNCTION = """\
def unpack(target, archive=None, data=None):
    import io, os, shutil, tarfile
    staging = "%s.tmp.%d" % (target, os.getpid())
    os.makedirs(staging)  # an empty code directory is still a directory
    with tarfile.open(archive) if data is None else tarfile.open(fileobj=io.BytesIO(data)) as tar:
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
"""
#: ``python3 -I -S -c RUN_AS_MODULE <script> <arguments>`` runs a script of the bundle as ``python3 -I -S <script>
#: <arguments>`` would, but imported as a module, so that its compiled form is cached beside it: a script run as
#: ``__main__`` is compiled at every start (4 ms of CPU for the probe, at every launch without reuse). The script's
#: ``main(argv)`` is called with ``argv[0]`` the script's path and returns the exit code.
RUN_AS_MODULE = (
    "import os, sys; del sys.argv[0]; sys.path.insert(0, os.path.dirname(sys.argv[0]));"
    " sys.exit(__import__(os.path.basename(sys.argv[0])[:-3]).main(sys.argv))"
)


def run_as_module(script: str, *arguments: str) -> list[str]:
    """The command line that runs the bundle's ``script`` (probe.py, keeper.py) with the host's ``python3``."""
    return ["python3", "-I", "-S", "-c", RUN_AS_MODULE, script, *arguments]


#: unpacks an uploaded archive (argv 1) as a target (argv 2), then removes the archive
UNPACK_SCRIPT = (
    UNPACK_FUNCTION + "import os, sys\nunpack(sys.argv[2], archive=sys.argv[1])\nos.unlink(sys.argv[1])\n"
)


def _bundle_files() -> list[tuple[str, Path]]:
    files = [(KEEPER_PATH, KEEPER_SCRIPT), (PROBE_PATH, PROBE_SCRIPT), (FORWARDER_PATH, FORWARDER_SCRIPT)]
    files += [(LEASES_PATH, LEASES_SCRIPT), (WORKER_PATH, WORKER_SCRIPT)]
    files += [
        (f"{SHIM_DIR}/{p.relative_to(SHIM_PATH).as_posix()}", p) for p in (SHIM_PATH / "nni").rglob("*.py")
    ]
    return sorted(files)


@functools.cache
def support_archive() -> bytes:
    """keeper.py, probe.py and the nni shim as one .tar.gz."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, path in _bundle_files():
            tar.add(path, arcname=name)
    return buffer.getvalue()


@functools.cache
def support_version() -> str:
    """The bundle's content, as a short digest: names its directory on every worker."""
    digest = hashlib.sha256()
    for name, path in _bundle_files():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class SupportLayout:
    """Where the bundle lives below a worker's root (POSIX paths as the worker sees them)."""

    root: str

    @staticmethod
    def relative_directory() -> str:
        """The bundle's directory relative to the root."""
        return posixpath.join(".trialfleet", support_version())

    @property
    def directory(self) -> str:
        return posixpath.join(self.root, self.relative_directory())

    @property
    def keeper(self) -> str:
        return posixpath.join(self.directory, KEEPER_PATH)

    @property
    def probe(self) -> str:
        return posixpath.join(self.directory, PROBE_PATH)

    @property
    def worker(self) -> str:
        return posixpath.join(self.directory, WORKER_PATH)

    @property
    def shim_dir(self) -> str:
        return posixpath.join(self.directory, SHIM_DIR)


def extract_archive(tar: tarfile.TarFile, dest: Path) -> None:
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
    else:
        tar.extractall(dest)  # our own archive; Python before 3.11.4 has no extraction filters
