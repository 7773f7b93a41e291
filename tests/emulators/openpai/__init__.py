"""A faithful emulator of OpenPAI's REST server v2 (``/rest-server/api/v2``), for testing an OpenPAI client.

It speaks the real wire protocol over real HTTP: job protocols checked by the rest server's own ajv schema and
rules (errors as ``{"code", "message"}``, ajv's error list included), bearer and application tokens, the
FrameworkController state machine per attempt seen through ``convertState`` (WAITING, RUNNING, STOPPING,
SUCCEEDED, STOPPED, FAILED), exit codes and exit specs, retries, completion policies, the log manager's logs,
virtual-cluster quota and the rate limits. Each task instance really runs its commands (with bash, as the PAI
runtime does) in a :class:`~tests.emulators.container.Container` with the ``PAI_*`` environment and the job's
storages mounted at their container paths.

Usage::

    with OpenPAIEmulator(storage_dir=tmp_path / "nfs") as pai:
        headers = pai.auth_headers("alice")
        httpx.post(pai.api + "/jobs", content=protocol_yaml, headers={**headers, "Content-Type": "text/yaml"})

See ``control.py`` for the ``/_emu`` API an out-of-process test uses, ``__main__.py`` for the command line.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from . import control, routes_cluster, routes_jobs
from .app import App, Context
from .auth import Tokens
from .capacity import Resources
from .clock import Clock, ManualClock, SystemClock
from .cluster import Cluster
from .config import DEFAULT_DELAYS, ClusterConfig, Limits, Storage, Timing, User, VirtualCluster
from .limits import Faults, Limiter
from .model import Framework
from .web import Router, Server

DEFAULT_STORAGE = "confignfs"


class OpenPAIEmulator:
    """An emulated OpenPAI cluster on ``127.0.0.1`` and a free port; ``start``/``stop`` or a ``with`` block."""

    def __init__(
        self,
        config: ClusterConfig | None = None,
        *,
        storage_dir: Path | None = None,
        clock: Clock | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        workdir: Path | None = None,
    ) -> None:
        self.config = config or ClusterConfig()
        if storage_dir is not None and self.config.storage(DEFAULT_STORAGE) is None:
            storage_dir.mkdir(parents=True, exist_ok=True)
            self.config.storages.append(Storage(DEFAULT_STORAGE, Path(storage_dir)))
        self.clock = clock or SystemClock()
        self._own_workdir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="openpai-emulator-")) if workdir is None else workdir
        self.cluster = Cluster(self.config, self.clock, self.workdir)
        self.tokens = Tokens(self.config, self.clock)
        self.faults = Faults()
        limits = self.config.limits
        self.ctx = Context(
            config=self.config,
            clock=self.clock,
            cluster=self.cluster,
            tokens=self.tokens,
            faults=self.faults,
            api_limiter=Limiter(self.clock, 60, limits.api_per_min),
            list_limiter=Limiter(self.clock, 60, limits.list_job_per_min),
            submit_limiter=Limiter(self.clock, 3600, limits.submit_job_per_hour),
        )
        api, pylon, control_routes = Router(), Router(), Router()
        routes_jobs.register(api, self.ctx)
        routes_cluster.register(api, pylon, self.ctx)
        control.register(control_routes, self.ctx)
        self._host = host
        self._server = Server((host, port), App(self.ctx, api, pylon, control_routes))
        self._thread: threading.Thread | None = None
        self._tokens: dict[str, str] = {}

    # lifecycle

    def start(self) -> OpenPAIEmulator:
        self.cluster.start()
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openpai-http",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.cluster.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> OpenPAIEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # where and who

    @property
    def url(self) -> str:
        """The cluster's address, what NNI's ``host`` holds."""
        return f"http://{self._host}:{self._server.server_port}"

    @property
    def api(self) -> str:
        return self.url + "/rest-server/api/v2"

    def token(self, user: str = "alice") -> str:
        """A bearer token of ``user`` (the same one each time, until it is expired)."""
        if user not in self._tokens:
            self._tokens[user] = self.tokens.issue(user)
        return self._tokens[user]

    def auth_headers(self, user: str = "alice") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(user)}"}

    def nni_config(self, user: str = "alice", storage: str = DEFAULT_STORAGE) -> dict[str, Any]:
        """The OpenPAI part of an NNI config pointing at this cluster."""
        found = self.config.storage(storage)
        return {
            "platform": "openpai",
            "host": self.url,
            "username": user,
            "token": self.token(user),
            "storageConfigName": storage,
            "containerStorageMountPoint": f"/mnt/{storage}",
            "localStorageMountPoint": str(found.path) if found else None,
        }

    # what happened

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far (method, path, query, headers, body, status), oldest first."""
        with self.ctx.requests_lock:
            return list(self.ctx.requests)

    def clear_requests(self) -> None:
        with self.ctx.requests_lock:
            self.ctx.requests.clear()

    def job(self, name: str) -> Framework:
        """A job's framework by ``user~job`` (the emulator's own state, for assertions)."""
        with self.cluster.lock:
            return self.cluster.find(name)

    # knobs

    def fail_next(
        self, count: int = 1, status: int = 503, method: str | None = None, path: str | None = None
    ) -> None:
        """Transient faults: the next ``count`` requests matching ``method``/``path`` (a regex) answer ``status``."""
        self.faults.fail_next(count, status, method, path)

    def hide_next_jobs(self, gets: int = 1, jobs: int = 1) -> None:
        """404 right after create: the next ``jobs`` jobs answer NoJobError to their first ``gets`` GETs."""
        self.faults.hide_next_jobs(gets, jobs)

    def expire_token(self, token: str | None = None, user: str | None = None) -> int:
        if user is not None:
            self._tokens.pop(user, None)
        return self.tokens.expire(token, user)

    def lose_job(self, name: str) -> None:
        self.cluster.lose(name)

    def set_delays(self, **delays: float) -> None:
        """How long FC states last at least, e.g. ``set_delays(AttemptRunning=1.0)`` (slow states)."""
        self.config.timing.delays.update(delays)

    def set_scheduling_latency(self, seconds: float) -> None:
        """The scheduling-latency knob: every job attempt waits ``seconds`` in ``AttemptCreationPending`` (PAI's
        ``WAITING``) before its pods are created (a busy cluster's queue; the reuse benchmark sets 10 s)."""
        self.config.timing.delays["AttemptCreationPending"] = seconds

    def kill_deleted_pods(self, enabled: bool = True) -> None:
        """A deleted pod's processes are SIGKILLed at once, none of them told first: the runtime that is the
        container's first process ends on the SIGTERM sent to it alone, and takes the others down with it."""
        self.cluster.kubelet.term_first = not enabled

    def hold_until_seen(self, enabled: bool = True) -> None:
        self.config.timing.hold_until_seen = enabled

    def set_limits(
        self,
        api_per_min: int | None = None,
        list_job_per_min: int | None = None,
        submit_job_per_hour: int | None = None,
    ) -> None:
        """Rate limits; 0 turns one off."""
        for value, limiter in (
            (api_per_min, self.ctx.api_limiter),
            (list_job_per_min, self.ctx.list_limiter),
            (submit_job_per_hour, self.ctx.submit_limiter),
        ):
            if value is not None:
                limiter.limit = value

    def set_capacity(self, vc: str, cpu: int, memory: int, gpu: int) -> None:
        self.cluster.quota.set_total(vc, Resources(cpu, memory, gpu))

    def advance(self, seconds: float) -> None:
        """Move a :class:`ManualClock` forward and let the controller see it."""
        if not isinstance(self.clock, ManualClock):
            raise TypeError("advance() needs an emulator built with a ManualClock")
        self.clock.advance(seconds)
        self.cluster.tick()


__all__ = [
    "DEFAULT_DELAYS",
    "DEFAULT_STORAGE",
    "ClusterConfig",
    "Limits",
    "ManualClock",
    "OpenPAIEmulator",
    "Storage",
    "SystemClock",
    "Timing",
    "User",
    "VirtualCluster",
]
