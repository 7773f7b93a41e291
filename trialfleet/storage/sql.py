"""SQL fragments every read of the store shares: the default metric of a stored value, a trial's final result,
and the sort keys.

One table of sort keys serves the store's ``trials(order=...)``, NNI's ``/trial-jobs?sort=`` and the web UI's
trials page, so a key means the same everywhere.
"""

from __future__ import annotations

from typing import Any

#: the default metric of a stored metric JSON: a number, or the "default" key of a dict
_VALUE_SQL = (
    "CASE WHEN json_valid({c}) THEN CASE json_type({c}) "
    "WHEN 'object' THEN json_extract({c}, '$.default') "
    "WHEN 'real' THEN json_extract({c}, '$') WHEN 'integer' THEN json_extract({c}, '$') END END"
)



def final_sql(column: str) -> str:
    """A trial's final result as every reader shows it, from ``column`` of the trials table (``final_data``, the
    first FINAL metric of its current attempt, or ``final_value``, its default metric): NNI's rule, a trial has
    one only once it SUCCEEDED. NNI's ``/trial-jobs`` gives ``finalMetricData`` by it, and the web UI's tables,
    charts and sorts and the CLI read this same expression, so none can show a final result another has not.
    An early-stopped, failed or canceled trial's FINAL metrics stay in its metric data (``/metric-data``)."""
    return f"CASE WHEN status = 'SUCCEEDED' THEN {column} END"


#: the default metric of a trial's final result (:func:`final_sql`); the schema indexes the trials by it
FINAL_VALUE_SQL = final_sql("final_value")
#: the trial's final result, as the JSON the trial reported (:func:`final_sql`)
FINAL_DATA_SQL = final_sql("final_data")

#: sort key → its SQL over the trials table (``param.<name>`` and ``metric.<key>`` are accepted too)
SORTS = {
    "sequenceId": "sequence_id",
    "trialJobId": "id",
    "status": "status",
    "startTime": "start_time",
    "endTime": "end_time",
    "duration": "(COALESCE(end_time, strftime('%s','now')) - start_time)",
    "finalMetric": f"({FINAL_VALUE_SQL})",
    "final": f"({FINAL_VALUE_SQL})",
    "platform": "platform",
}
#: every sort key, as a JSON-schema pattern: any name after ``param.`` or ``metric.``, dots and newlines too.
#: It ends with ``(?![\s\S])``, not ``$``: in a Python regex, which schema fuzzers generate from, ``$`` also
#: matches before a final newline (``"status\n"``)
SORT_PATTERN = "^(" + "|".join(SORTS) + r"|(param|metric)\.[\s\S]*)(?![\s\S])"
#: the accepted sort keys, in words
SORT_CHOICES = ", ".join(SORTS) + ", param.<parameter name> or metric.<final metric key>"


#: the trials' parameter records, NULL where one is no JSON SQLite reads (an older trialfleet stored NaN unchecked:
#: a JSON function given such a row fails the whole query)
PARAMETERS_SQL = "CASE WHEN json_valid(parameters) THEN parameters END"


def value_sql(column: str) -> str:
    return _VALUE_SQL.format(c=column)


def member_sql(column: str, *, path: str = "$", trusted: bool = False) -> str:
    """SQL of the value at one key (the query's next ``?``, bound as a value: any name is safe and matched
    exactly, escapes decoded) of the JSON object at ``path`` in ``column``; NULL when there is no object or the
    object has no such key. An untrusted column (a trial's metric) may also hold NULL or no JSON at all."""
    document = column if trusted else f"CASE WHEN json_valid({column}) THEN {column} END"
    return f"(SELECT j.value FROM json_each({document}, '{path}') AS j WHERE j.key = ?)"


def sort_sql(sort: str) -> tuple[str, list[Any]]:
    """SQL for a sort key and its arguments: one of :data:`SORTS`, ``param.<name>`` or ``metric.<key>`` (any
    name); ValueError naming the accepted keys otherwise."""
    if sort in SORTS:
        return SORTS[sort], []
    kind, dot, name = sort.partition(".")
    if dot and kind == "param":
        return member_sql("parameters", path="$.parameters"), [name]
    if dot and kind == "metric":
        return member_sql(f"({FINAL_DATA_SQL})"), [name]
    raise ValueError(f"cannot sort by {sort!r}: expected {SORT_CHOICES}")


#: sort keys of columns that are never NULL and never tie (``sequence_id`` is unique, ``id`` the primary key):
#: ordered by the column alone, so SQLite walks its index (the trials page's default order; with the ``IS NULL``
#: term a page of 10,000 trials was a full scan and a sort, 12.6 ms instead of 0.1)
_UNIQUE_NOT_NULL = {"sequenceId", "trialJobId"}


def order_by(sort: str, *, descending: bool = False) -> tuple[str, list[Any]]:
    """``ORDER BY`` a sort key, missing values last, ties by submission order; with its arguments."""
    column, args = sort_sql(sort)
    direction = "DESC" if descending else "ASC"
    if sort in _UNIQUE_NOT_NULL:
        return f" ORDER BY {column} {direction}", args
    return f" ORDER BY {column} IS NULL, {column} {direction}, sequence_id", args * 2
