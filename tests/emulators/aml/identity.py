"""Microsoft Entra ID (AAD) as far as a service principal needs it: OIDC discovery, the client-credentials token
endpoint, and the bearer-token check every ARM, run-history and MLflow route applies.

Tokens are JWTs, as AAD's are: azure-ai-ml decodes them without verifying the signature (it reads ``tid`` for the
studio URL and ``aud`` in some paths). The emulator signs them with HS256 and its own secret and verifies signature,
expiry (on the emulator's clock) and revocation. The 401 bodies and ``WWW-Authenticate`` headers are ARM's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from .clock import Clock
from .wire import HttpError, Request, Response, Router, arm_error


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class ServicePrincipal:
    tenant_id: str
    client_id: str
    client_secret: str


def _utc(seconds: float) -> str:
    return time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime(seconds))


class TokenIssuer:
    """Issues and checks the emulator's access tokens."""

    def __init__(self, clock: Clock, principal: ServicePrincipal, lifetime: float = 3600.0) -> None:
        self.clock = clock
        self.principal = principal
        self.lifetime = lifetime
        self._key = secrets.token_bytes(32)
        self._revoked_before = 0.0  # tokens issued before this instant are refused
        self._lock = threading.Lock()

    def issue(self, audience: str, *, lifetime: float | None = None) -> tuple[str, int]:
        """A signed token for ``audience`` and its lifetime in whole seconds."""
        now = self.clock.now()
        seconds = int(self.lifetime if lifetime is None else lifetime)
        claims = {
            "aud": audience,
            "iss": f"https://sts.windows.net/{self.principal.tenant_id}/",
            "tid": self.principal.tenant_id,
            "oid": str(uuid.uuid5(uuid.NAMESPACE_URL, self.principal.client_id)),
            "appid": self.principal.client_id,
            "iat": now,
            "nbf": int(now) - 1,
            "exp": now + seconds,
            "jti": secrets.token_hex(8),
        }
        head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        body = _b64(json.dumps(claims).encode())
        signature = hmac.new(self._key, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(signature)}", seconds

    def revoke_all(self) -> None:
        """Every token issued so far stops working (as after a password reset); new ones work."""
        with self._lock:
            self._revoked_before = self.clock.now()

    def claims(self, token: str) -> dict[str, Any] | None:
        """The token's claims when its signature is the emulator's, else None."""
        try:
            head, body, signature = token.split(".")
            expected = hmac.new(self._key, f"{head}.{body}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64(signature)):
                return None
            return dict(json.loads(_unb64(body)))
        except (ValueError, TypeError):
            return None

    def authenticate(self, request: Request) -> dict[str, Any]:
        """The caller's claims, or an HttpError carrying ARM's 401."""
        header = request.header("Authorization")
        if not header:
            raise HttpError(
                _unauthorized(
                    "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing."
                )
            )
        scheme, _, token = header.partition(" ")
        claims = self.claims(token.strip()) if scheme.lower() == "bearer" else None
        if claims is None:
            raise HttpError(_unauthorized("InvalidAuthenticationToken", "The access token is invalid."))
        now = self.clock.now()
        with self._lock:
            revoked = claims["iat"] < self._revoked_before
        if revoked or claims["exp"] <= now:
            message = f"The access token expiry UTC time '{_utc(claims['exp'])}' is earlier than current UTC time '{_utc(now)}'."
            raise HttpError(_unauthorized("ExpiredAuthenticationToken", message, expired=True))
        return claims


def _unauthorized(code: str, message: str, *, expired: bool = False) -> Response:
    description = "The access token has expired." if expired else "The access token is invalid."
    challenge = f'Bearer authorization_uri="https://login.windows.net/", error="invalid_token", error_description="{description}"'
    return arm_error(401, code, message, headers={"WWW-Authenticate": challenge})


class EntraRoutes:
    """``/{tenant}/v2.0/.well-known/openid-configuration`` and ``/{tenant}/oauth2/v2.0/token``, as MSAL calls them."""

    def __init__(self, issuer: TokenIssuer, base_url: str) -> None:
        self.issuer = issuer
        self.base_url = base_url.rstrip("/")

    def register(self, router: Router) -> None:
        router.add(
            "GET", r"/(?P<tenant>[^/]+)/v2\.0/\.well-known/openid-configuration", self.openid_configuration
        )
        router.add("POST", r"/(?P<tenant>[^/]+)/oauth2/v2\.0/token", self.token)

    def _check_tenant(self, tenant: str) -> None:
        if tenant.lower() not in (self.issuer.principal.tenant_id, "organizations"):
            raise HttpError(_aad_error(400, "invalid_tenant", f"AADSTS90002: Tenant '{tenant}' not found."))

    def openid_configuration(self, request: Request, match: Any) -> Response:
        tenant = match["tenant"]
        self._check_tenant(tenant)
        root = f"{self.base_url}/{tenant}"
        return Response.json(
            200,
            {
                "token_endpoint": f"{root}/oauth2/v2.0/token",
                "authorization_endpoint": f"{root}/oauth2/v2.0/authorize",
                "device_authorization_endpoint": f"{root}/oauth2/v2.0/devicecode",
                "issuer": f"{self.base_url}/{self.issuer.principal.tenant_id}/v2.0",
                "token_endpoint_auth_methods_supported": [
                    "client_secret_post",
                    "private_key_jwt",
                    "client_secret_basic",
                ],
                "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
                "tenant_region_scope": "EU",
            },
        )

    def token(self, request: Request, match: Any) -> Response:
        self._check_tenant(match["tenant"])
        form = dict(parse_qsl(request.body.decode("utf-8", "replace")))
        principal = self.issuer.principal
        if form.get("grant_type") != "client_credentials":
            return _aad_error(
                400, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type."
            )
        if form.get("client_id") != principal.client_id:
            return _aad_error(
                400,
                "unauthorized_client",
                f"AADSTS700016: Application with identifier '{form.get('client_id')}' was not found in the directory.",
            )
        if not hmac.compare_digest(form.get("client_secret", ""), principal.client_secret):
            return _aad_error(401, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
        scope = form.get("scope", "").split()
        resources = [s.removesuffix(".default").rstrip("/") for s in scope if s.endswith("/.default")]
        if len(resources) != 1:
            return _aad_error(
                400, "invalid_scope", "AADSTS1002012: The provided value for scope is not valid."
            )
        token, seconds = self.issuer.issue(resources[0])
        return Response.json(
            200,
            {"token_type": "Bearer", "expires_in": seconds, "ext_expires_in": seconds, "access_token": token},
        )


def _aad_error(status: int, error: str, description: str) -> Response:
    return Response.json(
        status,
        {
            "error": error,
            "error_description": description,
            "error_codes": [int(description[5:].split(":")[0])] if description.startswith("AADSTS") else [],
            "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()),
            "trace_id": str(uuid.uuid4()),
            "correlation_id": str(uuid.uuid4()),
        },
    )
