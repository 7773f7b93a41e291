"""A trial's metric channels: NNI's ``.nni/metrics`` stream and real nni's ``NNISDK_MEb`` lines in stdout.

Every platform parses the same bytes with the same code. :class:`MetricReader` reads what is new in a trial
directory on this machine; platforms whose trial directories are elsewhere fetch the bytes after the cursors
(``probe.py poll``: base64, capped per poll, ``<channel>_more`` when bytes were left) and hand them to
:func:`read_channels`. Offsets move on only with what was parsed, so a round trip that fails loses nothing.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialfleet.json_values import MAX_DEPTH, depth, finite_copy, non_finite
from trialfleet.training_services.events import TrialMetric, TrialProblem
from trialfleet.training_services.trial_dir import METRICS_FILE, STDOUT_FILE
from trialfleet.trial_keeper import keeper

MAX_METRIC_BYTES = 1_000_000
MAX_ID = 2**63 - 1  # sequence numbers and parameter ids are stored as SQLite integers
MAX_VALUE_DEPTH = MAX_DEPTH  # a metric value nests lists and objects at most this deep (SQLite's JSON reads it)
METRIC_TYPES = {"FINAL": "FINAL", "PERIODICAL": "PERIODICAL", "INTERMEDIATE": "PERIODICAL"}

_HEADER = re.compile(rb"ME(\d{6})")
_PARTIAL_HEADER = re.compile(rb"M(?:E\d{0,5})?")
_PARTIAL_TAIL = re.compile(rb"M(?:E\d{0,5})?\Z")
_HEADER_LEN = 8
_STDOUT_MARK = b"NNISDK_MEb'"
_READ_CHUNK = 8 * 1024 * 1024
_CHUNKS_PER_READ = 8  # bounds one poll's work for a trial printing gigabytes; the rest comes next poll
_UNBOUNDED = 1 << 40


@dataclass(frozen=True)
class RawRecord:
    payload: bytes
    end: int  # absolute offset just after the record in its stream


@dataclass(frozen=True)
class StreamProblem:
    message: str
    end: int


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
        else:  # a line cut where a read ended is over the limit, not unterminated
            why = "over the byte limit of a metric" if len(body) > MAX_METRIC_BYTES else "unterminated"
            problems.append(StreamProblem(f"NNISDK_MEb line in trial.stdout {why}", start_offset + line_end))
        pos = data.find(_STDOUT_MARK, line_end, stop)
    return records, start_offset + stop, problems


def decode_metric(
    trial_id: str, payload: bytes, cursor: Mapping[str, Any], timestamp: float
) -> TrialMetric | TrialProblem | None:
    """One metric record → a metric, a problem (never stored), or None for NNI's REQUEST_PARAMETER. The metric or
    problem keeps ``cursor``: a mapping of its own."""

    def problem(message: str) -> TrialProblem:
        return TrialProblem(trial_id, message, timestamp, cursor)

    if len(payload) > MAX_METRIC_BYTES:
        return problem(f"metric record of {len(payload)} bytes is over the {MAX_METRIC_BYTES} byte limit")
    try:
        record = json.loads(payload)
    except ValueError as exc:
        return problem(f"metric record is not JSON ({exc}): {payload[:80]!r}")
    except RecursionError:
        return problem(f"metric record is nested too deeply to read: {payload[:80]!r}")
    if not isinstance(record, dict):
        return problem(f"metric record is not a JSON object: {payload[:80]!r}")
    if record.get("type") == "REQUEST_PARAMETER":
        return None
    kind = METRIC_TYPES.get(str(record.get("type")))
    sequence, parameter_id, value = record.get("sequence", 0), record.get("parameter_id"), record.get("value")
    if kind is None:
        return problem(f"unknown metric type {record.get('type')!r} (expected FINAL or PERIODICAL)")
    if not _is_int(sequence) or not 0 <= sequence <= MAX_ID:
        return problem(f"metric sequence {_short(sequence)} is not an integer from 0 to {MAX_ID}")
    if parameter_id is not None and (not _is_int(parameter_id) or not 0 <= parameter_id <= MAX_ID):
        return problem(f"metric parameter_id {_short(parameter_id)} is not an integer from 0 to {MAX_ID}")
    if not isinstance(value, str):
        return problem(f"metric value must be a JSON string (NNI's nni.dump), got {type(value).__name__}")
    metric, why = _metric_value(value)
    if why is not None:
        return problem(why)
    data, metric = _standard_json(value, metric)
    return TrialMetric(trial_id, parameter_id, kind, sequence, data, timestamp, cursor, metric)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _metric_value(value: str) -> tuple[Any, str | None]:
    """The metric ``value`` decoded, or why it is refused."""
    try:
        metric = json.loads(value)
    except ValueError:
        return None, f"metric value is not JSON: {value[:80]!r}"
    except RecursionError:
        return None, f"metric value is nested too deeply to read: {value[:80]!r}"
    if depth(metric) > MAX_VALUE_DEPTH:
        return None, f"metric value is nested more than {MAX_VALUE_DEPTH} levels deep: {value[:80]!r}"
    number = metric.get("default") if isinstance(metric, dict) else metric
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return None, f"metric must be a number or a dict with a numeric 'default', got {value[:80]!r}"
    try:
        finite = math.isfinite(number)
    except OverflowError:  # an integer no float can hold
        return None, f"metric is too large for a number: {value[:80]!r}"
    if not finite:
        return None, f"metric is not a finite number: {value[:80]!r}"
    return metric, None


def _standard_json(value: str, metric: Any) -> tuple[str, Any]:
    """The metric's JSON (and its decoded value) with a NaN or infinite number beside its "default" as null:
    stored and served as standard JSON, which SQLite's JSON functions and browsers read."""
    if ("NaN" not in value and "Infinity" not in value) or non_finite(metric) is None:
        return value, metric
    standard = finite_copy(metric)
    return json.dumps(standard), standard


Parser = Callable[..., tuple[list[RawRecord], int, list[StreamProblem]]]
#: (cursor key, file in the trial directory, parser), in the order every platform reads them
CHANNELS: tuple[tuple[str, str, Parser], ...] = (
    ("metrics", METRICS_FILE, parse_metric_stream),
    ("stdout", STDOUT_FILE, scan_stdout_metrics),
)


def _decode_all(
    trial_id: str,
    offsets: Mapping[str, int],
    channel: str,
    records: list[RawRecord],
    stream_problems: list[StreamProblem],
) -> tuple[list[TrialMetric], list[TrialProblem]]:
    metrics: list[TrialMetric] = []
    problems: list[TrialProblem] = []
    now = time.time()
    for bad in stream_problems:
        problems.append(TrialProblem(trial_id, bad.message, now, {**offsets, channel: bad.end}))
    for record in records:
        decoded = decode_metric(trial_id, record.payload, {**offsets, channel: record.end}, now)
        if isinstance(decoded, TrialMetric):
            metrics.append(decoded)
        elif decoded is not None:
            problems.append(decoded)
    return metrics, problems


class MetricReader:
    """Reads what is new in a local trial directory's metric channels, from a cursor on."""

    def __init__(self, trial_id: str, trial_dir: Path, cursor: Mapping[str, Any]) -> None:
        self.trial_id = trial_id
        self.trial_dir = trial_dir
        self.offsets = channel_offsets(cursor)

    def read(self, *, final: bool = False) -> tuple[list[TrialMetric], list[TrialProblem]]:
        """Everything new; ``final`` once the trial ended (partial trailing records are then reported)."""
        metrics: list[TrialMetric] = []
        problems: list[TrialProblem] = []
        for channel, name, parse in CHANNELS:
            for _ in range(_UNBOUNDED if final else _CHUNKS_PER_READ):
                offset = self.offsets[channel]
                data = _read_from(self.trial_dir / name, offset)
                # only the file's last read is final: a line may go on past a full read
                last = final and len(data) < _READ_CHUNK
                records, self.offsets[channel], stream_problems = parse(data, offset, final=last)
                found = _decode_all(self.trial_id, self.offsets, channel, records, stream_problems)
                metrics += found[0]
                problems += found[1]
                if len(data) < _READ_CHUNK or self.offsets[channel] == offset:
                    break
        return metrics, problems


def _read_from(path: Path, offset: int) -> bytes:
    try:
        f = keeper.open_regular(str(path))
    except (FileNotFoundError, keeper.NotRegularFile):  # a FIFO the trial made there is never waited on
        return b""
    with f:
        return os.pread(f.fileno(), _READ_CHUNK, offset)


def channel_offsets(cursor: Mapping[str, Any]) -> dict[str, int]:
    """Where reading starts for a trial whose metrics were stored up to ``cursor``."""
    return {channel: int(cursor.get(channel, 0)) for channel, _, _ in CHANNELS}


def has_more(info: Mapping[str, Any]) -> bool:
    """The probe left bytes of a channel for the next poll (a chatty trial): its end must wait for them."""
    return any(info[f"{channel}_more"] for channel, _, _ in CHANNELS)


def read_channels(
    trial_id: str, offsets: dict[str, int], info: Mapping[str, Any], *, final: bool
) -> tuple[list[TrialMetric], list[TrialProblem]]:
    """Parse one trial's probe answer from ``offsets`` on (updated in place); ``final`` once the trial ended."""
    metrics: list[TrialMetric] = []
    problems: list[TrialProblem] = []
    for channel, _, parse in CHANNELS:
        start = offsets[channel]
        records, offsets[channel], stream_problems = parse(
            base64.b64decode(info[channel]), start, final=final
        )
        found = _decode_all(trial_id, offsets, channel, records, stream_problems)
        metrics += found[0]
        problems += found[1]
    return metrics, problems
