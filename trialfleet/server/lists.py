"""NNI's whole lists, ``/trial-jobs`` and ``/metric-data``, kept encoded from one build to the next.

NNI's web UI polls both lists whole, every few seconds. At 10,000 trials each is megabytes, and building one
from the database (every row read, turned into a payload and encoded) took 150-350 ms while the experiment
ran, as each commit made the next request build it again. So each list is kept as its encoded body, and a build
after a change reads only what changed since the previous one:

* the trial list reads again the trials that the change feed names (an event, such as a new status or waiting
  reason, or a final result since the previous build: a few trials per second while trials run) and splices
  their new TrialJobInfos into the kept body, copying it once (:class:`SplicedList`);
* the metric list appends the metrics stored since (metrics are only ever appended), and is read again whole
  only after a trial was retried (the earlier attempt's metrics leave the list) or when too much changed.

The kept body is the one the response cache sends, not a copy of it: at 10,000 trials the lists cost no memory
beyond their bodies, and a list nobody asked for in :data:`FORGET_AFTER` seconds is let go (NNI's web UI asks
every 10 to 60 seconds, as its user chose). Builds are serialised, on a read-only connection of the lists' own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path

from trialfleet.server.cache import encoded_list
from trialfleet.server.context import encode_json
from trialfleet.server.reader import ExperimentReader
from trialfleet.storage import ExperimentStore
from trialfleet.storage.queries import Cursor, TrialQueries

#: more trials changed than this since the previous build: read them all again
MAX_CHANGED_TRIALS = 2000
#: a list not asked for in this many seconds is let go (:meth:`WholeLists.forget_unasked`)
FORGET_AFTER = 90.0


class SplicedList:
    """A JSON array kept as its encoded bytes, with where each element starts in them and its key and order.
    Replacing k of n elements copies the body once (the unchanged spans between them are copied as they are),
    and encodes nothing but the k elements."""

    def __init__(self) -> None:
        self.body = b"[]"
        self._place: dict[str, int] = {}  # key → index
        self._orders: list[int] = []  # each element's sort key (a trial's sequence id), ascending
        self._starts: list[int] = []  # each element's first byte in ``body``

    def __len__(self) -> int:
        return len(self._orders)

    def reset(self, items: Iterable[tuple[str, int, bytes]]) -> None:
        """The list becomes ``items`` (key, order, encoded element), laid out by order."""
        ordered = sorted(items, key=lambda item: item[1])
        self._place = {key: index for index, (key, _, _) in enumerate(ordered)}
        self._orders = [order for _, order, _ in ordered]
        self._starts = []
        position = 1
        for _, _, data in ordered:
            self._starts.append(position)
            position += len(data) + 1
        self.body = b"[" + b",".join(data for _, _, data in ordered) + b"]"

    def update(self, items: Iterable[tuple[str, int, bytes]]) -> None:
        """Each item replaces the element of its key, or is added in its order."""
        changed: dict[int, bytes] = {}
        added: dict[str, tuple[int, bytes]] = {}
        for key, order, data in items:
            index = self._place.get(key)
            if index is None:
                added[key] = (order, data)
            else:
                changed[index] = data
        new = sorted(((key, order, data) for key, (order, data) in added.items()), key=lambda item: item[1])
        if new and self._orders and new[0][1] < self._orders[-1]:  # one goes before a kept one: lay out again
            kept = [
                (key, self._orders[i], changed.get(i) or bytes(self._element(i)))
                for key, i in self._place.items()
            ]
            self.reset(kept + new)
            return
        if changed or new:
            self._splice(changed, new)

    def _end(self, index: int) -> int:
        return self._starts[index + 1] - 1 if index + 1 < len(self._starts) else len(self.body) - 1

    def _element(self, index: int) -> memoryview:
        return memoryview(self.body)[self._starts[index] : self._end(index)]

    def _splice(self, changed: dict[int, bytes], new: list[tuple[str, int, bytes]]) -> None:
        old = memoryview(self.body)
        starts = self._starts
        pieces: list[bytes | memoryview] = []
        copied = 0  # the old body is in ``pieces`` up to here
        shift = 0  # how much longer the new body is, up to the element being looked at
        unshifted = 0  # the first element whose start was not moved yet
        for index in sorted(changed):
            start, end, data = starts[index], self._end(index), changed[index]
            pieces += [old[copied:start], data]
            copied = end
            if shift:
                starts[unshifted : index + 1] = [s + shift for s in starts[unshifted : index + 1]]
            unshifted = index + 1
            shift += len(data) - (end - start)
        if shift:
            starts[unshifted:] = [s + shift for s in starts[unshifted:]]
        pieces.append(old[copied : len(old) - 1])  # the rest, without the closing bracket
        length = len(old) - 1 + shift
        for key, order, data in new:
            if self._orders:
                pieces.append(b",")
                length += 1
            self._place[key] = len(self._orders)
            self._orders.append(order)
            starts.append(length)
            pieces.append(data)
            length += len(data)
        pieces.append(b"]")
        self.body = b"".join(pieces)
        old.release()


class WholeLists:
    """The kept bodies of ``/trial-jobs`` and of ``/metric-data`` (one per metric type asked for)."""

    def __init__(self, database: Path, experiment_dir: Path) -> None:
        self._store = ExperimentStore(database, readonly=True)
        self._queries = TrialQueries(self._store)
        self._reader = ExperimentReader(self._store, experiment_dir)
        self._lock = threading.Lock()
        self._trials = SplicedList()
        self._trials_cursor: Cursor | None = None
        self._metrics: dict[str | None, tuple[Cursor, bytes]] = {}  # type → (read up to, body)
        self._asked = time.monotonic()

    def close(self) -> None:
        self._store.close()

    def forget_unasked(self, older_than: float = FORGET_AFTER) -> bool:
        """Let the kept lists go if none was asked for in ``older_than`` seconds (never waits for a build)."""
        if time.monotonic() - self._asked < older_than or not self._lock.acquire(blocking=False):
            return False
        try:
            self._trials, self._trials_cursor, self._metrics = SplicedList(), None, {}
            return True
        finally:
            self._lock.release()

    def trial_jobs(self) -> bytes:
        """Every trial's TrialJobInfo by sequence id, as a JSON array."""
        with self._lock:
            self._asked = time.monotonic()
            now = self._queries.cursor()  # first: what changes while this build reads is read again next time
            since = self._trials_cursor
            ids = self._queries.changed_trial_ids(since, MAX_CHANGED_TRIALS) if since is not None else None
            if ids is None:
                self._trials.reset(
                    _keyed(info for chunk in self._reader.trial_job_chunks() for info in chunk)
                )
            elif ids:
                self._trials.update(_keyed(self._reader.trial_jobs_with_ids(ids)))
            self._trials_cursor = now
            return self._trials.body

    def metric_data(self, type: str | None = None) -> bytes:
        """Every MetricDataRecord of the trials' current attempts (of ``type``), in the order stored."""
        with self._lock:
            self._asked = time.monotonic()
            now = self._queries.cursor()
            kept = self._metrics.get(type)
            if kept is None or self._queries.retried_since(kept[0], now):
                body = _joined(self._reader.metric_data_chunks(type, up_to=now.metric))
            else:
                since, body = kept
                more = _joined(self._reader.metric_data_chunks(type, after=since.metric, up_to=now.metric))
                if len(more) > 2:  # one copy of the kept body, not two
                    comma = b"," if len(body) > 2 else b""
                    body = b"".join((memoryview(body)[:-1], comma, memoryview(more)[1:]))
            self._metrics[type] = (now, body)
            return body


def _keyed(infos: Iterable[dict]) -> Iterable[tuple[str, int, bytes]]:
    return ((info["trialJobId"], info["sequenceId"], encode_json(info).encode()) for info in infos)


def _joined(chunks: Iterable[list[dict]]) -> bytes:
    return encoded_list(chunks).data
