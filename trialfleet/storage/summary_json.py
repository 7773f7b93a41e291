"""The web UI's trial summaries (``queries.trial_summary`` as ``encode_strict_json`` writes it) encoded by SQLite.

``/trials/all``'s first build at 100,000 trials spent 4.75 s of CPU on a dict per trial and its ``json.dumps``.
SQLite writes each summary's JSON where it writes what Python would; elsewhere the expression is NULL and the
caller builds that summary the Python way:

* the parameters and the final result's data: where they hold no backslash and are valid JSON to SQLite (no NaN,
  which the strict encoding writes as null), ``json()`` minifies them as Python re-encodes what ``json.dumps``
  wrote (the store's parameters, the SDK's results);
* the final value: SQLite's text of a REAL (15 significant digits) where it reads back as the same number and has
  no exponent, which is then Python's ``repr`` (the shortest text that reads back, in fixed notation there);
* milliseconds: ``int(seconds * 1000)``, a truncation, as ``CAST`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from trialfleet.storage.sql import FINAL_DATA_SQL, FINAL_VALUE_SQL

#: rows per query of the whole list (paged by sequence id)
CHUNK = 5000


def _ms(column: str) -> str:
    product = f"({column} * 1000)"
    return f"(CASE WHEN {column} IS NULL THEN 'null' WHEN abs({product}) < 1e15 THEN CAST({product} AS INTEGER) END)"


def _json_text(column: str, empty: str) -> str:
    """The column's JSON minified, ``empty`` for NULL (or ''), NULL where Python would write otherwise."""
    return (
        f"(CASE WHEN {column} IS NULL OR {column} = '' THEN '{empty}' WHEN typeof({column}) = 'text' "
        f"AND instr({column}, char(92)) = 0 AND json_valid({column}) THEN json({column}) END)"
    )


_FINAL = (
    "(CASE WHEN final_value IS NULL THEN 'null' WHEN typeof(final_value) = 'integer' THEN final_value "
    "WHEN instr(CAST(final_value AS TEXT), 'e') = 0 AND CAST(CAST(final_value AS TEXT) AS REAL) = final_value "
    "THEN CAST(final_value AS TEXT) END)"
)
_PARAMS = (
    "(CASE WHEN typeof(parameters) = 'text' AND instr(parameters, char(92)) = 0 AND json_valid(parameters) "
    "AND json_type(parameters) = 'object' THEN coalesce(parameters -> '$.parameters', '{}') END)"
)
_SUMMARY_JSON = (
    "'{\"id\":' || json_quote(id) || ',\"seq\":' || sequence_id || ',\"status\":' || json_quote(status) "
    f"|| ',\"params\":' || {_PARAMS} || ',\"final\":' || {_FINAL} "
    f"|| ',\"finalData\":' || {_json_text('final_data', 'null')} "
    f"|| ',\"submit\":' || {_ms('submit_time')} || ',\"start\":' || {_ms('start_time')} "
    f"|| ',\"end\":' || {_ms('end_time')} || ',\"location\":' || json_quote(location) "
    "|| ',\"message\":' || json_quote(message) || ',\"source\":' || json_quote(parameter_source) "
    "|| ',\"platform\":' || json_quote(platform) || '}'"
)
_TYPES = (
    "typeof(id) = 'text' AND typeof(sequence_id) = 'integer' AND typeof(status) = 'text' "
    "AND typeof(location) IN ('text', 'null') AND typeof(message) IN ('text', 'null') "
    "AND typeof(parameter_source) IN ('text', 'null') AND typeof(platform) IN ('text', 'null')"
)
#: the trials with their final result by the one rule every reader shares (``sql.final_sql``); SQLite flattens it
_TRIALS = (
    f"(SELECT id, sequence_id, status, parameters, {FINAL_DATA_SQL} AS final_data, {FINAL_VALUE_SQL} AS final_value, "
    "submit_time, start_time, end_time, location, message, parameter_source, platform FROM trials)"
)
_SQL = f"SELECT id, sequence_id, CASE WHEN {_TYPES} THEN {_SUMMARY_JSON} END FROM {_TRIALS}"


def summary_rows(
    query: Callable[[str, Sequence[Any]], list[Any]], ids: Sequence[str] | None
) -> Iterator[tuple[str, int, str | None]]:
    """(id, sequence id, the summary's JSON or None) of every trial by sequence id, or of trials ``ids``;
    ``query(sql, args)`` runs a read query."""
    if ids is not None:
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            yield from query(f"{_SQL} WHERE id IN ({', '.join('?' for _ in chunk)})", chunk)
        return
    after = -(2**63)
    while True:
        page = query(f"{_SQL} WHERE sequence_id > ? ORDER BY sequence_id LIMIT ?", (after, CHUNK))
        yield from page
        if len(page) < CHUNK:
            return
        after = page[-1][1]
