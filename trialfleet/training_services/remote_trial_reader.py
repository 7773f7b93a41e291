"""The manager's side of ``probe.py poll``: trial directories read on another machine, one round trip a poll.

A poll request names each trial's directory and the offsets its two metric channels (``.nni/metrics`` and
``trial.stdout``) were read to; the probe answers with keeper.json, result.json and the bytes after those
offsets (base64, capped per poll, ``<channel>_more`` when bytes were left for the next poll). The bytes are
parsed by the same code as on every platform (``trial_files``), and the offsets move on only with what was
parsed, so a round trip that fails loses nothing: the next one asks again from the same place.

Used by the remote platform (its fleet's hosts) and by Slurm through a login node.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping
from typing import Any

from trialfleet.training_services.base import TrialMetric, TrialProblem
from trialfleet.training_services.trial_files import (
    RawRecord,
    StreamProblem,
    decode_metric,
    parse_metric_stream,
    scan_stdout_metrics,
)

CHANNELS: tuple[tuple[str, Callable[..., tuple[list[RawRecord], int, list[StreamProblem]]]], ...] = (
    ("metrics", parse_metric_stream),
    ("stdout", scan_stdout_metrics),
)


def channel_offsets(cursor: Mapping[str, Any]) -> dict[str, int]:
    """Where reading starts for a trial whose metrics were stored up to ``cursor``."""
    return {channel: int(cursor.get(channel, 0)) for channel, _ in CHANNELS}


def has_more(info: Mapping[str, Any]) -> bool:
    """The probe left bytes of a channel for the next poll (a chatty trial): its end must wait for them."""
    return any(info[f"{channel}_more"] for channel, _ in CHANNELS)


def read_channels(
    trial_id: str, offsets: dict[str, int], info: Mapping[str, Any], *, final: bool
) -> tuple[list[TrialMetric], list[TrialProblem]]:
    """Parse one trial's answer from ``offsets`` on (updated in place); ``final`` once the trial ended."""
    metrics: list[TrialMetric] = []
    problems: list[TrialProblem] = []
    now = time.time()
    for channel, parse in CHANNELS:
        start = offsets[channel]
        data = base64.b64decode(info[channel])
        records, offsets[channel], stream_problems = parse(data, start, final=final)
        for bad in stream_problems:
            problems.append(TrialProblem(trial_id, bad.message, now, {**offsets, channel: bad.end}))
        for record in records:
            decoded = decode_metric(trial_id, record.payload, {**offsets, channel: record.end}, now)
            if isinstance(decoded, TrialMetric):
                metrics.append(decoded)
            elif decoded is not None:
                problems.append(decoded)
    return metrics, problems
