"""The job's working directory: the trial code, the support bundle and ``entry.py``, as one zip.

The files of the code directory are those NNI ships (``.nniignore`` and NNI's limits, :mod:`..code_packing`);
the support bundle (keeper, probe, ``nni`` shim) goes below ``.trialfleet/<version>/`` and ``entry.py`` with its
``settings.json`` below ``.trialfleet/ray/<digest>/``. The zip is built deterministically (sorted names, fixed
times), so the same content is the same archive: Ray names a package after its content, uploads it only when
the cluster does not have it (the client asks first, which also pins it for the job) and unpacks it once per
node. Regular files keep their mode; a symbolic link to a file is shipped as that file's content, one to a
directory is left out with a warning (Ray's unpacking makes no links).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import posixpath
import stat
import tarfile
import zipfile
from pathlib import Path

from trialfleet.training_services.code_packing import check_code_dir
from trialfleet.training_services.ray import entry
from trialfleet.training_services.ray.entry import SETTINGS_FILE
from trialfleet.training_services.ray.submission import ShippedPaths, shipped_settings
from trialfleet.training_services.support import KEEPER_PATH, SHIM_DIR, support_archive, support_version

log = logging.getLogger(__name__)

_EPOCH = (1980, 1, 1, 0, 0, 0)
ENTRY_SCRIPT = Path(entry.__file__).resolve()


def shipped_paths() -> ShippedPaths:
    support = f".trialfleet/{support_version()}"
    digest = hashlib.sha256(ENTRY_SCRIPT.read_bytes()).hexdigest()[:16]
    return ShippedPaths(
        entry=f".trialfleet/ray/{digest}/entry.py",
        keeper=f"{support}/{KEEPER_PATH}",
        shim=f"{support}/{SHIM_DIR}",
    )


def build_package(code_dir: Path, target: Path) -> Path:
    """Write the working directory's zip to ``target`` (atomically) and return it."""
    members = dict(_code_files(code_dir))
    support = f".trialfleet/{support_version()}"
    with tarfile.open(fileobj=io.BytesIO(support_archive())) as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                members[f"{support}/{member.name}"] = (handle.read(), 0o644)
    paths = shipped_paths()
    members[paths.entry] = (ENTRY_SCRIPT.read_bytes(), 0o644)
    settings = json.dumps(shipped_settings(paths), sort_keys=True).encode()
    members[posixpath.join(posixpath.dirname(paths.entry), SETTINGS_FILE)] = (settings, 0o644)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(members):
            data, mode = members[name]
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    os.replace(tmp, target)
    return target


def _code_files(code_dir: Path) -> list[tuple[str, tuple[bytes, int]]]:
    files = []
    for relative in check_code_dir(code_dir):
        path = code_dir / relative
        if path.is_symlink() and not path.is_file():
            log.warning("ray: %s is a link to a directory (or to nothing) and is not shipped", path)
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        files.append((relative.as_posix(), (path.read_bytes(), mode)))
    return files
