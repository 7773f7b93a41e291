#!/usr/bin/env python3
"""trialfleet worker: the long-lived process of a reuse-mode job (NNI's "environment"), running trial after trial.

Usage: ``python3 -I -S worker.py <worker_dir> <trials_dir> <idle_timeout>``. Standalone and stdlib-only, like
``keeper.py`` beside it: it runs in a cluster job where nothing of trialfleet is installed, and it talks to the
manager only through files of a directory both see (a Slurm shared directory, a Kubernetes volume, a platform's
storage). The protocol, below ``<worker_dir>`` (the manager writes, the worker moves and deletes):

* ``worker.json``: written once the worker runs (pid, host, boot id, start time).
* ``inbox/<attempt>``: a trial to run, written by the manager once ``<trials_dir>/<attempt>/`` is complete. The
  worker takes it by renaming it to ``claimed/<attempt>`` (so an attempt runs once, even when the manager writes
  its entry again after a restart) and forks the stdlib keeper for it (``keeper.fork_keeper``): the trial keeps
  every guarantee of the keeper (its process tree, its files and metric channel, ``result.json``).
* ``cancel/<attempt>``: end that trial: its keeper gets SIGTERM (it ends the trial's tree and records the cancel);
  a trial not taken yet is recorded cancelled without running.
* ``stop/now``: take no more trials; exit once the running ones ended (the manager releases the worker).
* ``ended.json``: written when the worker exits, with why.

A keeper that dies without ``result.json`` gets one written for it (an infrastructure failure, after its trial's
processes were ended), and so does each trial taken by an earlier run of the worker (a job requeued after a
preemption runs it again). Nothing running and nothing in the inbox for ``idle_timeout`` seconds ends the worker (the
manager normally releases it first). SIGTERM, SIGINT or SIGHUP (the job cancelled or preempted) are passed on to
every keeper; the worker exits once they ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's directory out

import keeper

TICK = 0.1  # seconds between two looks at the requests: the most a trial waits for a free worker to take it
#: looks at the inbox this often (s) for a while after a trial ended: the manager gives the next trial as soon as
#: it has seen that end, so this is when one is due (a look is three directory listings)
EAGER_TICK = 0.02
EAGER_FOR = 2.0
KILL_GRACE = 5.0


class Worker:
    def __init__(self, worker_dir: str, trials_dir: str, idle_timeout: float) -> None:
        self.worker_dir = worker_dir
        self.trials_dir = trials_dir
        self.idle_timeout = idle_timeout
        self.running: dict = {}  # keeper pid -> attempt name
        self.signalled = False
        self.idle_since = time.monotonic()
        self.ended_at = float("-inf")  # when a trial of this worker last ended
        for sub in ("inbox", "claimed", "cancel", "stop"):
            os.makedirs(self.path(sub), exist_ok=True)

    def path(self, *parts: str) -> str:
        return os.path.join(self.worker_dir, *parts)

    def entries(self, sub: str) -> list:
        try:
            return sorted(name for name in os.listdir(self.path(sub)) if not name.startswith("."))
        except OSError:
            return []

    def claim(self, name: str) -> bool:
        """Move ``inbox/<name>`` to ``claimed/``: True if this call took it (never twice the same attempt)."""
        if os.path.exists(self.path("claimed", name)):
            _remove(self.path("inbox", name))  # written again by a manager that restarted: already taken
            return False
        try:
            os.rename(self.path("inbox", name), self.path("claimed", name))
        except OSError:
            return False
        return True

    def take(self, name: str) -> None:
        if not self.claim(name):
            return
        trial_dir = os.path.join(self.trials_dir, name)
        try:
            pid = keeper.fork_keeper(trial_dir)
        except OSError as exc:
            record_lost(trial_dir, f"the worker could not start the trial keeper: {exc}")
            return
        self.running[pid] = name

    def cancel(self) -> None:
        for name in self.entries("cancel"):
            pids = [pid for pid, running in self.running.items() if running == name]
            for pid in pids:
                _kill(pid, signal.SIGTERM)
            if not pids and self.claim(name):  # not taken yet: recorded cancelled, never run
                keeper.end_without_keeper(os.path.join(self.trials_dir, name), True, KILL_GRACE)
            if pids or not os.path.exists(self.path("inbox", name)):
                _remove(self.path("cancel", name))

    def reap(self) -> None:
        for pid in keeper.reap_exited_children():
            name = self.running.pop(pid, None)
            if name is not None:
                self.ended_at = time.monotonic()
                self.ended(os.path.join(self.trials_dir, name))

    def ended(self, trial_dir: str) -> None:
        if keeper.read_record(os.path.join(trial_dir, "result.json")) is None:
            keeper.end_without_keeper(trial_dir, False, KILL_GRACE)
            record_lost(trial_dir, "lost: the trial keeper died without a final record")

    def turn(self) -> str | None:
        """One look at the requests; why the worker ends now, or None."""
        self.reap()
        self.cancel()
        stopping = self.signalled or bool(self.entries("stop"))
        if not stopping:
            for name in self.entries("inbox"):
                self.take(name)
        if self.running:
            self.idle_since = time.monotonic()
            return None
        if stopping:
            return "signalled" if self.signalled else "released by the manager"
        if time.monotonic() - self.idle_since >= self.idle_timeout:
            return f"idle for {self.idle_timeout:g} s"
        return None

    def on_signal(self, number: int, frame: object) -> None:
        self.signalled = True
        for pid in list(self.running):
            _kill(pid, signal.SIGTERM)

    def started_again(self) -> None:
        """A job started again (requeued after a preemption) runs this worker anew: the trials it had taken
        were ended with its last run; they are recorded lost, never run again."""
        for name in self.entries("claimed"):
            trial_dir = os.path.join(self.trials_dir, name)
            if keeper.read_record(os.path.join(trial_dir, "result.json")) is None:
                keeper.end_without_keeper(trial_dir, False, KILL_GRACE)
                record_lost(trial_dir, "lost: its worker job was stopped and started again")

    def run(self) -> str:
        record = {
            "pid": os.getpid(),
            "start_ticks": keeper.start_ticks(os.getpid()),
            "boot_id": keeper.boot_id(),
        }
        record.update(hostname=os.uname().nodename, start_time=time.time())
        keeper.write_json_atomically(self.path("worker.json"), record)
        self.started_again()
        while True:
            why = self.turn()
            if why is not None:
                return why
            time.sleep(self.tick())

    def tick(self) -> float:
        """Until the next look: short while the next trial is due (shortly after one ended)."""
        return EAGER_TICK if time.monotonic() - self.ended_at < EAGER_FOR else TICK


def record_lost(trial_dir: str, reason: str) -> None:
    path = os.path.join(trial_dir, "result.json")
    if keeper.read_record(path) is None:
        keeper.write_json_atomically(path, keeper.result_record(reason, lost=True))


def _kill(pid: int, number: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, number)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def main(argv: list) -> int:
    if len(argv) != 4:
        sys.stderr.write("usage: worker.py <worker_dir> <trials_dir> <idle_timeout>\n")
        return 2
    worker = Worker(argv[1], os.path.normpath(argv[2]), float(argv[3]))
    for number in keeper.CANCEL_SIGNALS:
        signal.signal(number, worker.on_signal)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    why = worker.run()
    keeper.write_json_atomically(worker.path("ended.json"), {"reason": why, "end_time": time.time()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
