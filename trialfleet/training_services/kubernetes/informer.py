"""One kind of object, selected by label, kept up to date in memory: a list, then a watch from its resourceVersion.

The watch resumes from the last resourceVersion it saw (events and bookmarks) when its connection ends; a 410
``Expired`` (the server no longer has that version) means the cache may have missed deletions, so it is built
again from a fresh list. When watching fails otherwise (a proxy that cuts streams, RBAC without ``watch``) the
informer falls back to lists, one per back-off interval, and tries to watch again after each.

It runs in a thread of its own, since the official client blocks; the service reads :meth:`snapshot` and is
told of every change through ``on_change`` (which must be thread-safe).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.training_services.kubernetes.client import KubeApiError, KubeClient

log = logging.getLogger(__name__)

WATCH_SECONDS = 240  # the server ends each watch after this long (with a little jitter of its own)
MIN_BACKOFF, MAX_BACKOFF = 0.5, 5.0  # seconds between lists while watches fail
TOMBSTONES = 1000  # deleted objects remembered (their last state)

ListFunction = Callable[..., Any]


class Informer:
    """Objects of one list call (``list_namespaced_custom_object`` with its kind, ``list_namespaced_pod`` …)."""

    def __init__(
        self,
        client: KubeClient,
        what: str,
        list_function: ListFunction,
        label_selector: str,
        on_change: Callable[[], None],
    ) -> None:
        self.client = client
        self.what = what  # "tfjobs.kubeflow.org in namespace default", for messages
        self.list_function = list_function
        self.label_selector = label_selector
        self.on_change = on_change
        self.synced = threading.Event()  # a first list succeeded
        self.problem: str | None = None  # why the last attempt to list or watch failed
        self._objects: dict[str, dict[str, Any]] = {}
        self._deleted: dict[str, dict[str, Any]] = {}  # name → last state, oldest first
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"informer {what}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            shutdown = getattr(response, "shutdown", None)  # urllib3 >= 2.3: wakes a blocked read
            # the watch may have ended meanwhile, its socket closed or its connection back in the pool: there is
            # no read left to wake then
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                (shutdown or response.close)()
        self._thread.join(timeout=5)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """The objects by name, as last seen (the dicts are never changed in place: replace, not update)."""
        with self._lock:
            return dict(self._objects)

    def deleted(self) -> dict[str, dict[str, Any]]:
        """The last state of objects whose deletion a watch reported (a pod the platform failed and then removed
        still tells why), the most recent ones."""
        with self._lock:
            return dict(self._deleted)

    # ---- the thread ----------------------------------------------------------------------------------

    def _run(self) -> None:
        version: str | None = None
        backoff = MIN_BACKOFF
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
                backoff = MIN_BACKOFF
            except KubeApiError as exc:
                if exc.status == 410:
                    version = None  # too old: list again, then watch from there
                    continue
                version = self._failed(exc)
            except (PlatformError, OSError, ValueError) as exc:
                version = self._failed(exc)
            if version is None and not self._stop.is_set():
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)

    def _failed(self, exc: Exception) -> str | None:
        """Log once per problem; the next round lists again (the fallback when watches do not work)."""
        if str(exc) != self.problem and not self._stop.is_set():
            log.warning("cannot follow %s (retried): %s", self.what, exc)
        self.problem = str(exc)
        return None

    def _list(self) -> str:
        response = self.client.run(
            f"list {self.what}",
            self.list_function,
            label_selector=self.label_selector,
            _preload_content=False,
            _request_timeout=60,
        )
        body = json.loads(response.data)
        objects = {item["metadata"]["name"]: item for item in body.get("items") or []}
        with self._lock:
            changed = objects != self._objects
            self._objects = objects
        if self.problem is not None:
            log.info("following %s again", self.what)
            self.problem = None
        self.synced.set()
        if changed:
            self.on_change()
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str | None:
        """Follow events from ``version``; the version to resume from when the stream ends (None: list again)."""
        from kubernetes.watch.watch import iter_resp_lines

        response = self.client.run(
            f"watch {self.what}",
            self.list_function,
            label_selector=self.label_selector,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=(10, WATCH_SECONDS + 30),
        )
        self._response = response
        try:
            for line in iter_resp_lines(response):
                if self._stop.is_set():
                    return version
                if line.strip():
                    version = self._event(json.loads(line), version)
        except Exception as exc:  # the stream broke: resume from the last version seen
            if self._stop.is_set():
                return version
            from urllib3.exceptions import HTTPError

            if not isinstance(exc, (HTTPError, OSError)):
                raise
            log.debug("watch of %s ended: %s", self.what, exc)
        finally:
            self._response = None
            response.release_conn()
        return version

    def _event(self, event: dict[str, Any], version: str) -> str:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 500)
            message = f"{code} {obj.get('reason')}: {obj.get('message')}"
            raise KubeApiError(f"watch of {self.what} ended: {message}", code, str(obj.get("reason")))
        version = str(obj.get("metadata", {}).get("resourceVersion") or version)
        if kind == "BOOKMARK":
            return version
        name = obj["metadata"]["name"]
        with self._lock:
            if kind == "DELETED":
                self._objects.pop(name, None)
                self._deleted.pop(name, None)
                self._deleted[name] = obj
                if len(self._deleted) > TOMBSTONES:
                    del self._deleted[next(iter(self._deleted))]
            else:
                self._objects[name] = obj
        self.on_change()
        return version
