"""SQL fragments every read of the store shares: the default metric of a stored value, and the sort keys.

One table of sort keys serves the store's ``trials(order=...)``, NNI's ``/trial-jobs?sort=`` and the web UI's
trials page, so a key means the same everywhere.
"""

from __future__ import annotations

#: the default metric of a stored metric JSON: a number, or the "default" key of a dict
_VALUE_SQL = (
    "CASE WHEN json_valid({c}) THEN CASE json_type({c}) "
    "WHEN 'object' THEN json_extract({c}, '$.default') "
    "WHEN 'real' THEN json_extract({c}, '$') WHEN 'integer' THEN json_extract({c}, '$') END END"
)

#: sort key → its SQL over the trials table (``param.<name>`` and ``metric.<key>`` are accepted too)
SORTS = {
    "sequenceId": "sequence_id",
    "trialJobId": "id",
    "status": "status",
    "startTime": "start_time",
    "endTime": "end_time",
    "duration": "(COALESCE(end_time, strftime('%s','now')) - start_time)",
    "finalMetric": "final_value",
    "final": "final_value",
    "platform": "platform",
}


def value_sql(column: str) -> str:
    return _VALUE_SQL.format(c=column)


def sort_sql(sort: str) -> str:
    """SQL for a sort key: one of :data:`SORTS`, ``param.<name>`` or ``metric.<key>``; ValueError if unknown."""
    if sort in SORTS:
        return SORTS[sort]
    kind, _, name = sort.partition(".")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"cannot sort by {sort!r}")
    if kind == "param":
        return f"json_extract(parameters, '$.parameters.\"{name}\"')"
    if kind == "metric":
        return f"json_extract(final_data, '$.\"{name}\"')"
    raise ValueError(f"cannot sort by {sort!r}")


def order_by(sort: str, *, descending: bool = False) -> str:
    """``ORDER BY`` a sort key, missing values last, ties by submission order."""
    column = sort_sql(sort)
    return f" ORDER BY {column} IS NULL, {column} {'DESC' if descending else 'ASC'}, sequence_id"
