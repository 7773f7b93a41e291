"""The directories trialfleet writes: checked before anything is created, and a little space set aside so that a
manager meeting a full disk can still say why it stops.

``check_writable`` tries what ``create`` is about to do — create a file in the directory, or in its nearest
existing parent when the directory is still to be made — and names the directory and the cause when that fails
(permission, read-only file system, not a directory), so nothing is half-made. ``reserve_space`` keeps a
preallocated file in the experiment's directory while a manager runs it; ``release_space`` deletes it when a
write fails for lack of space, which gives the manager room for its last log line and the experiment's error.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from trialfleet.errors import DirectoryError, NoSpaceError, TrialfleetError

#: set aside in each running experiment's directory: room for the log line, the store's ERROR and the manifest
RESERVE_BYTES = 1 << 20
RESERVE_FILE = Path("db") / "space-reserve"

_CAUSES = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.ENOTDIR: "not a directory",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
}


def cause(exc: OSError) -> str:
    """What went wrong, in the words users search for."""
    return _CAUSES.get(exc.errno or 0, exc.strerror or str(exc))


def is_no_space(exc: BaseException) -> bool:
    return isinstance(exc, NoSpaceError) or (
        isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
    )


def write_error(exc: OSError, path: Path, what: str) -> TrialfleetError:
    """The error to raise for a failed write of ``path``: NoSpaceError for a full disk, else DirectoryError."""
    if is_no_space(exc):
        return NoSpaceError(path)
    return DirectoryError(f"cannot write {what} {path}: {cause(exc)}")


def check_writable(directory: Path, what: str, hint: str) -> None:
    """Refuse, naming ``directory`` (``what`` it is) and the cause, unless a file can be created in it — or, when
    it does not exist yet, in the nearest existing directory above it, where it will be made. ``hint`` says how
    to choose another. Leaves nothing behind."""
    directory = Path(directory).expanduser().absolute()
    existing = directory
    while True:
        try:
            mode = existing.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):  # to be made (or a file is in the way, found above)
            if existing.parent == existing:
                raise DirectoryError(
                    f"cannot write {what} {directory}: no part of it exists; {hint}"
                ) from None
            existing = existing.parent
            continue
        except OSError as exc:
            raise DirectoryError(
                f"cannot write {what} {directory}: {cause(exc)} ({existing}); {hint}"
            ) from exc
        break
    if not stat.S_ISDIR(mode):
        where = "it is" if existing == directory else f"{existing} is"
        raise DirectoryError(f"cannot write {what} {directory}: {where} not a directory; {hint}")
    try:
        fd, probe = tempfile.mkstemp(prefix=".trialfleet-write-check-", dir=existing)
    except OSError as exc:
        where = "" if existing == directory else f" ({existing}, where it would be created)"
        raise DirectoryError(f"cannot write {what} {directory}: {cause(exc)}{where}; {hint}") from exc
    os.close(fd)
    os.unlink(probe)


def reserve_space(experiment_dir: Path) -> None:
    """Set :data:`RESERVE_BYTES` aside in the experiment's directory (really allocated, not a sparse file);
    NoSpaceError when the device has not that much left."""
    path = Path(experiment_dir) / RESERVE_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError as exc:
        os.close(fd)
        path.unlink(missing_ok=True)
        if is_no_space(exc):
            raise NoSpaceError(path) from exc
        return  # a file system that cannot preallocate: run without the reserve
    os.close(fd)


def release_space(experiment_dir: Path) -> bool:
    """Give the reserved space back to the device (True if there was some)."""
    try:
        (Path(experiment_dir) / RESERVE_FILE).unlink()
    except OSError:
        return False
    return True
