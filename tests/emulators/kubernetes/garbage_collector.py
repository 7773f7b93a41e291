"""The garbage collector, the namespace controller and the CRD finalizer of kube-controller-manager.

- Dependents whose owners (``ownerReferences`` by uid) are all gone are deleted (background cascade).
- An owner deleted with ``propagationPolicy=Foreground`` keeps its ``foregroundDeletion`` finalizer (and
  so stays visible with a ``deletionTimestamp``) until every dependent that blocks it is gone; its
  dependents are deleted meanwhile.
- ``orphan``: dependents lose their owner reference, then the owner goes.
- A deleted namespace shows ``phase: Terminating`` until everything in it is gone.
- A deleted CRD removes all its custom resources before it disappears.
"""

from __future__ import annotations

from typing import Any

from .apiserver import ApiServer, DeleteOptions
from .clock import Clock
from .errors import ApiError
from .loop import Loop
from .resources import CRD_TYPE, NAMESPACE_TYPE, ResourceType
from .store import Store, TypeKey


class GarbageCollector(Loop):
    name = "garbage-collector"

    def __init__(
        self, api: ApiServer, store: Store, clock: Clock, *, delay: float, tick: float = 0.02
    ) -> None:
        super().__init__(store, clock, delay=delay, tick=tick)
        self.api = api

    def reconcile(self) -> None:
        objects = list(self.store.all_objects())
        uids = {obj["metadata"]["uid"] for _, obj in objects}
        for key, obj in objects:
            rt = self.api.registry.by_key(*key)
            if rt is None:
                continue
            try:
                self._collect(rt, obj, objects, uids)
            except ApiError as error:
                if error.code not in (404, 409):
                    raise

    def _collect(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        objects: list[tuple[TypeKey, dict[str, Any]]],
        uids: set[str],
    ) -> None:
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            if meta["uid"] not in self._not_before:  # a deleting object stays visible for a while
                self.hold(meta["uid"])
            if not self.due(meta["uid"]):
                return
            finalizers = meta.get("finalizers") or []
            if "foregroundDeletion" in finalizers:
                self._foreground(rt, obj, objects)
            if "orphan" in finalizers:
                self._orphan(rt, obj, objects)
            if rt.key == NAMESPACE_TYPE.key:
                self._namespace(obj, objects)
            if rt.key == CRD_TYPE.key and "customresourcecleanup.apiextensions.k8s.io" in finalizers:
                self._crd(obj)
            return
        owners = meta.get("ownerReferences") or []
        if owners and not any(ref.get("uid") in uids for ref in owners):
            policy = "Foreground" if _dependents(meta["uid"], objects) else "Background"
            self.api.delete(
                rt,
                meta.get("namespace", ""),
                meta["name"],
                DeleteOptions(propagation=policy, uid=meta["uid"]),
            )

    def _foreground(
        self, rt: ResourceType, obj: dict[str, Any], objects: list[tuple[TypeKey, dict[str, Any]]]
    ) -> None:
        uid = obj["metadata"]["uid"]
        blocking = 0
        for key, dependent in _dependents(uid, objects):
            dep_rt = self.api.registry.by_key(*key)
            meta = dependent["metadata"]
            if dep_rt is None:
                continue
            if not meta.get("deletionTimestamp"):
                policy = "Foreground" if _dependents(meta["uid"], objects) else "Background"
                self.api.delete(
                    dep_rt, meta.get("namespace", ""), meta["name"], DeleteOptions(propagation=policy)
                )
            if any(
                r.get("uid") == uid and r.get("blockOwnerDeletion") for r in meta.get("ownerReferences") or []
            ):
                blocking += 1
        if not blocking:
            self.api.remove_finalizer(rt, obj, "foregroundDeletion")

    def _orphan(
        self, rt: ResourceType, obj: dict[str, Any], objects: list[tuple[TypeKey, dict[str, Any]]]
    ) -> None:
        uid = obj["metadata"]["uid"]
        for key, dependent in _dependents(uid, objects):
            dep_rt = self.api.registry.by_key(*key)
            if dep_rt is None:
                continue
            body = {
                "metadata": {
                    "ownerReferences": [
                        r for r in dependent["metadata"]["ownerReferences"] if r.get("uid") != uid
                    ]
                    or None
                }
            }
            meta = dependent["metadata"]
            self.api.patch(
                dep_rt, meta.get("namespace", ""), meta["name"], "application/merge-patch+json", body
            )
        self.api.remove_finalizer(rt, obj, "orphan")

    def _namespace(self, namespace: dict[str, Any], objects: list[tuple[TypeKey, dict[str, Any]]]) -> None:
        name = namespace["metadata"]["name"]
        left = [(key, obj) for key, obj in objects if obj["metadata"].get("namespace") == name]
        for key, obj in left:
            rt = self.api.registry.by_key(*key)
            if rt is not None and not obj["metadata"].get("deletionTimestamp"):
                self.api.delete(rt, name, obj["metadata"]["name"], DeleteOptions())
        if not left:
            with self.store.lock:
                if self.store.get(NAMESPACE_TYPE.key, "", name) is not None:
                    self.api._remove(NAMESPACE_TYPE, namespace)

    def _crd(self, crd: dict[str, Any]) -> None:
        spec = crd["spec"]
        key = (spec["group"], spec["names"]["plural"])
        instances = self.store.list(key)
        rt = self.api.registry.by_key(*key)
        for obj in instances:
            if rt is not None and not obj["metadata"].get("deletionTimestamp"):
                self.api.delete(
                    rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], DeleteOptions()
                )
        if not instances:
            self.api.remove_finalizer(CRD_TYPE, crd, "customresourcecleanup.apiextensions.k8s.io")


def _dependents(
    uid: str, objects: list[tuple[TypeKey, dict[str, Any]]]
) -> list[tuple[TypeKey, dict[str, Any]]]:
    return [
        (key, obj)
        for key, obj in objects
        if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
    ]
