"""The three PATCH bodies the API server takes: JSON merge patch, JSON patch and strategic merge patch.

Custom resources accept only the first two (a strategic merge patch to them is a 415, as on a real
cluster); core objects accept all three. The strategic merge here knows the merge keys of the pod fields
clients patch (containers by name, volumeMounts by mountPath, ports by containerPort, ...), and the
``$patch``, ``$retainKeys``, ``$deleteFromPrimitiveList`` and ``$setElementOrder`` directives.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from .errors import ApiError, unsupported_media_type

MERGE = "application/merge-patch+json"
JSON = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

# list field name → merge key, as in the Go struct tags (patchStrategy:"merge" patchMergeKey:...)
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "ownerReferences": "uid",
    "conditions": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}
_PRIMITIVE_MERGE = {"finalizers"}


def _patch_error(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict[str, Any], operations: Any) -> dict[str, Any]:
    if not isinstance(operations, list):
        raise ApiError(
            400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    try:
        return jsonpatch.apply_patch(target, operations)
    except jsonpatch.JsonPatchTestFailed as error:
        raise _patch_error(
            f"the server rejected our request due to an error in our request: {error}"
        ) from error
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError) as error:
        raise _patch_error(
            f"the server rejected our request due to an error in our request: {error}"
        ) from error


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = copy.deepcopy(target)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field) or [] if item not in value]
            continue
        _merge_field(result, key, value)
    if retain is not None:
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_field(result: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        result.pop(key, None)
    elif isinstance(value, list) and key in _MERGE_KEYS and isinstance(result.get(key), list):
        result[key] = _merge_list(result[key], value, _MERGE_KEYS[key])
    elif isinstance(value, list) and key in _PRIMITIVE_MERGE and isinstance(result.get(key), list):
        result[key] = list(result[key]) + [item for item in value if item not in result[key]]
    elif isinstance(value, dict) and isinstance(result.get(key), dict):
        merged = strategic_merge(result[key], value)
        if merged is None:
            result.pop(key)
        else:
            result[key] = merged
    else:
        result[key] = _strip_directives(copy.deepcopy(value))


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise _patch_error(f"map: {item!r} does not contain declared merge key: {merge_key}")
        index = next((i for i, old in enumerate(merged) if old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
        elif index is None:
            merged.append(_strip_directives(copy.deepcopy(item)))
        else:
            merged[index] = strategic_merge(merged[index], item)
    return merged


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def apply_patch(content_type: str, target: dict[str, Any], body: Any, *, custom: bool) -> dict[str, Any]:
    """The patched object, or the API server's error for this patch type."""
    kind = content_type.split(";")[0].strip().lower()
    # server-side apply is not emulated: it is refused as an unknown patch type
    accepted = [JSON, MERGE] if custom else [JSON, MERGE, STRATEGIC]
    if kind == MERGE:
        if not isinstance(body, dict):
            raise ApiError(
                400,
                "BadRequest",
                "json: cannot unmarshal array into Go value of type map[string]interface {}",
            )
        return merge_patch(target, body)
    if kind == JSON:
        return json_patch(target, body)
    if kind == STRATEGIC and not custom:
        return strategic_merge(target, body)
    raise unsupported_media_type(kind, accepted)
