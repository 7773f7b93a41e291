"""The generic REST verbs of the emulated API server, for every resource type.

``ApiServer`` is what both the HTTP layer and the in-process controllers call: get, list, create, update,
patch, delete and deletecollection with the real semantics (generated names, uid, resourceVersion and
generation; optimistic concurrency; status subresource; defaulting, pruning and validation; validating
webhooks; finalizers, foreground/orphan propagation and graceful pod deletion). Errors are raised as
:class:`~.errors.ApiError` with the apiserver's Status.
"""

from __future__ import annotations

import base64
import builtins
import copy
import json
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import errors as err
from . import fielderrors as fe
from . import names, patch
from . import query_selectors as selectors
from .clock import Clock, rfc3339
from .resources import NAMESPACE_TYPE, Registry, ResourceType
from .store import Store, TypeKey
from .strategies import Strategy, strategy_for

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "managedFields",
    "selfLink",
)


@dataclass(frozen=True)
class DeleteOptions:
    propagation: str | None = None
    grace_seconds: int | None = None
    uid: str | None = None  # preconditions
    resource_version: str | None = None
    dry_run: bool = False


WebhookCheck = Callable[[str, dict[str, Any], "dict[str, Any] | None"], "err.ApiError | None"]


@dataclass(frozen=True)
class ValidatingWebhook:
    """An admission webhook on one resource: ``check(operation, object, old)`` returns its refusal or None."""

    name: str
    key: TypeKey
    operations: tuple[str, ...]
    check: WebhookCheck


class ApiServer:
    def __init__(self, store: Store, registry: Registry, clock: Clock) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.webhooks: list[ValidatingWebhook] = []
        self.strategies: dict[TypeKey, Strategy] = {}
        self.on_removed: list[Callable[[ResourceType, dict[str, Any]], None]] = []
        self.on_created: list[Callable[[ResourceType, dict[str, Any]], None]] = []

    def now(self) -> str:
        return rfc3339(self.clock.now())

    # ---- reads ---------------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(rt.key, self._scope(rt, namespace), name)
        if obj is None:
            raise err.not_found(rt.plural, rt.group, name)
        return obj

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str = "",
        field_selector: str = "",
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        wanted = selectors.parse_labels(label_selector)
        fields = selectors.parse_fields(field_selector, rt.fields)
        with self.store.lock:
            rv = self.store.rv
            items = self.store.list(rt.key, self._scope(rt, namespace) if namespace is not None else None)
        items = [
            o
            for o in items
            if selectors.labels_match(wanted, o["metadata"].get("labels"))
            and selectors.fields_match(fields, o)
        ]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        items, meta = self._page(items, meta, limit, continue_token, filtered=bool(wanted or fields))
        if not rt.custom:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return {"apiVersion": rt.api_version, "kind": rt.list_kind, "metadata": meta, "items": items}

    def _page(
        self,
        items: builtins.list[dict[str, Any]],
        meta: dict[str, Any],
        limit: int | None,
        token: str | None,
        filtered: bool,
    ) -> tuple[builtins.list[dict[str, Any]], dict[str, Any]]:
        if token:
            start_rv, after = _decode_continue(token)
            if self.store.events_after(start_rv) is None:
                raise err.expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start "
                    "a new list without the continue parameter, or use the continue token in this response to "
                    "retrieve the remainder of the results. Continuing with the provided token results in an "
                    "inconsistent list - objects that were created, modified, or deleted between the time the "
                    "first chunk was returned and now may show up in the list."
                )
            meta["resourceVersion"] = str(start_rv)
            items = [o for o in items if _slot(o) > after]
        if limit and len(items) > limit:
            rest = len(items) - limit
            items = items[:limit]
            meta["continue"] = _encode_continue(int(meta["resourceVersion"]), _slot(items[-1]))
            if not filtered:
                meta["remainingItemCount"] = rest
        return items, meta

    # ---- create --------------------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str, body: Any, *, dry_run: bool = False) -> dict[str, Any]:
        obj = self._decode(rt, body)
        meta = obj.setdefault("metadata", {})
        namespace = self._scope(rt, namespace)
        if rt.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise err.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        for key in _SERVER_META:
            meta.pop(key, None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(secrets.choice(_NAME_CHARS) for _ in range(5))
        strategy = strategy_for(rt, self.strategies)
        if rt.status_subresource and rt.custom:
            obj.pop("status", None)
        strategy.prepare_create(rt, obj)
        self._validate(rt, strategy, obj, None)
        with self.store.lock:
            if rt.namespaced:
                self._check_namespace(rt, namespace, meta.get("name", ""))
            self._admit("CREATE", rt, obj, None)
            if self.store.get(rt.key, namespace, meta["name"]) is not None:
                raise err.already_exists(rt.plural, rt.group, meta["name"])
            self._stamp_new(rt, obj)
            if dry_run:
                return obj
            created = self.store.create(rt.key, obj)
        for hook in self.on_created:
            hook(rt, created)
        return self.store.get(rt.key, namespace, meta["name"]) or created

    def _decode(self, rt: ResourceType, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise err.bad_request("the object provided is unrecognized")
        obj = copy.deepcopy(body)
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if rt.custom and not kind:
            raise err.bad_request(f"Object 'Kind' is missing in '{json.dumps(body, separators=(',', ':'))}'")
        if api_version and api_version != rt.api_version:
            raise err.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({rt.api_version})"
            )
        if kind and kind != rt.kind:
            raise err.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        return obj

    def _check_namespace(self, rt: ResourceType, namespace: str, name: str) -> None:
        ns = self.store.get(NAMESPACE_TYPE.key, "", namespace)
        if ns is None:
            raise err.not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            what = f'{rt.qualified} "{name}"' if name else rt.qualified
            raise err.forbidden(
                f"{what} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                name=name,
                group=rt.group,
                plural=rt.plural,
            )

    def _stamp_new(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.now()
        if rt.custom or rt.group in ("apps", "apiextensions.k8s.io"):
            meta["generation"] = 1

    def _validate(
        self, rt: ResourceType, strategy: Strategy, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        meta = obj.get("metadata") or {}
        problems = names.validate_object_meta(meta, namespaced=rt.namespaced, name_check=strategy.name_check)
        problems += strategy.validate(rt, obj, old)
        if problems:
            raise fe.invalid_error(rt.kind, rt.group, meta.get("name", ""), problems)

    def _admit(
        self, operation: str, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        for webhook in list(self.webhooks):
            if webhook.key == rt.key and operation in webhook.operations:
                refusal = webhook.check(operation, copy.deepcopy(obj), copy.deepcopy(old))
                if refusal is not None:
                    raise refusal

    # ---- update and patch ----------------------------------------------------------------------------

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        with self.store.lock:
            old = self.get(rt, namespace, name)
            obj = self._decode(rt, body)
            meta = obj.setdefault("metadata", {})
            if meta.get("name") not in (None, name):
                raise err.bad_request(
                    f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
                )
            self._check_version(rt, meta.get("resourceVersion"), old)
            return self._write(rt, self._merge_update(rt, obj, old, subresource), old, subresource, dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        with self.store.lock:
            old = self.get(rt, namespace, name)
            patched = patch.apply_patch(content_type, copy.deepcopy(old), body, custom=rt.custom)
            if not isinstance(patched, dict):
                raise err.bad_request("the patch did not produce an object")
            meta = patched.setdefault("metadata", {})
            if meta.get("resourceVersion") != old["metadata"]["resourceVersion"]:
                self._check_version(rt, meta.get("resourceVersion"), old)
            obj = self._decode(rt, patched)
            obj["metadata"]["name"] = name
            return self._write(rt, self._merge_update(rt, obj, old, subresource), old, subresource, dry_run)

    def _check_version(self, rt: ResourceType, version: str | None, old: dict[str, Any]) -> None:
        if not version:
            if rt.unconditional_update:
                return
            error = fe.invalid("metadata.resourceVersion", "0x0", "must be specified for an update")
            raise fe.invalid_error(rt.kind, rt.group, old["metadata"]["name"], [error])
        if version != old["metadata"]["resourceVersion"]:
            raise err.stale(rt.plural, rt.group, old["metadata"]["name"])

    def _merge_update(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> dict[str, Any]:
        if subresource == "status":
            merged = copy.deepcopy(old)
            if "status" in obj:
                merged["status"] = obj["status"]
            else:
                merged.pop("status", None)
            return merged
        meta = obj["metadata"]
        for key in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
        ):
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        meta["name"] = old["metadata"]["name"]
        if rt.status_subresource:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        return obj

    def _write(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        old: dict[str, Any],
        subresource: str | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        strategy = strategy_for(rt, self.strategies)
        if subresource is None:
            strategy.prepare_update(rt, obj, old)
        self._bump_generation(rt, obj, old)
        self._validate(rt, strategy, obj, old)
        if subresource is None:
            self._admit("UPDATE", rt, obj, old)
        obj["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if obj == old or dry_run:
            return obj
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
            self._remove(rt, obj)
            return obj
        return self.store.update(rt.key, obj)

    @staticmethod
    def _bump_generation(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any]) -> None:
        if "generation" not in old["metadata"]:
            return
        ignored = ("metadata", "status") if rt.status_subresource else ("metadata",)
        strip = lambda o: {k: v for k, v in o.items() if k not in ignored}  # noqa: E731
        if strip(obj) != strip(old):
            obj["metadata"]["generation"] = old["metadata"]["generation"] + 1

    # ---- delete --------------------------------------------------------------------------------------

    def delete(
        self, rt: ResourceType, namespace: str, name: str, options: DeleteOptions
    ) -> tuple[int, dict[str, Any]]:
        with self.store.lock:
            obj = self.get(rt, namespace, name)
            meta = obj["metadata"]
            if options.uid is not None and options.uid != meta["uid"]:
                why = f"Precondition failed: UID in precondition: {options.uid}, UID in object meta: {meta['uid']}"
                raise err.conflict(rt.plural, rt.group, name, why)
            if options.resource_version is not None and options.resource_version != meta["resourceVersion"]:
                why = (
                    f"Precondition failed: ResourceVersion in precondition: {options.resource_version}, "
                    f"ResourceVersion in object meta: {meta['resourceVersion']}"
                )
                raise err.conflict(rt.plural, rt.group, name, why)
            if options.dry_run:
                return 200, obj
            if meta.get("deletionTimestamp"):
                return 200, self._shorten_grace(rt, obj, options)
            return self._start_deletion(rt, obj, options)

    def _start_deletion(
        self, rt: ResourceType, obj: dict[str, Any], options: DeleteOptions
    ) -> tuple[int, dict[str, Any]]:
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        policy = options.propagation or "Background"
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        grace = self._grace(rt, obj, options)
        if rt.key == NAMESPACE_TYPE.key:  # spec.finalizers keep it Terminating until it is empty
            obj["status"] = {"phase": "Terminating"}
        elif not finalizers and not grace:
            removed = self._remove(rt, obj)
            if rt.returns_deleted_object:
                return 200, removed
            return 200, err.success(meta["name"], rt.group, rt.plural, meta["uid"])
        meta["finalizers"] = finalizers
        meta["deletionTimestamp"] = rfc3339(self.clock.now() + (grace or 0))
        meta["deletionGracePeriodSeconds"] = grace or 0
        if not finalizers:
            meta.pop("finalizers")
        return 200, self.store.update(rt.key, obj)

    @staticmethod
    def _grace(rt: ResourceType, obj: dict[str, Any], options: DeleteOptions) -> int:
        """Seconds a pod gets to stop; unscheduled and finished pods go at once, as on a real cluster."""
        if rt.key != ("", "pods"):
            return 0
        if not obj.get("spec", {}).get("nodeName") or obj.get("status", {}).get("phase") in (
            "Succeeded",
            "Failed",
        ):
            return 0
        if options.grace_seconds is not None:
            return max(options.grace_seconds, 0)
        return int(obj["spec"].get("terminationGracePeriodSeconds", 30))

    def _shorten_grace(self, rt: ResourceType, obj: dict[str, Any], options: DeleteOptions) -> dict[str, Any]:
        meta = obj["metadata"]
        if rt.key == ("", "pods") and options.grace_seconds == 0 and not meta.get("finalizers"):
            return self._remove(rt, obj)
        return obj

    def _remove(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        removed = self.store.remove(rt.key, meta.get("namespace", ""), meta["name"])
        for hook in self.on_removed:
            hook(rt, removed)
        return removed

    def delete_collection(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str,
        field_selector: str,
        options: DeleteOptions,
    ) -> dict[str, Any]:
        listed = self.list(rt, namespace, label_selector, field_selector)
        deleted = []
        for item in listed["items"]:
            meta = item["metadata"]
            try:
                _, result = self.delete(rt, meta.get("namespace", ""), meta["name"], options)
            except err.ApiError as error:
                if error.code == 404:
                    continue
                raise
            deleted.append(result if result.get("kind") != "Status" else item)
        return {
            "apiVersion": rt.api_version,
            "kind": rt.list_kind,
            "metadata": {"resourceVersion": str(self.store.rv)},
            "items": deleted,
        }

    def remove_finalizer(self, rt: ResourceType, obj: dict[str, Any], finalizer: str) -> None:
        """What a controller does when its finalizer's work is done (the object goes once none is left)."""
        with self.store.lock:
            current = self.store.get(rt.key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if current is None or current["metadata"]["uid"] != obj["metadata"]["uid"]:
                return
            finalizers = [f for f in current["metadata"].get("finalizers") or [] if f != finalizer]
            if finalizers == current["metadata"].get("finalizers"):
                return
            current["metadata"]["finalizers"] = finalizers
            if not finalizers:
                current["metadata"].pop("finalizers")
                if current["metadata"].get("deletionTimestamp"):
                    self._remove(rt, current)
                    return
            self.store.update(rt.key, current)

    # ---- helpers -------------------------------------------------------------------------------------

    @staticmethod
    def _scope(rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    def record_event(
        self, involved: dict[str, Any], event_type: str, reason: str, message: str, component: str
    ) -> None:
        """A core Event about ``involved``, as controllers and the kubelet record them."""
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        now = self.now()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "kind": involved.get("kind"),
                "apiVersion": involved.get("apiVersion"),
                "name": meta["name"],
                "namespace": namespace,
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": component},
            "reportingComponent": component,
        }
        events = self.registry.by_key("", "events")
        if events is not None and self.store.get(NAMESPACE_TYPE.key, "", namespace) is not None:
            self._stamp_new(events, event)
            self.store.create(events.key, event)


def _slot(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def _encode_continue(rv: int, after: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": "/".join(after)}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        namespace, _, name = raw["start"].partition("/")
        return int(raw["rv"]), (namespace, name)
    except (ValueError, KeyError, TypeError) as error:
        raise err.bad_request(f"continue key is not valid: {error}") from error
