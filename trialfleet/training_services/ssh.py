"""SSH connections to worker hosts (remote machines, Slurm login nodes), built on asyncssh.

One :class:`SshHost` per machine: it connects with a host-key policy (known_hosts checked; a host seen for the
first time is trusted and recorded only with ``accept_new_host_keys``), keeps the link under a short keepalive
so a dead link is noticed within seconds, and bounds every operation with a timeout so a caller never hangs.
Failures are :class:`~trialfleet.errors.PlatformError`; a broken link is the subclass :class:`SshLinkError`,
which tells a caller to reconnect rather than to give up. Secrets never appear in messages or logs.

asyncssh is imported only when a connection is made, so ``platform: local`` does not need it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import posixpath
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trialfleet.errors import PlatformError, TrialFileRefusedError
from trialfleet.extras import install_hint

if TYPE_CHECKING:
    import asyncssh
    from pydantic import SecretStr

    from trialfleet.training_services.remote.config import RemoteMachineConfig

log = logging.getLogger(__name__)

T = TypeVar("T")

CONNECT_TIMEOUT = 15.0
COMMAND_TIMEOUT = 30.0
KEEPALIVE_INTERVAL = 1.5  # seconds; with KEEPALIVE_COUNT_MAX a dead link is seen within ~5 s
KEEPALIVE_COUNT_MAX = 3
DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
#: commands run at once on one connection: sshd refuses a session beyond its MaxSessions (10 unless the host
#: says otherwise), and the runner and the SFTP session are open as well
SESSIONS_AT_ONCE = 7
#: a session the host refused all the same (a lower MaxSessions, or sessions it has yet to free: OpenSSH says
#: "open failed") is asked for again after this long, doubling: nothing ran, and the link is fine. A host that
#: still refuses after SESSION_RETRY_FOR seconds is taken as broken, as before
SESSION_RETRY_DELAY = 0.02
SESSION_RETRY_MAX_DELAY = 0.5
SESSION_RETRY_FOR = 10.0
#: AES-GCM ahead of asyncssh's first choice, ChaCha20-Poly1305: asyncssh builds ChaCha20 from three cipher
#: contexts and a Poly1305 tag per packet, about 24 µs of the manager's CPU, where AES-GCM is one call on the
#: CPU's AES instructions, 4-5 µs. Every cipher asyncssh supports is still offered after them
PREFERRED_CIPHERS = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"
#: the SSH config asyncssh reads (OpenSSH's ~/.ssh/config); ``Ciphers`` there, or an ``Include`` that may hold
#: it, is the user's choice and stays in force
USER_SSH_CONFIG = Path("~/.ssh/config")


def cipher_options(user_config: Path = USER_SSH_CONFIG) -> dict[str, str]:
    """asyncssh's ``encryption_algs`` with :data:`PREFERRED_CIPHERS` first, unless the user's SSH config
    names the ciphers itself (or includes a file that might): then nothing, and asyncssh applies that config."""
    try:
        text = user_config.expanduser().read_text(errors="replace")
    except OSError:  # none (or unreadable, which asyncssh skips as well)
        text = ""
    for line in text.splitlines():
        keyword = line.strip().replace("=", " ").split(maxsplit=1)[:1]
        if keyword and keyword[0].lower() in ("ciphers", "include"):
            return {}
    return {"encryption_algs": PREFERRED_CIPHERS}


class SshLinkError(PlatformError):
    """The host could not be reached or the link broke; reconnecting may help."""


@dataclass(frozen=True)
class SshTarget:
    """Where and how to log in. ``name`` (``user@host:port``) is what messages show."""

    host: str
    port: int
    user: str
    password: SecretStr | None = field(default=None, repr=False)
    key_file: Path | None = None
    passphrase: SecretStr | None = field(default=None, repr=False)
    known_hosts: Path | None = None  # None: ~/.ssh/known_hosts
    accept_new_host_keys: bool = False

    @property
    def name(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @classmethod
    def from_machine(cls, machine: RemoteMachineConfig) -> SshTarget:
        key_file = machine.ssh_key_file
        if key_file is not None and "ssh_key_file" not in machine.model_fields_set and not key_file.exists():
            key_file = None  # NNI's default ~/.ssh/id_rsa is absent: let the agent and the usual keys try
        return cls(
            host=machine.host,
            port=machine.port,
            user=machine.user,
            password=machine.password,
            key_file=key_file,
            passphrase=machine.ssh_passphrase,
            known_hosts=machine.known_hosts,
            accept_new_host_keys=machine.accept_new_host_keys,
        )

    @property
    def known_hosts_path(self) -> Path:
        return (self.known_hosts or DEFAULT_KNOWN_HOSTS).expanduser()


@dataclass(frozen=True)
class CommandResult:
    exit_status: int  # 255 when the host told none: see ``signal`` and ``told``
    stdout: bytes
    stderr: bytes
    signal: str | None = None  # the command was killed by this signal
    told: bool = True  # False: the session closed with neither an exit status nor a signal; outcome unknown

    def explain(self) -> str:
        text = (self.stderr or self.stdout).decode("utf-8", "replace").strip()
        if not self.told:
            how = "the session ended without an exit status"
        else:
            how = f"killed by SIG{self.signal}" if self.signal else f"exit status {self.exit_status}"
        return how + (f": {text[-2000:]}" if text else "")


def _host_key_client(accept: bool) -> type[asyncssh.SSHClient]:
    """A client that trusts an unknown host key only when ``accept`` (no entry for the host exists)."""
    import asyncssh

    class HostKeyPolicy(asyncssh.SSHClient):
        def __init__(self) -> None:
            self.new_key: asyncssh.SSHKey | None = None

        def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
            if accept:
                self.new_key = key
            return accept

    return HostKeyPolicy


class SshHost:
    """A connection to one host that can be re-established; every call has a timeout."""

    def __init__(self, target: SshTarget, *, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.target = target
        self.connect_timeout = connect_timeout
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._sftp_lock = asyncio.Lock()
        self._sessions = asyncio.Semaphore(SESSIONS_AT_ONCE)

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    @property
    def cipher(self) -> str | None:
        """The cipher the connection negotiated (:func:`cipher_options`), None when not connected."""
        conn = self._conn
        return None if conn is None or conn.is_closed() else conn.get_extra_info("send_cipher")

    async def connect(self) -> None:
        """(Re)connect; raises SshLinkError when unreachable, PlatformError for auth or host-key problems."""
        await self.close()
        try:
            import asyncssh
        except ImportError as exc:
            raise PlatformError(
                f"{self.target.name}: asyncssh, the SSH client, is not installed ({exc}): "
                f"{install_hint('remote')}"
            ) from exc

        known_hosts, has_entry = self._known_hosts()
        client_class = _host_key_client(self.target.accept_new_host_keys and not has_entry)
        try:
            conn, client = await asyncio.wait_for(
                asyncssh.create_connection(client_class, **self._options(known_hosts)), self.connect_timeout
            )
        except (TimeoutError, OSError, asyncssh.ConnectionLost) as exc:
            raise SshLinkError(f"{self.target.name}: cannot connect: {_describe(exc)}") from exc
        except asyncssh.HostKeyNotVerifiable as exc:
            raise PlatformError(self._host_key_message(has_entry)) from exc
        except asyncssh.PermissionDenied as exc:
            raise PlatformError(
                f"{self.target.name}: authentication failed ({_auth_method(self.target)})"
            ) from exc
        except asyncssh.Error as exc:
            raise SshLinkError(f"{self.target.name}: SSH error: {exc.reason}") from exc
        self._conn = conn
        new_key = getattr(client, "new_key", None)
        if new_key is not None:
            self._record_host_key(new_key)

    def _options(self, known_hosts: Any) -> dict[str, Any]:
        target = self.target
        options: dict[str, Any] = {
            "host": target.host,
            "port": target.port,
            "username": target.user,
            "known_hosts": known_hosts,
            "keepalive_interval": KEEPALIVE_INTERVAL,
            "keepalive_count_max": KEEPALIVE_COUNT_MAX,
            "login_timeout": self.connect_timeout,
        }
        options.update(cipher_options())
        if target.password is not None:
            options.update(password=target.password.get_secret_value(), client_keys=None, agent_path=None)
        elif target.key_file is not None:
            key = target.key_file.expanduser()
            if not key.is_file():
                raise PlatformError(f"{target.name}: SSH key file {key} does not exist")
            options["client_keys"] = [str(key)]
            if target.passphrase is not None:
                options["passphrase"] = target.passphrase.get_secret_value()
        return options

    def _known_hosts(self) -> tuple[Any, bool]:
        """The known_hosts to check against, and whether it has any entry for this host."""
        import asyncssh

        path = self.target.known_hosts_path
        try:
            known = asyncssh.read_known_hosts(str(path)) if path.exists() else asyncssh.import_known_hosts("")
        except (OSError, ValueError) as exc:
            raise PlatformError(f"{self.target.name}: cannot read known_hosts file {path}: {exc}") from exc
        port = None if self.target.port == 22 else self.target.port
        keys = known.match(self.target.host, "", port)
        return known, any(keys)

    def _host_key_message(self, has_entry: bool) -> str:
        name, path = self.target.name, self.target.known_hosts_path
        if has_entry:
            return (
                f"{name}: host key does not match the one recorded in {path}; refusing to connect "
                "(the host was reinstalled, or someone is intercepting the connection)"
            )
        return (
            f"{name}: unknown host key (no entry in {path}); add it (ssh-keyscan -p {self.target.port} "
            f"{self.target.host} >> {path}) or set acceptNewHostKeys: true to trust it on first connection"
        )

    def _record_host_key(self, key: asyncssh.SSHKey) -> None:
        path = self.target.known_hosts_path
        host = self.target.host if self.target.port == 22 else f"[{self.target.host}]:{self.target.port}"
        line = f"{host} {key.export_public_key().decode().strip()}\n"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a") as f:
                f.write(line)
        except OSError as exc:
            log.warning("%s: could not record the new host key in %s: %s", self.target.name, path, exc)
            return
        log.info("%s: new host key trusted and recorded in %s", self.target.name, path)

    async def close(self) -> None:
        conn, self._conn, self._sftp = self._conn, None, None
        if conn is not None:
            conn.abort()

    def _require(self) -> asyncssh.SSHClientConnection:
        if not self.connected:
            raise SshLinkError(f"{self.target.name}: not connected")
        assert self._conn is not None
        return self._conn

    async def run(
        self, command: str, *, stdin: bytes | None = None, timeout: float = COMMAND_TIMEOUT
    ) -> CommandResult:
        """Run a shell command line; the exit status is data, a broken link or a timeout is SshLinkError."""
        import asyncssh

        async with self._sessions:  # waiting for a turn is not the link's silence: outside the timeout
            conn = self._require()
            try:
                done = await asyncio.wait_for(
                    self._when_accepted(lambda: conn.run(command, input=stdin, encoding=None, check=False)),
                    timeout,
                )
            except TimeoutError as exc:
                await self.close()  # a link that does not answer within the timeout is treated as broken
                raise SshLinkError(f"{self.target.name}: no answer within {timeout:g}s") from exc
            except (OSError, asyncssh.Error) as exc:
                await self.close()
                raise SshLinkError(f"{self.target.name}: connection lost: {_describe(exc)}") from exc
        status = done.exit_status if done.exit_status is not None else 255
        signal = done.exit_signal[0] if done.exit_signal else None
        told = done.exit_status is not None or signal is not None
        return CommandResult(status, _as_bytes(done.stdout), _as_bytes(done.stderr), signal, told)

    async def start_process(
        self, command: str, *, timeout: float = COMMAND_TIMEOUT
    ) -> asyncssh.SSHClientProcess[bytes]:
        """Start a long-lived command with its stdin and stdout as byte streams (a reuse-mode runner)."""
        import asyncssh

        conn = self._require()
        try:
            process: asyncssh.SSHClientProcess[bytes] = await asyncio.wait_for(
                self._when_accepted(lambda: conn.create_process(command, encoding=None)), timeout
            )
        except TimeoutError as exc:
            await self.close()
            raise SshLinkError(f"{self.target.name}: no answer within {timeout:g}s") from exc
        except (OSError, asyncssh.Error) as exc:
            await self.close()
            raise SshLinkError(f"{self.target.name}: connection lost: {_describe(exc)}") from exc
        return process

    async def _sftp_client(self) -> asyncssh.SFTPClient:
        async with self._sftp_lock:  # concurrent callers share one SFTP session
            if self._sftp is None:
                conn = self._require()
                self._sftp = await self._when_accepted(conn.start_sftp_client)
            return self._sftp

    async def _when_accepted(self, open_session: Callable[[], Awaitable[T]]) -> T:
        """``open_session()``, asked again while the host refuses the session for want of a free one."""
        import asyncssh

        refusals = (
            asyncssh.OPEN_CONNECT_FAILED,  # OpenSSH's, with "open failed"
            asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
            asyncssh.OPEN_RESOURCE_SHORTAGE,
        )
        delay, waited = SESSION_RETRY_DELAY, 0.0
        while True:
            try:
                return await open_session()
            except asyncssh.ChannelOpenError as exc:
                if exc.code not in refusals or waited >= SESSION_RETRY_FOR:
                    raise
                log.debug("%s refused a session (%s); asking again", self.target.name, exc.reason)
            await asyncio.sleep(delay)
            waited += delay
            delay = min(2 * delay, SESSION_RETRY_MAX_DELAY)

    async def put(self, local: Path, remote: str, *, timeout: float = 300.0) -> None:
        """Upload a file atomically (written beside, then renamed into place)."""
        tmp = f"{remote}.part"

        async def upload(sftp: asyncssh.SFTPClient) -> None:
            await sftp.put(str(local), tmp)
            await sftp.posix_rename(tmp, remote)

        await self._sftp_call(upload, f"upload {local} to {remote}", timeout)

    async def read(self, remote: str, *, timeout: float = 120.0) -> bytes:
        """Read a whole remote regular file; FileNotFoundError when it does not exist, TrialFileRefusedError for a
        FIFO (whose reader would wait for ever), a device or a directory."""

        async def read(sftp: asyncssh.SFTPClient) -> bytes:
            mode = (await sftp.stat(remote)).permissions or 0
            if not stat.S_ISREG(mode):
                raise TrialFileRefusedError(f"{remote} is not a regular file; only regular files are read")
            async with sftp.open(remote, "rb") as f:
                data: bytes = await f.read()
            return data

        result: bytes = await self._sftp_call(read, f"read {remote}", timeout)
        return result

    async def realpath(self, remote: str, *, timeout: float = COMMAND_TIMEOUT) -> str:
        async def resolve(sftp: asyncssh.SFTPClient) -> str:
            return str(await sftp.realpath(remote))

        result: str = await self._sftp_call(resolve, f"resolve {remote}", timeout)
        return result

    async def _sftp_call(self, call: Any, what: str, timeout: float) -> Any:
        import asyncssh

        async def call_with_client() -> Any:
            return await call(await self._sftp_client())

        try:
            return await asyncio.wait_for(call_with_client(), timeout)
        except asyncssh.SFTPNoSuchFile as exc:
            raise FileNotFoundError(f"{self.target.name}: {what}: no such file") from exc
        except asyncssh.SFTPError as exc:
            raise PlatformError(f"{self.target.name}: cannot {what}: {exc.reason}") from exc
        except TimeoutError as exc:
            await self.close()
            raise SshLinkError(f"{self.target.name}: cannot {what}: no answer within {timeout:g}s") from exc
        except (OSError, asyncssh.Error) as exc:
            await self.close()
            raise SshLinkError(f"{self.target.name}: cannot {what}: {_describe(exc)}") from exc


def remote_join(*parts: str) -> str:
    return posixpath.join(*parts)


def _as_bytes(data: Any) -> bytes:
    if data is None:
        return b""
    return data if isinstance(data, bytes) else str(data).encode()


def _describe(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    text = reason or str(exc) or type(exc).__name__
    return str(text)


def _auth_method(target: SshTarget) -> str:
    if target.password is not None:
        return "password rejected"
    if target.key_file is not None:
        return f"key {target.key_file} not accepted"
    return "no accepted key"
