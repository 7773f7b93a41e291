"""Users and tokens (``middlewares/token.js``, ``models/token.js``).

User tokens are HS256 JWTs (``{username, application, jobSpecific, encodedFrameworkName, iat, exp}``) that are
valid while unexpired and still listed for their user, as the cluster keeps them; ``Authorization: Bearer`` sends
one. Application tokens have no expiry and go in ``Authorization: Basic base64(user:token)``. No header: 401
"Guest is not allowed to do this operation."; anything else wrong: 401 "Your token is invalid.". Tokens listed in
a user's configuration are accepted as they are, as bearer tokens that never expire.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
from dataclasses import dataclass

from .clock import Clock
from .config import ClusterConfig, User
from .errors import GUEST, INVALID_TOKEN, PaiError, bad_request, unauthorized


@dataclass
class TokenRecord:
    user: str
    application: bool
    expires: float | None
    revoked: bool = False


@dataclass(frozen=True)
class Principal:
    username: str
    admin: bool
    application: bool


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Tokens:
    def __init__(self, config: ClusterConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.secret = secrets.token_bytes(32)
        self.records: dict[str, TokenRecord] = {}
        self._lock = threading.Lock()
        for user in config.users:
            for token in user.tokens:
                self.records[token] = TokenRecord(user.name, application=False, expires=None)

    def issue(self, username: str, application: bool = False, lifetime: float | None = None) -> str:
        """A token as ``tokenModel.create`` signs it; user tokens live ``JWT_TOKEN_EXPIRE_TIME`` (7 days)."""
        now = self.clock.now()
        expires = (
            None if application else now + (self.config.token_lifetime if lifetime is None else lifetime)
        )
        payload = {
            "username": username,
            "application": application,
            "jobSpecific": False,
            "encodedFrameworkName": "",
        }
        payload["iat"] = int(now)
        if expires is not None:
            payload["exp"] = int(expires)
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        signature = _b64(hmac.new(self.secret, f"{header}.{body}".encode(), hashlib.sha256).digest())
        token = f"{header}.{body}.{signature}"
        with self._lock:
            self.records[token] = TokenRecord(username, application, expires)
        return token

    def expire(self, token: str | None = None, user: str | None = None) -> int:
        """Fault knob: the given token (or every token of ``user``) now answers 401."""
        with self._lock:
            hits = [r for t, r in self.records.items() if t == token or (user is not None and r.user == user)]
            for record in hits:
                record.revoked = True
        return len(hits)

    def _verify(self, token: str) -> TokenRecord:
        with self._lock:
            record = self.records.get(token)
        if record is None or record.revoked:
            raise ValueError("unknown token")
        if record.expires is not None and self.clock.now() >= record.expires:
            raise ValueError("expired")
        return record

    def check(self, header: str | None) -> Principal:
        if not header:
            raise unauthorized(GUEST)
        scheme, _, credentials = header.partition(" ")
        try:
            if scheme.lower() == "basic":
                username, _, password = base64.b64decode(credentials).decode().partition(":")
                record = self._verify(password)
                if record.user != username or not record.application:
                    raise ValueError("not an application token of this user")
            elif scheme.lower() == "bearer":
                record = self._verify(credentials)
            else:
                raise ValueError("unknown scheme")
            user = self.config.user(record.user)
            if user is None:
                raise ValueError("no such user")
        except (ValueError, binascii.Error, UnicodeDecodeError) as error:
            raise unauthorized(INVALID_TOKEN) from error
        return Principal(user.name, user.admin, record.application)

    def login(self, username: str, password: str) -> tuple[User, str]:
        """``POST /authn/basic/login``: the token ignores the requested expiration, as the rest server does."""
        user = self.config.user(username)
        if user is None:
            raise bad_request("NoUserError", f"User {username} is not found.")
        if password != user.password:
            raise bad_request("IncorrectPasswordError", "Password is incorrect.")
        return user, self.issue(username)

    def listed(self, username: str) -> list[str]:
        now = self.clock.now()
        with self._lock:
            return [
                t
                for t, r in self.records.items()
                if r.user == username and not r.revoked and (r.expires is None or r.expires > now)
            ]


__all__ = ["PaiError", "Principal", "TokenRecord", "Tokens"]
