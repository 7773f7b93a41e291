"""One request's way through the emulator: control API, injected faults, the storage account, then the routed
services, with authentication where Azure requires it; every request lands in the log with its answer's status."""

from __future__ import annotations

import logging
import time
import traceback

from .blob import storage_error
from .control import ControlRoutes
from .faults import Fault, FaultPlan, fault_codes
from .identity import TokenIssuer
from .mlflow_api import mlflow_error
from .storage import StorageService
from .wire import HttpError, Request, RequestLog, Response, Router, arm_error

logger = logging.getLogger(__name__)

AUTHENTICATED = ("/subscriptions/", "/history/", "/mlflow/")


class RequestPipeline:
    def __init__(
        self,
        router: Router,
        storage: StorageService,
        issuer: TokenIssuer,
        faults: FaultPlan,
        log: RequestLog,
        control: ControlRoutes,
        workspace_arm_id: str,
    ) -> None:
        self.router = router
        self.storage = storage
        self.issuer = issuer
        self.faults = faults
        self.log = log
        self.control = control
        self.workspace_arm_id = workspace_arm_id

    def __call__(self, request: Request) -> Response:
        try:
            response = self._respond(request)
        except HttpError as error:
            response = error.response
        except Exception:  # an emulator bug must surface as a 500 the test sees, not a dropped connection
            logger.error("emulator error on %s %s\n%s", request.method, request.path, traceback.format_exc())
            response = arm_error(
                500, "InternalServerError", "The emulator failed: " + traceback.format_exc(limit=3)
            )
        response.headers.setdefault(
            "x-ms-request-id", request.header("x-ms-client-request-id") or str(time.time_ns())
        )
        if not request.path.startswith("/_emu/"):
            self.log.record(request, response.status, time.time())
        return response

    def _respond(self, request: Request) -> Response:
        if request.path.startswith("/_emu/"):
            return self.control.handle(request)
        target = self.storage.split(request)
        fault = self.faults.take(request)
        if fault is not None:
            return self._fault(fault, request, storage=target is not None)
        if target is not None:
            return self.storage.handle(request, *target)
        if request.path.startswith(AUTHENTICATED):
            self.issuer.authenticate(request)  # ARM authenticates before it looks for the resource
        found = self.router.find(request.method, request.path)
        if found is None:
            return self._not_found(request)
        if found is False:
            return arm_error(
                405,
                "MethodNotAllowed",
                f"The requested resource does not support http method '{request.method}'.",
            )
        handler, match = found
        return handler(request, match)

    def _fault(self, fault: Fault, request: Request, *, storage: bool) -> Response:
        code, message = fault_codes(fault, storage)
        response = (
            storage_error(fault.status, code, message, head=request.method == "HEAD")
            if storage
            else arm_error(fault.status, code, message)
        )
        if fault.retry_after is not None:
            response.headers["Retry-After"] = str(
                int(fault.retry_after) if float(fault.retry_after).is_integer() else fault.retry_after
            )
        return response

    def _not_found(self, request: Request) -> Response:
        if request.path.startswith("/mlflow/"):
            raise mlflow_error(
                404, "ENDPOINT_NOT_FOUND", f"No API endpoint for {request.method} {request.path}"
            )
        if request.path.startswith("/subscriptions/") and not request.path.lower().startswith(
            self.workspace_arm_id.lower()
        ):
            parts = request.path.split("/")
            name = parts[8] if len(parts) > 8 else request.path
            return arm_error(
                404,
                "ResourceNotFound",
                f"The Resource 'Microsoft.MachineLearningServices/workspaces/{name}' was not found.",
            )
        return arm_error(404, "NotFound", f"No route for {request.method} {request.path}.")
