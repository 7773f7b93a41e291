"""NNI's export and import formats (``experiment export`` / ``experiment import``, ``/export-data``).

Export works on what ``/export-data`` and ``/metric-data`` return, so the CLI, the REST server and the Python
API produce the same files whether the experiment is running or read from its database:

* JSON: the ``/export-data`` list, ``[{parameter, value, trialJobId}]`` (and ``platform`` in a hybrid
  experiment) where ``value`` is the trial's metric as a JSON string; with intermediate results each record also has ``intermediate``, the list
  of the trial's intermediate metrics (JSON strings, in the order reported).
* CSV: one row per record; columns are the parameters, then the metric's keys when it is a dict (else one
  ``reward`` column), then ``trialJobId`` (a hybrid experiment's ``platform`` next, and ``intermediate`` as
  ``[v1,v2,...]``).

Import reads ``[{parameter, value}]`` (a value may be a number, a dict with a numeric ``default``, or such a value
JSON-encoded as an export writes it) and reports every malformed record with its index.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trialfleet.errors import ConfigError, ConfigProblem
from trialfleet.json_values import depth as json_depth

FORMATS = ("json", "csv")
#: an imported parameter nests lists and objects at most this deep (SQLite's JSON and every printer read it)
MAX_IMPORT_DEPTH = 32
#: the CSV's last columns, after the parameters and the metric's keys
_TAIL = ("trialJobId", "platform", "intermediate")
_MAX_REPORTED_PROBLEMS = 20


def with_intermediate(
    records: Sequence[Mapping[str, Any]], metric_data: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Attach each trial's PERIODICAL metrics (``/metric-data`` records) to its export record."""
    by_trial: dict[str, list[str]] = {}
    for metric in sorted(metric_data, key=lambda m: (m["timestamp"], m["sequence"])):
        if metric["type"] == "PERIODICAL":
            by_trial.setdefault(metric["trialJobId"], []).append(json.loads(metric["data"]))
    return [{**record, "intermediate": by_trial.get(record["trialJobId"], [])} for record in records]


def to_json(records: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(records))


def to_csv(records: Sequence[Mapping[str, Any]]) -> str:
    rows = [_csv_row(record) for record in records]
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(k for k in row if k not in _TAIL))
    tail = [key for key in _TAIL if any(key in row for row in rows)]
    out = io.StringIO()
    writer = csv.DictWriter(out, [*columns, *tail], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _csv_row(record: Mapping[str, Any]) -> dict[str, Any]:
    value = json.loads(record["value"])
    metrics = value if isinstance(value, dict) else {"reward": value}
    parameters = record["parameter"]
    if not isinstance(parameters, dict):  # a bare value (NNI's BatchTuner): one column
        parameters = {"parameter": json.dumps(parameters)}
    row = {k: _cell(v) for k, v in {**parameters, **metrics}.items()}
    row["trialJobId"] = record["trialJobId"]
    if "platform" in record:
        row["platform"] = record["platform"]
    if "intermediate" in record:
        row["intermediate"] = "[" + ",".join(record["intermediate"]) + "]"
    return row


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (dict, list)) else value


def render(records: Sequence[Mapping[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return to_json(records)
    if fmt == "csv":
        return to_csv(records)
    raise ValueError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")


# ---- import ------------------------------------------------------------------------------------------


# a CSV export cannot come back: its columns do not say which are parameters and which are metrics
_IMPORT_FORMAT = (
    'expected a JSON list of {"parameter": {...}, "value": ...} records, as `experiment export --type json` '
    "writes them (a CSV export cannot be imported)"
)


def load_import_file(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate an import file; ConfigError names the file and the bad record."""
    file = Path(path)
    try:
        data = json.loads(file.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read the import file: {exc.strerror or exc}", file=file) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON ({exc}); {_IMPORT_FORMAT}", file=file) from exc
    except RecursionError as exc:
        raise ConfigError(
            f"nested too deeply to read (an imported parameter nests at most {MAX_IMPORT_DEPTH} levels)", file=file
        ) from exc
    return parse_import_records(data, source=str(file))


def parse_import_records(data: Any, *, source: str) -> list[dict[str, Any]]:
    """``[{parameter, value}]`` → the same list with decoded values, or ConfigError listing each problem."""
    if not isinstance(data, list):
        raise ConfigError(
            f'expected a JSON list of {{"parameter": {{...}}, "value": ...}} records, got {_kind(data)}',
            file=source,
        )
    records: list[dict[str, Any]] = []
    problems: list[ConfigProblem] = []
    for index, item in enumerate(data):
        record, problem = _import_record(index, item)
        if problem is not None:
            problems.append(problem)
        elif record is not None:
            records.append(record)
    if problems:
        lines = [f"  - {p.key_path}: {p.message}" for p in problems[:_MAX_REPORTED_PROBLEMS]]
        raise ConfigError(
            f"{len(problems)} bad record(s) in the import data:\n" + "\n".join(lines), file=source
        )
    return records


def _import_record(index: int, item: Any) -> tuple[dict[str, Any] | None, ConfigProblem | None]:
    if not isinstance(item, dict):
        return None, ConfigProblem(
            f"[{index}]", f"expected an object with 'parameter' and 'value', got {_kind(item)}"
        )
    if not isinstance(item.get("parameter"), dict):
        return None, ConfigProblem(
            f"[{index}].parameter", f"expected an object, got {_kind(item.get('parameter'))}"
        )
    if json_depth(item["parameter"]) > MAX_IMPORT_DEPTH:
        return None, ConfigProblem(f"[{index}].parameter", f"nested more than {MAX_IMPORT_DEPTH} levels deep")
    if "value" not in item:
        return None, ConfigProblem(f"[{index}].value", "missing")
    value = item["value"]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None, ConfigProblem(f"[{index}].value", f"the string {value[:40]!r} is not a JSON metric")
    if not _is_metric(value):
        return None, ConfigProblem(
            f"[{index}].value", f"expected a number or an object with a numeric 'default', got {_kind(value)}"
        )
    return {"parameter": item["parameter"], "value": value}, None


def _is_metric(value: Any) -> bool:
    if isinstance(value, dict):
        value = value.get("default")
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return repr(value)
