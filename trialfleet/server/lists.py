"""NNI's whole lists, ``/trial-jobs`` and ``/metric-data``, kept encoded from one build to the next.

NNI's web UI polls both lists whole, every few seconds. At 10,000 trials each is megabytes, and building one
from the database (every row read, turned into a payload and encoded) took 150-350 ms while the experiment
ran, as each commit made the next request build it again. So each list is kept as its encoded body, and a build
after a change reads only what changed since the previous one:

* the trial list reads again the trials that the change feed names (an event, such as a new status or waiting
  reason, or a final result since the previous build: a few trials per second while trials run) and splices
  their new TrialJobInfos into the kept body, copying it once (:class:`~trialfleet.storage.kept.KeptTrials`,
  as the web UI's ``/trials/all``);
* the metric list appends the metrics stored since (metrics are only ever appended), and is read again whole
  only after a trial was retried (the earlier attempt's metrics leave the list) or when too much changed.

Each element is encoded by SQLite (:mod:`~trialfleet.storage.nni_json`; Python builds those it would write
otherwise): a first build at 100,000 trials took 12.7 s of CPU for ``/trial-jobs`` and 3.2 s for ``/metric-data``
with a payload dict and a ``json.dumps`` per element, 3.0 s and 1.9 s so (load average 8-14 on 2 cores).

The kept body is the one the response cache sends, not a copy of it: at 10,000 trials the lists cost no memory
beyond their bodies, and a list nobody asked for in :data:`FORGET_AFTER` seconds is let go (NNI's web UI asks
every 10 to 60 seconds, as its user chose). Builds are serialised, on a read-only connection of the lists' own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from trialfleet.nni_view import payloads
from trialfleet.server.encoding import encode_json
from trialfleet.server.reader import ExperimentReader
from trialfleet.storage import ExperimentStore
from trialfleet.storage.kept import Element, KeptTrials
from trialfleet.storage.nni_json import metric_data_rows, trial_job_rows
from trialfleet.storage.queries import Cursor, TrialQueries
from trialfleet.training_services.trial_dir import STDERR_FILE

#: more trials changed than this since the previous build: read them all again
MAX_CHANGED_TRIALS = 2000
#: a list not asked for in this many seconds is let go (:meth:`WholeLists.forget_unasked`)
FORGET_AFTER = 90.0


class WholeLists:
    """The kept bodies of ``/trial-jobs`` and of ``/metric-data`` (one per metric type asked for)."""

    def __init__(self, database: Path, experiment_dir: Path) -> None:
        self._store = ExperimentStore(database, readonly=True)
        self._queries = TrialQueries(self._store)
        self._reader = ExperimentReader(self._store, experiment_dir)
        self._lock = threading.Lock()
        self._trials = KeptTrials(self._queries, self._read_trials, MAX_CHANGED_TRIALS)
        self._metrics: dict[str | None, tuple[Cursor, bytes]] = {}  # type → (read up to, body)
        self._asked = time.monotonic()

    def close(self) -> None:
        self._store.close()

    def forget_unasked(self, older_than: float = FORGET_AFTER) -> bool:
        """Let the kept lists go if none was asked for in ``older_than`` seconds (never waits for a build)."""
        if time.monotonic() - self._asked < older_than or not self._lock.acquire(blocking=False):
            return False
        try:
            self._trials.forget()
            self._metrics = {}
            return True
        finally:
            self._lock.release()

    def trial_jobs(self) -> bytes:
        """Every trial's TrialJobInfo by sequence id, as a JSON array."""
        with self._lock:
            self._asked = time.monotonic()
            self._trials.refresh()
            return self._trials.list.body

    def _read_trials(self, ids: Sequence[str] | None) -> list[Element]:
        """The trials' elements as SQLite encodes them; those it cannot encode as Python does, the Python way."""
        elements: list[Element] = []
        others: list[str] = []
        for trial_id, sequence_id, encoded in trial_job_rows(
            self._store, STDERR_FILE, None if ids is None else list(ids)
        ):
            if encoded is None:
                others.append(trial_id)
            else:
                elements.append((trial_id, sequence_id, encoded.encode()))
        infos = self._reader.trial_jobs_with_ids(others) if others else []
        elements += [(info["trialJobId"], info["sequenceId"], encode_json(info).encode()) for info in infos]
        return elements

    def metric_data(self, type: str | None = None) -> bytes:
        """Every MetricDataRecord of the trials' current attempts (of ``type``), in the order stored."""
        with self._lock:
            self._asked = time.monotonic()
            now = self._queries.cursor()
            kept = self._metrics.get(type)
            if kept is None or self._queries.retried_since(kept[0], now):
                body = self._metric_list(type, 0, now.metric)
            else:
                since, body = kept
                more = self._metric_list(type, since.metric, now.metric)
                if len(more) > 2:  # one copy of the kept body, not two
                    comma = b"," if len(body) > 2 else b""
                    body = b"".join((memoryview(body)[:-1], comma, memoryview(more)[1:]))
            self._metrics[type] = (now, body)
            return body

    def _metric_list(self, type: str | None, after: int, up_to: int) -> bytes:
        """The JSON array of the MetricDataRecords after ``after`` up to ``up_to``: SQLite's encoding of each,
        or Python's where SQLite's would differ."""
        parts: list[str] = []
        for metric_id, encoded in metric_data_rows(self._store, type, after, up_to):
            if encoded is None:
                (row,) = self._store.metrics(type=type, after_id=metric_id - 1, up_to_id=metric_id)
                encoded = encode_json(payloads.metric_record(row))
            parts.append(encoded)
        return ("[" + ",".join(parts) + "]").encode()
