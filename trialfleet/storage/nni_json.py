"""NNI's TrialJobInfo and MetricDataRecord encoded by SQLite's JSON functions, byte for byte as
``trialfleet.nni_view.payloads`` and ``trialfleet.server.encoding.encode_json`` write them (the server's kept lists join them).

The first build of a whole list at 100,000 trials spent its time on a Python object per row: a ``TrialRow``
(two ``json.loads``), a payload dict, the parameters decoded and encoded again, the element encoded (12.7 s of
CPU for ``/trial-jobs``, 3.2 s for ``/metric-data``, on the shared 2-core machine). Here SQLite writes each
element's JSON text, and Python only joins them.

SQLite writes a value as Python does only where both agree, so each expression is guarded and gives NULL
elsewhere, and that row is built the Python way (the caller's ``fallback``):

* parameters: the store writes them with ``json.dumps`` (``ExperimentStore.add_trial``, the only writer): numbers
  as Python's ``repr`` writes them, no duplicate keys. Where they hold no backslash (no escaped character, no
  non-ASCII one) and are valid JSON to SQLite (no NaN, which an older manager stored), SQLite's ``json()``
  minifies them to the text of ``compact_json(json.loads(...))``. (A number written otherwise by hand into the
  database, ``1.50`` for ``1.5``, would be sent as written: SQLite keeps a number's text.)
* a metric's ``data``: ``json.dumps`` of printable ASCII escapes ``"`` and ``\\`` alone, as ``json_quote`` does;
* milliseconds: Python's ``round(seconds * 1000)`` (half to even) written in SQL on the same double product.

Strings are quoted by ``json_quote``, which escapes as ``json.dumps(..., ensure_ascii=False)`` does (control
characters as ``\\n`` or ``\\u00XX``, nothing else). ``tests/unit/server/test_encoded_lists.py`` checks every
element against the Python build, hostile values included.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from trialfleet.storage.store import ExperimentStore

#: rows per query of a whole list (paged by key, never by offset)
CHUNK = 5000


def _ms(column: str) -> str:
    """``round(column * 1000)`` as Python rounds (half to even), as SQL text; NULL past 10^15 ms (Python's)."""
    product = f"({column} * 1000)"
    whole = f"CAST({product} AS INTEGER)"
    return (
        f"(CASE WHEN abs({product}) < 1e15 THEN {whole} + CASE WHEN {product} - {whole} > 0.5 THEN 1 "
        f"WHEN {product} - {whole} < -0.5 THEN -1 WHEN abs({product} - {whole}) = 0.5 THEN {whole} % 2 "
        "ELSE 0 END END)"
    )


def _metric_json(m: str) -> str:
    """A MetricDataRecord of metrics row ``m`` (NULL where SQLite would not write what Python writes)."""
    safe = (
        f"typeof({m}.data) = 'text' AND {m}.data NOT GLOB '*[^ -~]*' AND typeof({m}.sequence) = 'integer' "
        f"AND typeof({m}.parameter_id) IN ('integer', 'null') AND typeof({m}.type) = 'text' "
        f"AND typeof({m}.trial_id) = 'text' AND typeof({m}.timestamp) IN ('real', 'integer')"
    )
    return (
        f"CASE WHEN {safe} THEN '{{\"timestamp\":' || {_ms(f'{m}.timestamp')} "
        f"|| ',\"trialJobId\":' || json_quote({m}.trial_id) "
        f"|| ',\"parameterId\":' || coalesce(json_quote(CAST({m}.parameter_id AS TEXT)), 'null') "
        f"|| ',\"type\":' || json_quote({m}.type) || ',\"sequence\":' || {m}.sequence "
        f"|| ',\"data\":' || json_quote(json_quote({m}.data) || '') || '}}' END"
    )


#: the first FINAL metric of trial ``t``'s current attempt (NNI keeps only the first)
_FIRST_FINAL = (
    "(SELECT f.id FROM metrics f WHERE f.trial_id = t.id AND f.attempt = t.attempt AND f.type = 'FINAL' "
    "ORDER BY f.id LIMIT 1)"
)


def _optional(key: str, condition: str, value: str) -> str:
    return f"CASE WHEN {condition} THEN ',\"{key}\":' || {value} ELSE '' END"


def _job_json(stderr_file: str) -> str:
    """A TrialJobInfo of trials row ``t`` (with ``fm``, its first final metric, or NULL)."""
    start = "coalesce(t.start_time, t.submit_time)"
    safe = (
        "typeof(t.parameters) = 'text' AND instr(t.parameters, char(92)) = 0 AND json_valid(t.parameters) "
        f"AND typeof(t.id) = 'text' AND typeof(t.sequence_id) = 'integer' AND typeof({start}) IN ('real', 'integer') "
        "AND typeof(t.end_time) IN ('real', 'integer', 'null') "
        "AND typeof(t.location) IN ('text', 'null') AND typeof(t.platform) IN ('text', 'null') "
        "AND typeof(t.message) IN ('text', 'null')"
    )
    final = "'[' || " + _metric_json("fm") + " || ']'"
    succeeded, failed = (
        "t.status = 'SUCCEEDED' AND fm.id IS NOT NULL",
        "t.status = 'FAILED' AND t.location IS NOT NULL",
    )
    return (
        f"CASE WHEN {safe} THEN '{{\"trialJobId\":' || json_quote(t.id) || ',\"sequenceId\":' || t.sequence_id "
        "|| ',\"status\":' || json_quote(t.status) "
        "|| ',\"hyperParameters\":[' || json_quote(json(t.parameters) || '') || ']' "
        f"|| ',\"startTime\":' || {_ms(start)} "
        f"|| {_optional('endTime', 't.end_time IS NOT NULL', _ms('t.end_time'))} "
        f"|| {_optional('logPath', 't.location IS NOT NULL', 'json_quote(t.location)')} "
        f"|| {_optional('platform', 't.platform IS NOT NULL AND t.handle IS NOT NULL', 'json_quote(t.platform)')} "
        f"|| {_optional('message', 't.message IS NOT NULL', 'json_quote(t.message)')} "
        f"|| {_optional('finalMetricData', succeeded, final)} "
        f"|| {_optional('stderrPath', failed, _stderr(stderr_file))} "
        "|| '}' END"
    )


def _stderr(stderr_file: str) -> str:
    name = stderr_file.replace("'", "''")
    return f"json_quote(rtrim(t.location, '/') || '/{name}')"


@cache
def _jobs_sql(stderr_file: str) -> str:
    return (
        f"SELECT t.id, t.sequence_id, {_job_json(stderr_file)} FROM trials t LEFT JOIN metrics fm ON fm.id = {_FIRST_FINAL} "
        "AND t.status = 'SUCCEEDED'"
    )


_METRICS_SQL = (
    f"SELECT m.id, {_metric_json('m')} FROM metrics m JOIN trials t ON t.id = m.trial_id AND t.attempt = m.attempt "
    "WHERE m.id > ?"
)


def trial_job_rows(
    store: ExperimentStore, stderr_file: str, ids: list[str] | None = None
) -> Iterator[tuple[str, int, str | None]]:
    """(id, sequence id, TrialJobInfo's JSON or None) of every trial by sequence id, or of trials ``ids``;
    a FAILED trial's ``stderrPath`` is ``stderr_file`` in its directory."""
    jobs_sql = _jobs_sql(stderr_file)
    if ids is not None:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            yield from store.read_rows(f"{jobs_sql} WHERE t.id IN ({', '.join('?' for _ in chunk)})", chunk)
        return
    after = -(2**63)
    while True:
        rows = store.read_rows(
            f"{jobs_sql} WHERE t.sequence_id > ? ORDER BY t.sequence_id LIMIT ?", (after, CHUNK)
        )
        yield from rows
        if len(rows) < CHUNK:
            return
        after = rows[-1][1]


def metric_data_rows(
    store: ExperimentStore, type: str | None, after: int, up_to: int | None
) -> Iterator[tuple[int, str | None]]:
    """(id, MetricDataRecord's JSON or None) of the current attempts' metrics after id ``after`` (up to
    ``up_to``; of ``type``), in the order stored."""
    given = [
        (clause, value)
        for clause, value in ((" AND m.id <= ?", up_to), (" AND m.type = ?", type))
        if value is not None
    ]
    sql = _METRICS_SQL + "".join(clause for clause, _ in given)
    args = [value for _, value in given]
    while True:
        rows = store.read_rows(f"{sql} ORDER BY m.id LIMIT ?", [after, *args, CHUNK])
        yield from rows
        if len(rows) < CHUNK:
            return
        after = rows[-1][0]
