"""Virtual-cluster quota: a pod starts only when its VC has the cpu, memory and GPUs left for it.

Pods of one attempt are admitted together (gang allocation, what PAI's scheduler does by default), so a job over
its VC's free quota stays in AttemptPreparing (``WAITING``) until running pods end and give theirs back.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .config import VirtualCluster


@dataclass
class Resources:
    cpu: int = 0
    memory: int = 0
    gpu: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory + other.memory, self.gpu + other.gpu)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory - other.memory, self.gpu - other.gpu)

    def fits_in(self, other: Resources) -> bool:
        return self.cpu <= other.cpu and self.memory <= other.memory and self.gpu <= other.gpu


@dataclass
class Quota:
    total: dict[str, Resources]
    used: dict[str, Resources] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, clusters: list[VirtualCluster]) -> Quota:
        return cls({vc.name: Resources(vc.cpu, vc.memory, vc.gpu) for vc in clusters})

    def set_total(self, vc: str, total: Resources) -> None:
        with self.lock:
            self.total[vc] = total

    def used_by(self, vc: str) -> Resources:
        with self.lock:
            return self.used.get(vc, Resources())

    def try_admit(self, vc: str, request: Resources) -> bool:
        with self.lock:
            used = self.used.get(vc, Resources())
            if vc not in self.total or not (used + request).fits_in(self.total[vc]):
                return False
            self.used[vc] = used + request
            return True

    def release(self, vc: str, amount: Resources) -> None:
        with self.lock:
            self.used[vc] = self.used.get(vc, Resources()) - amount


__all__ = ["Quota", "Resources"]
