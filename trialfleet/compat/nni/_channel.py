"""Where parameters come from and metrics go: the trial directory, or nowhere (standalone).

The channel is picked like NNI's: ``NNI_PLATFORM`` unset (or ``unittest``) means the trial runs
without a manager; otherwise the platform has written ``$NNI_SYS_DIR/parameter.cfg`` before launch
and reads metrics back from ``$NNI_SYS_DIR/.nni/metrics``.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Protocol

    class Channel(Protocol):
        standalone: bool

        def receive_parameter(self) -> dict[str, Any]: ...
        def send_metric(self, metric_type: str, record: bytes, value: str, sequence: int) -> None: ...


PARAMETER_FILE = "parameter.cfg"
METRICS_FILE = os.path.join(".nni", "metrics")
# The platform writes parameter.cfg before launch; the wait only covers a shared file system
# that shows the new file a little late.
PARAMETER_WAIT_SECONDS = 5.0
_POLL_SECONDS = 0.1

_STANDALONE_WARNING = (
    "Running trial code without a manager (NNI_PLATFORM is not set): "
    "get_next_parameter() returns {} and metrics are only printed."
)


class StandaloneChannel:
    """No manager: empty parameters, metrics printed to stdout (NNI's standalone behaviour)."""

    standalone = True

    def receive_parameter(self) -> dict[str, Any]:
        import warnings

        warnings.warn(_STANDALONE_WARNING, RuntimeWarning, stacklevel=3)
        return {"parameter_id": None, "parameters": {}}

    def send_metric(self, metric_type: str, record: bytes, value: str, sequence: int) -> None:
        import time

        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        if metric_type == "FINAL":
            print(f"[{stamp}] Final result: {value}", flush=True)
        else:
            print(f"[{stamp}] Intermediate result: {value}  (Index {sequence})", flush=True)


class TrialDirChannel:
    """Reads ``parameter.cfg`` and appends framed records to ``.nni/metrics`` in the trial directory."""

    standalone = False

    def __init__(self, sys_dir: str, output_dir: str | None) -> None:
        self.sys_dir = sys_dir
        self._output_dir = output_dir
        self._fd: int | None = None

    def receive_parameter(self) -> dict[str, Any]:
        path = os.path.join(self.sys_dir, PARAMETER_FILE)
        text = _wait_for_text(path)
        try:
            record = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(record, dict) or "parameters" not in record:
            # the parameters themselves may be any JSON value: NNI's BatchTuner hands out bare ones
            raise ValueError(
                f"{path} must hold an NNI parameter record "
                '{"parameter_id": ..., "parameters": ...}, got: ' + text[:200]
            )
        return record

    def send_metric(self, metric_type: str, record: bytes, value: str, sequence: int) -> None:
        if self._fd is None:
            self._fd = self._open_metrics()
        # One write on an O_APPEND descriptor: the record lands whole, never interleaved with
        # another writer's. No fsync: the reader is on the same host or waits for the trial to end.
        view = memoryview(record)
        while view:
            view = view[os.write(self._fd, view) :]

    def _open_metrics(self) -> int:
        path = os.path.join(self.sys_dir, METRICS_FILE)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # NNI creates the output directory when its channel opens; trial code may rely on it.
        if self._output_dir:
            os.makedirs(self._output_dir, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        return os.open(path, flags, 0o644)


def open_channel(environ: Mapping[str, str] | None = None) -> Channel:
    """The channel for this process, chosen from the NNI environment variables."""
    env = os.environ if environ is None else environ
    platform = env.get("NNI_PLATFORM")
    if not platform or platform == "unittest":
        return StandaloneChannel()
    sys_dir = env.get("NNI_SYS_DIR")
    if not sys_dir:
        raise RuntimeError(
            f"NNI_PLATFORM is {platform!r} but NNI_SYS_DIR is not set: the trial does not know "
            "its trial directory (parameter.cfg, .nni/metrics). Was it started by the manager?"
        )
    return TrialDirChannel(sys_dir, env.get("NNI_OUTPUT_DIR"))


def _wait_for_text(path: str) -> str:
    import time

    deadline = time.monotonic() + PARAMETER_WAIT_SECONDS
    text = _read_or_empty(path)
    if not text.strip():
        print(f"nni: waiting for {path}", file=sys.stderr, flush=True)
    while not text.strip():
        if time.monotonic() >= deadline:
            raise FileNotFoundError(
                f"{path} is missing or empty after waiting {PARAMETER_WAIT_SECONDS:g} s: the platform "
                "writes the trial's parameters there before launch (NNI_SYS_DIR="
                f"{os.path.dirname(path)!r}, NNI_PLATFORM={os.environ.get('NNI_PLATFORM')!r})"
            )
        time.sleep(_POLL_SECONDS)
        text = _read_or_empty(path)
    return text


def _read_or_empty(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except FileNotFoundError:
        return ""
