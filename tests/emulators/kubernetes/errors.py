"""The API server's errors as ``Status`` bodies, worded as kube-apiserver words them.

Every rejection the emulator makes is an :class:`ApiError`; the HTTP layer turns it into the JSON ``Status``
(``{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": ..., "code": ...}``) a client sees.
The messages follow ``k8s.io/apimachinery/pkg/api/errors`` so that a client's error handling can be tested
against the real text.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the API server refuses; ``status`` is the body it answers with."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    @property
    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def qualified(plural: str, group: str) -> str:
    """``tfjobs.kubeflow.org``, or just ``pods`` for the core group."""
    return f"{plural}.{group}" if group else plural


def _details(name: str, group: str, plural: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = plural  # the apiserver puts the resource here, not the kind
    return details


def not_found(plural: str, group: str, name: str) -> ApiError:
    message = f'{qualified(plural, group)} "{name}" not found'
    return ApiError(404, "NotFound", message, _details(name, group, plural))


def no_such_resource() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(plural: str, group: str, name: str) -> ApiError:
    message = f'{qualified(plural, group)} "{name}" already exists'
    return ApiError(409, "AlreadyExists", message, _details(name, group, plural))


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    message = f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}'
    return ApiError(409, "Conflict", message, _details(name, group, plural))


MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def stale(plural: str, group: str, name: str) -> ApiError:
    return conflict(plural, group, name, MODIFIED)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str, *, name: str = "", group: str = "", plural: str = "") -> ApiError:
    details = _details(name, group, plural) if plural else {}
    if not name:
        details.pop("name", None)
    return ApiError(403, "Forbidden", message, details)


def rbac_denied(user: str, verb: str, plural: str, group: str, namespace: str, name: str = "") -> ApiError:
    what = f'{qualified(plural, group)} "{name}"' if name else qualified(plural, group)
    scope = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    message = (
        f'{what} is forbidden: User "{user}" cannot {verb} resource "{plural}" in API group "{group}"{scope}'
    )
    return forbidden(message, name=name, group=group, plural=plural)


def webhook_denied(webhook: str, code: int, reason: str, message: str) -> ApiError:
    """How the API server wraps a validating webhook's refusal (``webhookerrors.ToStatusErr``)."""
    denied = f'admission webhook "{webhook}" denied the request'
    text = (
        f"{denied}: {message}"
        if message
        else f"{denied}: {reason}"
        if reason
        else f"{denied} without explanation"
    )
    return ApiError(max(code, 400), reason, text)


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {}
    )


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    message = f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}"
    return ApiError(415, "UnsupportedMediaType", message, {})


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def internal(message: str) -> ApiError:
    return ApiError(
        500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]}
    )


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
    )


def service_unavailable(message: str = "the server is currently unable to handle the request") -> ApiError:
    return ApiError(503, "ServiceUnavailable", message, {})


def success(name: str, group: str, plural: str, uid: str) -> dict[str, Any]:
    """What DELETE answers for resources that do not return the deleted object (custom resources)."""
    details = _details(name, group, plural)
    details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
