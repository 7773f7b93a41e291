"""The local platform's keeper spawner: one process per experiment that starts each trial's keeper by forking
itself (``trial_keeper/spawner.py``), instead of a new interpreter per trial.

A keeper forked so is the same as one started with ``python3 -I -S keeper.py <trial dir>`` (a session of its
own, the cancel signals blocked from birth, nothing of its parent open) and needs nothing of the spawner once it
runs: the spawner exits when this manager's pipe closes (a stop, a crash), and the keepers run on. Should the
spawner fail, :meth:`KeeperSpawner.start` raises and the platform starts keepers itself from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path

from trialfleet.errors import PlatformError
from trialfleet.training_services.trial_dir import KEEPER_SCRIPT

SPAWNER_SCRIPT = KEEPER_SCRIPT.with_name("spawner.py")
ANSWER_TIMEOUT = 30.0


class SpawnerError(Exception):
    """The spawner is gone or does not answer (a keeper it could not start is a PlatformError)."""


class KeeperSpawner:
    def __init__(self, trials_dir: Path, log_path: Path) -> None:
        # on its command line, which the keepers it forks keep: ps shows whose they are
        self.trials_dir = trials_dir
        self.log_path = log_path
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        with open(self.log_path, "ab") as stderr:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                str(SPAWNER_SCRIPT),
                str(self.trials_dir),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,  # a terminal's Ctrl-C to the manager's group is not for it
            )

    async def start(self, trial_dir: Path) -> int:
        """The pid of the keeper started for ``trial_dir``. PlatformError when the spawner could not start this
        one (its directory cannot be written, as a spawned keeper could not start either); SpawnerError when
        the spawner itself is gone or silent."""
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            raise SpawnerError("the keeper spawner is not running")
        async with self._lock:  # one request, one answer, in order
            try:
                process.stdin.write(f"{trial_dir}\n".encode())
                await process.stdin.drain()
                line = await asyncio.wait_for(process.stdout.readline(), ANSWER_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                raise SpawnerError(f"the keeper spawner did not answer: {exc!r}") from exc
        text = line.decode(errors="replace").strip()
        if not text:
            raise SpawnerError(
                f"the keeper spawner ended (exit status {process.returncode}); see {self.log_path}"
            )
        if not text.isdigit():
            why = text.removeprefix("error: ")
            raise PlatformError(f"local: cannot start the trial keeper in {trial_dir}: {why}")
        return int(text)

    async def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
