"""Job conditions as the training operator keeps them (``pkg/util/status.go``), to the letter.

Clients read "the last element of ``conditions``", so the order matters:
- once ``Failed`` is True nothing changes any more;
- a condition with the same type, status and reason is a no-op (its times stay);
- otherwise the old condition of that type is removed and the new one appended at the end, keeping
  ``lastTransitionTime`` when only the reason changed;
- adding ``Running`` drops ``Restarting`` and the reverse;
- adding ``Succeeded`` or ``Failed`` turns an existing ``Running`` to status ``False`` in place.
"""

from __future__ import annotations

from typing import Any

CREATED, RUNNING, RESTARTING, SUCCEEDED, SUSPENDED, FAILED = (
    "Created",
    "Running",
    "Restarting",
    "Succeeded",
    "Suspended",
    "Failed",
)


def reason(kind: str, what: str) -> str:
    return f"{kind}{what}"


def is_true(status: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])


def is_finished(status: dict[str, Any]) -> bool:
    return is_true(status, SUCCEEDED) or is_true(status, FAILED)


def set_condition(status: dict[str, Any], kind: str, value: str, why: str, message: str, now: str) -> None:
    if is_true(status, FAILED):
        return
    conditions = status.get("conditions") or []
    current = next((c for c in conditions if c.get("type") == kind), None)
    if current is not None and current.get("status") == value and current.get("reason") == why:
        return
    transition = (
        current["lastTransitionTime"] if current is not None and current.get("status") == value else now
    )
    kept = []
    for condition in conditions:
        if (kind == RESTARTING and condition["type"] == RUNNING) or (
            kind == RUNNING and condition["type"] == RESTARTING
        ):
            continue
        if condition["type"] == kind:
            continue
        if kind in (FAILED, SUCCEEDED) and condition["type"] == RUNNING:
            condition = {**condition, "status": "False"}
        kept.append(condition)
    kept.append(
        {
            "type": kind,
            "status": value,
            "reason": why,
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": transition,
        }
    )
    status["conditions"] = kept
