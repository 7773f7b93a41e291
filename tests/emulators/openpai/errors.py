"""The rest server's errors: ``createError(status, code, message)`` answered as ``{"code", "message"}``.

Errors that are not ``createError`` ones (a YAML syntax error, a JavaScript TypeError, a body-parser failure)
reach express's error handler without a ``code``, so their body is ``{"message"}`` alone.
"""

from __future__ import annotations

from typing import Any

from .jscompat import UNDEFINED


class PaiError(Exception):
    """An error answered by the rest server; ``code`` None for errors that carry no code."""

    def __init__(self, status: int, code: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"code": self.code if self.code is not None else UNDEFINED, "message": self.message}


def bad_request(code: str, message: str) -> PaiError:
    return PaiError(400, code, message)


def unauthorized(message: str) -> PaiError:
    return PaiError(401, "UnauthorizedUserError", message)


def forbidden(message: str) -> PaiError:
    return PaiError(403, "ForbiddenUserError", message)


def not_found(code: str, message: str) -> PaiError:
    return PaiError(404, code, message)


def no_job(framework_name: str) -> PaiError:
    return not_found("NoJobError", f"Job {framework_name} is not found.")


def unknown(message: str, status: int = 500) -> PaiError:
    return PaiError(status, "UnknownError", message)


def uncaught(message: str, status: int = 500) -> PaiError:
    """A JavaScript exception that reached express's error handler: no code in the body."""
    return PaiError(status, None, message)


GUEST = "Guest is not allowed to do this operation."
INVALID_TOKEN = "Your token is invalid."
RATE_LIMIT_TEXT = "Too many requests, please try again later."

__all__ = [
    "GUEST",
    "INVALID_TOKEN",
    "RATE_LIMIT_TEXT",
    "PaiError",
    "bad_request",
    "forbidden",
    "no_job",
    "not_found",
    "unauthorized",
    "uncaught",
    "unknown",
]
