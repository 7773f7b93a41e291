"""Whole trial lists kept encoded between looks, brought up to date from the change feed.

The web UI's ``/trials/all`` and NNI's ``/trial-jobs`` are megabytes at 10,000 trials. Each is kept as its
encoded body (:class:`SplicedList`), and a look re-reads only the trials the change feed names since the
previous look — an event (a status, a waiting reason, a retry) or a final result: a few per second while trials
run (:class:`KeptTrials`). Too many changes, or the first look, read every trial.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from trialfleet.storage.queries import Cursor, TrialQueries
from trialfleet.storage.summary_json import summary_rows

#: (key, order, encoded element): a trial's id, its sequence id and its JSON
Element = tuple[str, int, bytes]


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

    def reset(self, items: Iterable[Element]) -> None:
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

    def update(self, items: Iterable[Element]) -> None:
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

    def _splice(self, changed: dict[int, bytes], new: list[Element]) -> None:
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


class KeptTrials:
    """A :class:`SplicedList` of trials kept current by the change feed. ``read(ids)`` gives the elements of
    those trials, or of every trial for ``None``. Not thread-safe: its owner serialises looks."""

    def __init__(
        self,
        queries: TrialQueries,
        read: Callable[[Sequence[str] | None], Iterable[Element]],
        max_changed: int,
    ) -> None:
        self._queries = queries
        self._read = read
        self._max_changed = max_changed
        self.list = SplicedList()
        self.cursor: Cursor | None = None

    def refresh(self) -> Cursor:
        """Bring the list up to date; the cursor it is current at."""
        now = self._queries.cursor()  # first: a change made during this look is read again next time
        since = self.cursor
        ids = self._queries.changed_trial_ids(since, self._max_changed) if since is not None else None
        if ids is None:  # the first look, or too much changed: read them all
            self.list.reset(self._read(None))
        elif ids:
            self.list.update(self._read(ids))
        self.cursor = now
        return now

    def forget(self) -> None:
        self.list, self.cursor = SplicedList(), None


class SummaryIndex:
    """Every trial's summary, encoded once and kept: each look re-reads only the trials the change feed names
    since the previous look (a few per second while trials run), so the whole list (``/trials/all``, several
    megabytes at 10,000 trials) is the kept bytes, spliced, instead of a query and an encoding of every trial.

    Looks are serialised; ``queries`` must be used by this index alone (its connection is not shared)."""

    def __init__(self, queries: TrialQueries, encode: Callable[[Any], str], max_changed: int = 2000) -> None:
        self._queries = queries
        self._encode = encode
        self._lock = threading.Lock()
        self._kept = KeptTrials(queries, self._read, max_changed)

    def look(self) -> tuple[Cursor, bytes]:
        """The cursor the list is current at, and the JSON array of every trial's summary by sequence id."""
        with self._lock:
            now = self._kept.refresh()
            return now, self._kept.list.body

    def _read(self, ids: Sequence[str] | None) -> list[Element]:
        """The summaries as SQLite encodes them (``summary_json``); those it cannot, the Python way."""
        elements: list[Element] = []
        others: list[str] = []
        for trial_id, sequence_id, encoded in summary_rows(self._queries.store.read_rows, ids):
            if encoded is None:
                others.append(trial_id)
            else:
                elements.append((trial_id, sequence_id, encoded.encode()))
        summaries = self._queries.trial_summaries(others) if others else []
        elements += [(s["id"], s["seq"], self._encode(s).encode()) for s in summaries]
        return elements


class KeptFinals:
    """The final results as columns (``TrialQueries.final_results``, encoded), kept until a trial's summary
    changes: an event (a status, a retry) or a final result, as the change feed names them. The response cache
    builds a body again at every commit, and while trials run the database commits an intermediate result every
    few milliseconds: at 100,000 trials each build of ``/finals`` (the Overview's first chart) took 0.4 s of CPU,
    now two indexed looks at the change feed unless a summary changed."""

    def __init__(self, queries: TrialQueries, encode: Callable[[Any], str]) -> None:
        self._queries = queries
        self._encode = encode
        self._lock = threading.Lock()
        self._kept: tuple[Cursor, bytes] | None = None
        self.builds = 0

    def close(self) -> None:
        self._queries.close()

    def look(self) -> bytes:
        """The JSON of the final results' columns, as current as the database."""
        with self._lock:
            now = self._queries.cursor()  # first: a change made during the build is seen next time
            kept = self._kept
            if kept is None or self._queries.changed_trial_ids(kept[0], 0) != []:
                self.builds += 1
                kept = (now, self._encode(self._queries.final_results()).encode())
            self._kept = (now, kept[1])
            return kept[1]
