"""Validating a reported metric and encoding it as one NNI legacy metric record.

A record is ``b"ME%06d" % len(payload) + payload`` where payload is the JSON record plus ``b"\\n"``,
and the record's ``value`` is the metric JSON-encoded once more (NNI's double encoding). The manager
reads this one format whatever SDK wrote it, so the bytes here must match NNI's exactly.
"""

from __future__ import annotations

import json
import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# NNI's limit: the encoded payload (record + newline) must be shorter than this many bytes.
MAX_PAYLOAD_BYTES = 1_000_000


def normalize_metric(metric: object) -> Any:
    """Return ``metric`` as plain JSON data, or raise ``ValueError`` saying what is wrong with it.

    A metric is a finite number, or a dict whose ``'default'`` is a finite number (other keys are
    free-form, shown in the web UI). Array scalars (numpy, torch) are converted to Python numbers.
    """
    metric = _plain(metric)
    if isinstance(metric, dict):
        if "default" not in metric:
            raise ValueError(
                "a metric dict must have a 'default' key holding a finite number "
                f"(the value tuners optimise); got keys {sorted(map(str, metric))}"
            )
        default = _plain(metric["default"])
        _check_number(default, "metric['default'] must be a finite number")
        return {**metric, "default": default}
    _check_number(metric, "a metric must be a finite number or a dict with a finite numeric 'default'")
    return metric


def encode_value(metric: Any) -> str:
    """The inner JSON string of a record (NNI's ``nni.dump(metric)``)."""
    try:
        return json.dumps(metric, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metric is not JSON-serialisable: {exc}") from exc


def encode_record(
    metric_type: str, parameter_id: object, trial_job_id: str | None, sequence: int, value: str
) -> bytes:
    """One framed record, ready to append to ``.nni/metrics`` with a single write."""
    record = {
        "parameter_id": parameter_id,
        "trial_job_id": trial_job_id,
        "type": metric_type,
        "sequence": sequence,
        "value": value,
    }
    payload = json.dumps(record).encode("utf-8") + b"\n"
    if len(payload) >= MAX_PAYLOAD_BYTES:
        raise ValueError(
            f"Metric too long: the encoded record is {len(payload)} bytes, "
            f"the limit is {MAX_PAYLOAD_BYTES - 1} (as in NNI)"
        )
    return b"ME%06d" % len(payload) + payload


def _plain(value: object) -> Any:
    # numpy/torch scalars are not int/float subclasses (except numpy.float64); tolist() turns any of
    # them into Python numbers without importing numpy here.
    if isinstance(value, (bool, int, float, str, dict, list)) or value is None:
        return value
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return value


def _check_number(value: object, rule: str) -> None:
    # bool is an int subclass but a True/False "accuracy" is always a mistake in the trial.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{rule}, got {type(value).__name__}: {value!r:.200}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{rule}, got {value!r}")


def _json_default(value: object) -> Any:
    converted = _plain(value)
    if converted is value:
        raise TypeError(f"object of type {type(value).__name__} is not JSON serializable")
    return converted
