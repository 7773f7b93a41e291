"""What the OpenPAI service checks and prepares before the first trial, and a job's own log.

At start: the job protocol every trial will use (the user's ``openpaiConfig`` read and merged, or NNI's), the
REST server v2 and its version (``/api/v2/info``), the token (its user, its expiry, that OpenPAI takes it), the
virtual cluster, the storage, and the storage's mount point on this machine, where the support bundle and the code
go. Each failure is one :class:`~trialfleet.errors.PlatformError` naming the host, the resource and OpenPAI's own
message. Whether the jobs see the same storage at ``containerStorageMountPoint`` shows with the first job: its task
checks that its trial directory is there and says so otherwise (``protocol.storage_check``), which costs no job of
its own (OpenPAI allows 60 submissions an hour) and no wait for a container before the experiment starts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from typing import Any

from trialfleet.errors import PlatformError, format_key_path
from trialfleet.training_services.mounted_storage import MountedStorage
from trialfleet.training_services.openpai.client import OpenpaiClient, PaiApiError, token_claims
from trialfleet.training_services.openpai.config import OpenpaiConfig
from trialfleet.training_services.openpai.template import JobTemplate, job_template

log = logging.getLogger(__name__)

TOKEN_WARNING = 24 * 3600.0  # a token expiring sooner than this is warned about at start


def load_template(config: OpenpaiConfig) -> JobTemplate:
    """The job protocol of every trial; PlatformError when the user's cannot be read or used."""
    try:
        protocol = config.user_protocol()
    except ValueError as exc:
        raise PlatformError(f"openpai: {exc}") from exc
    template, problems = job_template(config, protocol)
    if template is None:
        listed = "; ".join(f"{format_key_path(path)}: {message}" for path, message in problems)
        raise PlatformError(f"openpai: the job protocol cannot be used: {listed}")
    if template.overridden:
        log.warning(
            "openpai: the job protocol of openpaiConfig states its own %s; the trainingService values are not used",
            ", ".join(template.overridden),
        )
    if protocol is not None:
        log.info(
            "openpai: each task role of openpaiConfig runs its own commands (as NNI did), not trialCommand"
        )
    return template


async def check_cluster(client: OpenpaiClient, config: OpenpaiConfig, template: JobTemplate) -> None:
    """The REST server, the token, the virtual cluster and the storage, in that order."""
    host = config.host
    try:
        info = await client.info()
    except PaiApiError as exc:
        if exc.code == "NoApiError":
            raise PlatformError(
                f"openpai: {host} has no REST server v2 (OpenPAI v1.0 or newer): {exc}"
            ) from exc
        raise
    log.info(
        "openpai: %s is %s %s", host, info.get("name", "OpenPAI"), info.get("version", "(version unknown)")
    )
    _check_token(config)
    clusters = await _authorized(client.virtual_clusters(), config)
    vc = str((template.protocol.get("defaults") or {}).get("virtualCluster") or "default")
    if vc not in clusters:
        available = ", ".join(sorted(clusters)) or "none"
        raise PlatformError(f"openpai: {host} has no virtual cluster {vc!r}; it has: {available}")
    await _check_storage(client, config, template.storage)


def _check_token(config: OpenpaiConfig) -> None:
    claims = token_claims(config.token.get_secret_value())
    owner = claims.get("username")
    if owner is not None and owner != config.username:
        raise PlatformError(
            f"openpai: the token is {owner}'s, not {config.username}'s: jobs would be {owner}'s (set username: {owner})"
        )
    expires = claims.get("exp")
    if isinstance(expires, int | float):
        left = expires - time.time()
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(expires))
        if left <= 0:
            raise PlatformError(f"openpai: the token expired at {when}; get a new one from {config.host}")
        if left < TOKEN_WARNING:
            log.warning("openpai: the token expires at %s; trials cannot be submitted after that", when)


async def _authorized(request: Any, config: OpenpaiConfig) -> dict[str, Any]:
    try:
        return dict(await request)
    except PaiApiError as exc:
        if exc.status == 401:
            raise PlatformError(
                f"openpai: {config.host} refuses the token of {config.username}: {exc}"
            ) from exc
        raise


async def _check_storage(client: OpenpaiClient, config: OpenpaiConfig, name: str) -> None:
    try:
        await client.storage(name)
    except PaiApiError as exc:
        if exc.status == 404:
            names = ", ".join(sorted(str(s.get("name")) for s in await client.storages())) or "none"
            raise PlatformError(
                f"openpai: {config.host} has no storage {name!r} for {config.username} ({exc}); "
                f"storageConfigName can be one of: {names}"
            ) from exc
        if exc.status == 403:
            raise PlatformError(f"openpai: {config.username} may not use storage {name!r}: {exc}") from exc
        raise


async def prepare_storage(storage: MountedStorage) -> None:
    """The experiment's directory on the storage, writable here, with the support bundle installed."""
    await asyncio.to_thread(_check_writable, storage)
    await storage.prepare()


def _check_writable(storage: MountedStorage) -> None:
    probe = storage.local / f".write-check.{secrets.token_hex(4)}"
    try:
        storage.local.mkdir(parents=True, exist_ok=True)
        probe.write_text("trialfleet\n")
        os.unlink(probe)
    except OSError as exc:
        raise PlatformError(
            f"openpai: cannot write to the storage at localStorageMountPoint {storage.mount_local} "
            f"({exc.strerror}: {exc.filename}); is the storage mounted there, writable by this user?"
        ) from exc


async def job_log(client: OpenpaiClient, job: str, role: str) -> str:
    """The log (stdout and stderr) of the job's first task of ``role``, from OpenPAI's log manager."""
    detail = await client.job(job)
    statuses = ((detail.get("taskRoles") or {}).get(role) or {}).get("taskStatuses") or []
    if not statuses or not statuses[0].get("containerLog"):
        raise PaiApiError(f"openpai: {client.host}: job {job} has no log of a {role} task yet")
    return await client.log_text(statuses[0]["containerLog"])
