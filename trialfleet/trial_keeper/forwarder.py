"""trialfleet keeper's forwarder: sends a trial directory's files to the manager's relay.

For trials whose storage the manager does not read (``command.json`` has ``"relay": {"url", "secret", "attempt",
"patience"}``), the keeper starts this next to the trial. It sends the append-only files (the metric stream,
stdout, stderr) from the offsets the relay says it has, a chunk at a time, and the records (``keeper.json``, then
``result.json`` once every stream byte is across) whole; the protocol is described in
``trialfleet/training_services/relay.py``. A failed request is retried; an answer always says how far the relay
has got, so a retry never sends a byte twice into the mirror and never leaves a gap. Once the trial ended the
keeper waits up to ``patience`` seconds for the relay to take the rest.

Standalone like ``keeper.py`` (stdlib only, Python >= 3.8). It never writes to stdio.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

STREAMS = (os.path.join(".nni", "metrics"), "trial.stdout", "trial.stderr")
CHUNK = 4 * 1024 * 1024
INTERVAL = 0.2  # seconds between looks at the files while the trial runs
TIMEOUT = 30.0


class RelayError(Exception):
    pass


class Forwarder:
    def __init__(self, trial_dir: str, relay: dict) -> None:
        self.trial_dir = trial_dir
        self.base = relay["url"].rstrip("/") + "/" + urllib.parse.quote(relay["attempt"], safe="")
        self.secret = relay["secret"]
        self.patience = float(relay.get("patience", 3600))
        self.sent = {name: 0 for name in STREAMS}  # how far the relay has each stream, as it last said
        private = os.stat(os.path.join(trial_dir, "command.json"))
        self.private = (private.st_dev, private.st_ino)  # never sent, also as a stream hard-linked to it
        self.records: list = []  # record files still to send
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="forwarder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def send_record(self, name: str) -> None:
        """Queue a record (keeper.json) to be sent with the next round."""
        self.records.append(name)

    def finish(self, result_name: str = "result.json") -> bool:
        """After the trial ended: every stream byte, then the records, then ``result_name``; True when done."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.records.append(result_name)
        deadline = time.monotonic() + self.patience
        delay = 0.2
        while True:
            try:
                if self._round(final=True):
                    return True
                delay = 0.2
            except (OSError, RelayError, ValueError):
                if time.monotonic() + delay > deadline:
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL):
            with contextlib.suppress(OSError, RelayError, ValueError):  # the next round asks again
                self._round(final=False)

    def _round(self, final: bool) -> bool:
        """Send what is new; True once everything is across (and, when ``final``, the records too)."""
        caught_up = all(self._send_stream(name) for name in STREAMS)
        if not caught_up:
            return False
        while self.records and (final or self.records[0] != "result.json"):
            name = self.records[0]
            with open(os.path.join(self.trial_dir, name), "rb") as f:
                self._put(name, f.read(), record=True)
            self.records.pop(0)
        return not self.records

    def _send_stream(self, name: str) -> bool:
        """One chunk of ``name`` from where the relay is; True when the relay has the whole file."""
        offset = self.sent[name]
        try:  # never through a link the trial put in the stream's place (to command.json: the relay's secret)
            fd = os.open(os.path.join(self.trial_dir, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:  # missing, or a symbolic link (ELOOP)
            return True
        with os.fdopen(fd, "rb") as f:
            opened = os.fstat(f.fileno())
            if (opened.st_dev, opened.st_ino) == self.private:
                return True
            f.seek(offset)
            data = f.read(CHUNK)
        if not data:
            return True
        self.sent[name] = self._put(name, data, offset=offset)
        return False

    def _put(self, name: str, data: bytes, offset: int = 0, record: bool = False) -> int:
        query = "record=1" if record else f"offset={offset}"
        url = f"{self.base}/{urllib.parse.quote(name)}?{query}"
        headers = {"Authorization": "Bearer " + self.secret, "Content-Type": "application/octet-stream"}
        request = urllib.request.Request(url, data=data, method="PUT", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                return int(json.load(response)["size"])
        except urllib.error.HTTPError as exc:
            if exc.code == 409:  # the relay is behind this offset (it lost a tail): resend from its end
                return int(json.load(exc)["size"])
            raise RelayError(f"relay answered {exc.code} for {name}") from exc
