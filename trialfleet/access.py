"""Who may talk to a manager: nobody needs a token on loopback; beyond it, the experiment's access token.

A manager listening on 127.0.0.1/::1 is reached only from this machine, as NNI's is, and asks for no token
(nnictl scripts keep working). It does check the ``Host`` header, so a web page whose domain is made to
resolve to 127.0.0.1 (DNS rebinding) cannot read it from the user's browser.

A manager listening on any other address needs the experiment's token — ``secrets.token_urlsafe(32)`` in
``<experiment dir>/access-token`` (mode 0600) — for every request, or for every request but reads with
``--public-read``. It is presented as ``Authorization: Bearer <token>``, as ``?token=`` (a browser's first
page load: the answer sets an HttpOnly cookie and redirects to the same address without the token), or as
that cookie. Comparisons are constant-time. See docs/security.md for what this protects and what not.

Stdlib only: the manager, the CLI and the Python API read the token file without loading the web framework;
the server applies the policy (:mod:`trialfleet.server.auth`).
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

TOKEN_FILE = "access-token"


@functools.lru_cache(maxsize=256)  # the server asks it of every request's Host header
def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` keeps the server on this machine (``localhost``, 127.0.0.0/8, ::1)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def token_path(experiment_dir: Path) -> Path:
    return experiment_dir / TOKEN_FILE


def read_token(experiment_dir: Path) -> str | None:
    """The experiment's token, or None when it has none (it never listened beyond loopback) or it is not ours
    to read."""
    try:
        return token_path(experiment_dir).read_text().strip() or None
    except OSError:
        return None


def ensure_token(experiment_dir: Path) -> tuple[str, bool]:
    """The experiment's token, created readable by its owner only if it has none; True when just created."""
    existing = read_token(experiment_dir)
    if existing:
        return existing, False
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(token_path(experiment_dir), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: theirs is the token
        return ensure_token(experiment_dir)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token, True


@dataclass(frozen=True)
class AccessPolicy:
    """What the server asks of a request. The default asks nothing (in-process use, tests)."""

    token: str | None = None
    public_read: bool = False
    loopback_only: bool = False  # refuse Host headers that do not name this machine
    cookie_name: str = "trialfleet_token"

    @classmethod
    def for_listening(
        cls, host: str, experiment_dir: Path, experiment_id: str, *, public_read: bool = False
    ) -> AccessPolicy:
        if is_loopback(host):
            return cls(loopback_only=True)
        token, _ = ensure_token(experiment_dir)
        # a cookie is per host, not per port: one name per experiment keeps two managers' cookies apart
        return cls(token=token, public_read=public_read, cookie_name=f"trialfleet_token_{experiment_id}")

    def accepts(self, presented: str | None) -> bool:
        if self.token is None:
            return True
        return presented is not None and hmac.compare_digest(presented.encode(), self.token.encode())
