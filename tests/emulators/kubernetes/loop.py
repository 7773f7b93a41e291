"""The reconcile loop every emulated controller (and the kubelet) runs on its own thread.

A loop wakes on any store change or every ``tick`` seconds of real time, and calls ``reconcile``. Pacing
belongs to the controllers: each keeps, per object, the clock time before which it will not write again
(:meth:`due` / :meth:`hold`), so every state it writes stays visible for at least ``delay`` seconds of the
(injectable) clock. A restart drops everything the controller kept in memory, as a restarted pod would.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Hashable

from .clock import Clock
from .store import Store

log = logging.getLogger(__name__)


class Loop:
    name = "loop"

    def __init__(self, store: Store, clock: Clock, *, delay: float, tick: float = 0.02) -> None:
        self.store = store
        self.clock = clock
        self.delay = delay
        self.tick = tick
        self.errors: list[str] = []
        self._not_before: dict[Hashable, float] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # ---- pacing --------------------------------------------------------------------------------------

    def due(self, key: Hashable) -> bool:
        return self.clock.now() >= self._not_before.get(key, 0.0)

    def hold(self, key: Hashable, seconds: float | None = None) -> None:
        self._not_before[key] = self.clock.now() + (self.delay if seconds is None else seconds)

    def forget(self, key: Hashable) -> None:
        self._not_before.pop(key, None)

    # ---- lifecycle -----------------------------------------------------------------------------------

    def reconcile(self) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        """Forget in-memory state (what a process restart loses)."""
        self._not_before.clear()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"emu-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.store.notify()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._thread = None

    def restart(self) -> None:
        self.stop()
        self.reset()
        self.start()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.reconcile()
            except Exception:  # a controller that crashes keeps looping; the test sees the error
                text = traceback.format_exc()
                log.error("%s: %s", self.name, text)
                self.errors.append(text)
            with self.store.lock:
                if self._stop.is_set():
                    break
                self.store.changed.wait(self.tick)
