"""The manager's side of the trial directory protocol (docs/trial-directory.md), shared by every platform.

Platforms that read the directory remotely fetch the bytes themselves and use the pure functions
(:func:`parse_metric_stream`, :func:`scan_stdout_metrics`, :func:`decode_metric`, :func:`ended_from_result`);
local platforms use :class:`MetricReader`, which reads only the bytes that are new since its cursor.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.base import TrialEnded, TrialMetric, TrialProblem

KEEPER_PROTOCOL = 1
#: what ``keeper.py --version`` prints; a remote host whose keeper prints something else gets a new copy
KEEPER_VERSION = "trialfleet-keeper 1.0 protocol 1"
KEEPER_SCRIPT = Path(__file__).resolve().parent.parent / "trial_keeper" / "keeper.py"

METRICS_FILE = ".nni/metrics"
STDOUT_FILE = "trial.stdout"
STDERR_FILE = "trial.stderr"
MAX_METRIC_BYTES = 1_000_000
METRIC_TYPES = {"FINAL": "FINAL", "PERIODICAL": "PERIODICAL", "INTERMEDIATE": "PERIODICAL"}

_HEADER = re.compile(rb"ME(\d{6})")
_PARTIAL_HEADER = re.compile(rb"M(?:E\d{0,5})?")
_PARTIAL_TAIL = re.compile(rb"M(?:E\d{0,5})?\Z")
_HEADER_LEN = 8
_STDOUT_MARK = b"NNISDK_MEb'"
_READ_CHUNK = 8 * 1024 * 1024
_CHUNKS_PER_READ = 8  # bounds one poll's work for a trial printing gigabytes; the rest comes next poll
_UNBOUNDED = 1 << 40
_FAULT_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGFPE, signal.SIGBUS, signal.SIGILL}


@dataclass(frozen=True)
class RawRecord:
    payload: bytes
    end: int  # absolute offset just after the record in its stream


@dataclass(frozen=True)
class StreamProblem:
    message: str
    end: int


def write_trial_inputs(
    trial_dir: Path,
    *,
    parameter_record: str,
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None,
    max_duration: float | None = None,
    kill_grace: float = 5.0,
) -> None:
    """Prepare a fresh trial directory: parameter.cfg, command.json (private: it holds the environment), .nni/.

    ``env=None`` lets the trial inherit the keeper's environment (a Slurm job's, known only on the node).
    """
    trial_dir.mkdir(parents=True, exist_ok=True)
    # a directory reused for the same attempt must not show the previous run's records
    for stale in ("keeper.json", "result.json", METRICS_FILE, STDOUT_FILE, STDERR_FILE):
        (trial_dir / stale).unlink(missing_ok=True)
    (trial_dir / ".nni").mkdir(exist_ok=True)
    (trial_dir / "parameter.cfg").write_text(parameter_record, encoding="utf-8")
    command = {
        "argv": list(argv),
        "cwd": cwd,
        "env": None if env is None else dict(env),
        "max_duration": max_duration,
        "kill_grace": kill_grace,
        "protocol": KEEPER_PROTOCOL,
    }
    fd = os.open(trial_dir / "command.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(command, f)


def parse_metric_stream(
    data: bytes, start_offset: int, *, final: bool = False
) -> tuple[list[RawRecord], int, list[StreamProblem]]:
    """Split ``.nni/metrics`` bytes (read from ``start_offset``) into ``b"ME%06d" + payload`` records.

    A partial trailing record is not consumed, unless ``final`` (the writer is gone). A corrupt header, or a
    length that does not end at the newline NNI writes after each record, is reported once and skipped up to
    the next valid header.
    """
    records: list[RawRecord] = []
    problems: list[StreamProblem] = []
    pos = 0
    while pos < len(data):
        header = _HEADER.match(data, pos)
        if header is None:
            if not final and _PARTIAL_HEADER.fullmatch(data, pos):
                break
            why = "not a record header"
        else:
            end = pos + _HEADER_LEN + int(header.group(1))
            if end <= len(data) and data[end - 1 : end] == b"\n":
                records.append(RawRecord(data[pos + _HEADER_LEN : end], start_offset + end))
                pos = end
                continue
            if end > len(data) and not final:
                break
            why = "truncated record" if end > len(data) else "record length does not end at a newline"
        bad, pos = pos, _resync(data, pos, final)
        where = f"byte {start_offset + bad}, {pos - bad} byte(s) skipped"
        problems.append(StreamProblem(f"corrupt metric stream ({why}) at {where}", start_offset + pos))
    return records, start_offset + pos, problems


def _resync(data: bytes, bad: int, final: bool) -> int:
    """Where parsing can go on after a corrupt record at ``bad``: the next header, or a tail that may be one."""
    found = _HEADER.search(data, bad + 1)
    if found:
        return found.start()
    tail = None if final else _PARTIAL_TAIL.search(data, max(bad + 1, len(data) - _HEADER_LEN))
    return tail.start() if tail else len(data)


def scan_stdout_metrics(
    data: bytes, start_offset: int, *, final: bool = False
) -> tuple[list[RawRecord], int, list[StreamProblem]]:
    """Find ``NNISDK_MEb'<record>'`` lines (real nni's channel off the local platform) in stdout bytes.

    Only complete lines are consumed, unless ``final``. A partial line longer than any metric line can be
    (progress bars redrawn with ``\\r``) is consumed up to its last marker, so polls do not re-read it forever.
    """
    stop = len(data) if final else data.rfind(b"\n") + 1
    if len(data) - stop > MAX_METRIC_BYTES + len(_STDOUT_MARK) + 2:
        mark = data.rfind(_STDOUT_MARK, stop)
        stop = mark if mark > stop else len(data)
    records: list[RawRecord] = []
    problems: list[StreamProblem] = []
    pos = data.find(_STDOUT_MARK, 0, stop)
    while pos >= 0:
        line_end = data.find(b"\n", pos, stop)
        line_end = stop if line_end < 0 else line_end
        body = data[pos + len(_STDOUT_MARK) : line_end].rstrip(b"\r")
        if body.endswith(b"'"):
            records.append(RawRecord(body[:-1], start_offset + line_end))
        else:
            problems.append(
                StreamProblem("unterminated NNISDK_MEb line in trial.stdout", start_offset + line_end)
            )
        pos = data.find(_STDOUT_MARK, line_end, stop)
    return records, start_offset + stop, problems


def decode_metric(
    trial_id: str, payload: bytes, cursor: Mapping[str, Any], timestamp: float
) -> TrialMetric | TrialProblem | None:
    """One metric record → a metric, a problem (never stored), or None for NNI's REQUEST_PARAMETER."""

    def problem(message: str) -> TrialProblem:
        return TrialProblem(trial_id, message, timestamp, dict(cursor))

    if len(payload) > MAX_METRIC_BYTES:
        return problem(f"metric record of {len(payload)} bytes is over the {MAX_METRIC_BYTES} byte limit")
    try:
        record = json.loads(payload)
    except ValueError as exc:
        return problem(f"metric record is not JSON ({exc}): {payload[:80]!r}")
    if not isinstance(record, dict):
        return problem(f"metric record is not a JSON object: {payload[:80]!r}")
    if record.get("type") == "REQUEST_PARAMETER":
        return None
    kind = METRIC_TYPES.get(str(record.get("type")))
    sequence, parameter_id, value = record.get("sequence", 0), record.get("parameter_id"), record.get("value")
    if kind is None:
        return problem(f"unknown metric type {record.get('type')!r} (expected FINAL or PERIODICAL)")
    if not _is_int(sequence):
        return problem(f"metric sequence {sequence!r} is not an integer")
    if parameter_id is not None and not _is_int(parameter_id):
        return problem(f"metric parameter_id {parameter_id!r} is not an integer")
    if not isinstance(value, str):
        return problem(f"metric value must be a JSON string (NNI's nni.dump), got {type(value).__name__}")
    why = _metric_value_problem(value)
    if why is not None:
        return problem(why)
    return TrialMetric(trial_id, parameter_id, kind, sequence, value, timestamp, dict(cursor))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _metric_value_problem(value: str) -> str | None:
    try:
        metric = json.loads(value)
    except ValueError:
        return f"metric value is not JSON: {value[:80]!r}"
    number = metric.get("default") if isinstance(metric, dict) else metric
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return f"metric must be a number or a dict with a numeric 'default', got {value[:80]!r}"
    if not math.isfinite(number):
        return f"metric is not a finite number: {value[:80]!r}"
    return None


class MetricReader:
    """Reads what is new in a local trial directory's metric channels, from a cursor on."""

    def __init__(self, trial_id: str, trial_dir: Path, cursor: Mapping[str, Any]) -> None:
        self.trial_id = trial_id
        self.trial_dir = trial_dir
        self.offsets = {"metrics": int(cursor.get("metrics", 0)), "stdout": int(cursor.get("stdout", 0))}

    def read(self, *, final: bool = False) -> tuple[list[TrialMetric], list[TrialProblem]]:
        """Everything new; ``final`` once the trial ended (partial trailing records are then reported)."""
        metrics: list[TrialMetric] = []
        problems: list[TrialProblem] = []
        for channel, name, parse in (
            ("metrics", METRICS_FILE, parse_metric_stream),
            ("stdout", STDOUT_FILE, scan_stdout_metrics),
        ):
            for _ in range(_UNBOUNDED if final else _CHUNKS_PER_READ):
                offset = self.offsets[channel]
                data = _read_from(self.trial_dir / name, offset)
                records, self.offsets[channel], stream_problems = parse(data, offset, final=final)
                self._decode(channel, records, stream_problems, metrics, problems)
                if len(data) < _READ_CHUNK or self.offsets[channel] == offset:
                    break
        return metrics, problems

    def _decode(
        self,
        channel: str,
        records: list[RawRecord],
        stream_problems: list[StreamProblem],
        metrics: list[TrialMetric],
        problems: list[TrialProblem],
    ) -> None:
        now = time.time()
        for bad in stream_problems:
            problems.append(TrialProblem(self.trial_id, bad.message, now, {**self.offsets, channel: bad.end}))
        for record in records:
            decoded = decode_metric(self.trial_id, record.payload, {**self.offsets, channel: record.end}, now)
            if isinstance(decoded, TrialMetric):
                metrics.append(decoded)
            elif decoded is not None:
                problems.append(decoded)


def _read_from(path: Path, offset: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        return os.pread(fd, _READ_CHUNK, offset)
    finally:
        os.close(fd)


def write_record(path: Path, record: Mapping[str, Any]) -> None:
    """Write a JSON record the way the keeper does: temp file, fsync, rename."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_record(path: Path) -> dict[str, Any] | None:
    """keeper.json / result.json, or None while it does not exist (they are written atomically)."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None


def ended_from_result(
    trial_id: str, result: Mapping[str, Any], cancel_status: TrialStatus | None = None
) -> TrialEnded:
    """The keeper's result.json → how the trial ended, for the manager."""
    exit_code = result.get("exit_code")
    signo = result.get("signal")
    reason = str(result.get("reason") or "ended")
    when = float(result.get("end_time") or time.time())

    def ended(status: TrialStatus, kind: FailureKind | None, message: str = reason) -> TrialEnded:
        return TrialEnded(trial_id, status, when, exit_code, message, kind)

    if result.get("canceled"):
        return ended(cancel_status or TrialStatus.USER_CANCELED, FailureKind.CANCELED)
    if result.get("timed_out"):
        return ended(TrialStatus.EARLY_STOPPED, FailureKind.TIMEOUT)
    if exit_code == 0:
        return ended(TrialStatus.SUCCEEDED, None)
    if isinstance(exit_code, int):
        return ended(TrialStatus.FAILED, FailureKind.USER_CODE)
    if isinstance(signo, int):
        # a crash of the program itself is the user's; SIGKILL/SIGTERM from outside (OOM killer, admin) is not
        kind = FailureKind.USER_CODE if signo in _FAULT_SIGNALS else FailureKind.INFRASTRUCTURE
        return ended(TrialStatus.FAILED, kind, f"killed by signal {signo}")
    return ended(TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)


def canceled_by_manager() -> dict[str, Any]:
    """The result.json the manager writes for a canceled trial whose keeper is gone."""
    return {
        "protocol": KEEPER_PROTOCOL,
        "exit_code": None,
        "signal": None,
        "end_time": time.time(),
        "reason": "canceled",
        "canceled": True,
        "timed_out": False,
        "written_by": "manager",
    }


def lost(
    trial_id: str, message: str = "lost: the trial keeper disappeared without a final record"
) -> TrialEnded:
    return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), None, message, FailureKind.INFRASTRUCTURE)
